package perftest

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memAvailable returns the memory the kernel can give this process
// without swapping (MemAvailable of /proc/meminfo) and whether it knows.
// A variable, so that tests can pretend a small machine.
var memAvailable = func() (uint64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// checkMemory refuses a test whose buffers (two regions of buffSize
// bytes per QP: what this end sends from and what the peer targets) and
// timestamps (two per iteration of every QP on a bandwidth client, one
// per iteration in a latency test) do not fit in the available memory,
// twice over with --loopback, whose two ends share the process. Go cannot
// recover from an allocation the kernel refuses ("fatal error: runtime:
// out of memory"), and one it grants but cannot back ends in the OOM
// killer.
func (s *session) checkMemory() error {
	o := s.o
	bufs := 2 * uint64(o.qps) * uint64(s.buffSize)
	var stamps uint64
	switch {
	case o.duration > 0:
	case s.t.lat:
		stamps = 8 * uint64(o.iters)
	case s.client || o.bidir:
		stamps = 2 * 8 * uint64(o.iters) * uint64(o.qps)
	}
	need := bufs + stamps
	if o.loopback {
		need *= 2
	}
	avail, ok := memAvailable()
	if !ok || need <= avail {
		return nil
	}
	what := fmt.Sprintf("buffers of 2 × %d QPs × %s", o.qps, byteSize(uint64(s.buffSize)))
	if stamps > 0 {
		what += fmt.Sprintf(" and %s of timestamps", byteSize(stamps))
	}
	if o.loopback {
		what += ", for each of the two ends of --loopback"
	}
	return fmt.Errorf("the test needs %s of memory (%s), more than the %s available: use a smaller -s, -q or -n", byteSize(need), what, byteSize(avail))
}

// byteSize formats n bytes in binary units, e.g. "1.5 GiB".
func byteSize(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
