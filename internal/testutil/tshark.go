package testutil

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Judge is the part of testing.TB that Tshark and RequireRoCEFrames use.
type Judge interface {
	Failer
	Logf(format string, args ...any)
}

// Tshark runs the tshark at path with args and returns its standard
// output, with Wireshark's RPC-over-RDMA payload heuristic disabled: it
// claims arbitrary RDMA payloads and then reports them malformed (frames
// 5, 6, 36, 49 and 69 of cmd/rxectl/internal/dump's
// testdata/scapy/scapy_fixtures.pcap with tshark 4.0). tshark 4.0 calls
// it rpcrdma_infiniband, other Wireshark sources rpcordma_infiniband, and
// tshark refuses an unknown name, so each is tried, then neither. A
// failing tshark fails t.
func Tshark(t Judge, path string, args []string) []byte {
	t.Helper()
	for _, heur := range []string{"rpcrdma_infiniband", "rpcordma_infiniband", ""} {
		cmdArgs := slices.Clone(args)
		if heur != "" {
			cmdArgs = append([]string{"--disable-heuristic", heur}, cmdArgs...)
		}
		cmd := exec.Command(path, cmdArgs...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil && heur != "" && strings.Contains(stderr.String(), "No such protocol "+heur) {
			continue
		}
		t.Logf("%s %s", path, strings.Join(cmdArgs, " "))
		if err != nil {
			t.Fatalf("tshark: %v: %s", err, stderr.String())
		}
		return out
	}
	return nil // not reached: the last try has no heuristic to refuse
}

// RequireRoCEFrames has the tshark at path judge the capture file, with
// ports (UDP ports other than 4791) decoded as RoCEv2 and, if filter is
// not empty, only the frames that display filter keeps: there must be
// frames of them, each dissected as Ethernet, IPv4, UDP and InfiniBand
// (then at most payload data), none malformed and none with an expert
// error (Wireshark's PI_ERROR severity or above).
func RequireRoCEFrames(t Judge, path, file string, frames int, filter string, ports ...uint16) {
	t.Helper()
	args := []string{"-r", file, "-n"}
	for _, p := range ports {
		// "infiniband" is the RoCEv2 dissector's entry in Wireshark's
		// udp.port table; an entry matches either port of a datagram.
		args = append(args, "-d", fmt.Sprintf("udp.port==%d,infiniband", p))
	}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	args = append(args, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "frame.protocols", "-e", "_ws.malformed", "-e", "_ws.expert.severity",
		"-e", "_ws.expert.message")
	out := Tshark(t, path, args)
	lines := strings.FieldsFunc(string(out), func(r rune) bool { return r == '\n' })
	if len(lines) != frames {
		t.Fatalf("tshark shows %d frames, want %d:\n%s", len(lines), frames, out)
	}
	const severityError = 0x800000 // PI_ERROR in Wireshark's epan/expert.h
	for _, line := range lines {
		f := strings.Split(line, "\t")
		switch {
		case len(f) != 5:
			t.Fatalf("tshark line %q: want 5 fields", line)
		case f[1] != "eth:ethertype:ip:udp:infiniband" && f[1] != "eth:ethertype:ip:udp:infiniband:data":
			t.Fatalf("frame %s dissected as %s, not RoCEv2 with no payload protocol", f[0], f[1])
		case f[2] != "":
			t.Fatalf("frame %s is malformed: %s", f[0], f[4])
		}
		for _, sev := range strings.Split(f[3], ",") {
			if sev == "" {
				continue
			}
			n, err := strconv.ParseUint(sev, 0, 32)
			if err != nil {
				t.Fatalf("frame %s: severity %q: %v", f[0], sev, err)
			}
			if n >= severityError {
				t.Fatalf("frame %s: expert error: %s", f[0], f[4])
			}
		}
	}
}
