package perftest

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestUCLoopback runs the four programs perftest offers with -c UC, in
// loopback: the header names the connection type and the row counts the
// iterations.
func TestUCLoopback(t *testing.T) {
	for _, prog := range []string{"write-bw", "write-lat", "send-bw", "send-lat"} {
		t.Run(prog, func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, prog, "-c", "UC", "-s", "4096", "--loopback", "--udp-port", "0", "-n", "20")
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, " Connection type : UC\t\tUsing SRQ      : OFF\n")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			row := fmtReport
			if strings.HasSuffix(prog, "lat") {
				row = fmtReportLat
			}
			f := fields(t, cFormatRE(row), lines[len(lines)-2])
			require.Equal(t, "4096", f[0])
			require.Equal(t, "20", f[1])
		})
	}
}

func TestUCRefusedForReadAndAtomic(t *testing.T) {
	for _, prog := range []string{"read-bw", "atomic-lat"} {
		_, errs, code := runCmd(t, prog, "-c", "UC", "--loopback")
		require.Equal(t, cli.ExitUsage, code)
		require.Contains(t, errs, "UC has no")
	}
	_, errs, code := runCmd(t, "write-bw", "-c", "UD", "--loopback")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "UD has no")
	_, errs, code = runCmd(t, "send-bw", "-c", "XRC", "--loopback")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "RC, UC and UD")
}

// TestUDLoopback runs send-bw and send-lat with -c UD in loopback, 2 B and
// 4 KiB (the loopback MTU); send-bw's default size, 64 KiB, is cut to the
// MTU as perftest's check_mtu does, with its note.
func TestUDLoopback(t *testing.T) {
	for _, tc := range []struct {
		prog, size, want, note string
	}{
		{"send-bw", "2", "2", ""}, {"send-bw", "4096", "4096", ""}, {"send-lat", "2", "2", ""},
		{"send-lat", "4096", "4096", ""}, {"send-bw", "", "4096", " Max msg size in UD is MTU 4096\n"},
	} {
		t.Run(tc.prog+"/"+tc.size, func(t *testing.T) {
			t.Parallel()
			args := []string{tc.prog, "-c", "UD", "--loopback", "--udp-port", "0", "-n", "20"}
			if tc.size != "" {
				args = append(args, "-s", tc.size)
			}
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, " Connection type : UD\t\tUsing SRQ      : OFF\n")
			require.Contains(t, errs, tc.note)
			if tc.note != "" {
				// Both ends change the size, from one command line: the
				// note is the client's only.
				require.Equal(t, 1, strings.Count(errs, "Max msg size"), errs)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			row := fmtReport
			if strings.HasSuffix(tc.prog, "lat") {
				row = fmtReportLat
			}
			f := fields(t, cFormatRE(row), lines[len(lines)-2])
			require.Equal(t, tc.want, f[0])
			require.Equal(t, "20", f[1])
		})
	}
}

// TestUnreliableDepths: as perftest's force_dependecies, a UC or UD test
// with the default -r posts a receive for every iteration (up to
// UC_MAX_RX), since a SEND that finds none is lost; UD, -e and -a keep CQ
// moderation for large messages.
func TestUnreliableDepths(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		rxDepth, cqMod int
	}{
		{[]string{"send-bw", "-n", "20000", "-s", "4096"}, 512, 100},
		{[]string{"send-bw", "-n", "20000", "-s", "4096", "-c", "UD"}, 16000, 100},
		{[]string{"send-bw", "-n", "5000", "-s", "4096", "-c", "UC"}, 5000, 100},
		{[]string{"send-bw", "-n", "300", "-s", "4096", "-c", "UD"}, 300, 100},
		{[]string{"send-bw", "-n", "5000", "-s", "4096", "-c", "UD", "-r", "64"}, 64, 100},
		{[]string{"send-lat", "-n", "2000", "-c", "UC"}, 2000, 1},
		{[]string{"send-bw", "-n", "20000", "-c", "UD"}, 16000, 100},
		{[]string{"send-bw", "-n", "1000", "-c", "UC"}, 1000, 1},
		{[]string{"send-bw", "-n", "1000"}, 512, 1},
		{[]string{"send-bw", "-n", "1000", "-e"}, 512, 100},
		{[]string{"send-bw", "-n", "1000", "-a"}, 512, 100},
		{[]string{"write-bw", "-n", "1000", "-Q", "8"}, 1, 8},
		// MIN_SRQ_UD_RX_DEPTH: an SRQ of UC or UD at -n 100 or less gets
		// 100 receives, whatever -r; a -r other than the default is kept.
		{[]string{"send-bw", "-n", "100", "-c", "UD", "--use-srq", "-r", "50"}, 100, 100},
		{[]string{"send-bw", "-n", "1000", "-c", "UD", "-r", "600"}, 600, 100},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
			require.NoError(t, err)
			require.Equal(t, tc.rxDepth, o.rxDepth, "rx depth")
			require.Equal(t, tc.cqMod, o.cqMod, "cq-mod")
		})
	}
}

// TestUnreliableLatLost: a UC or UD latency test that loses a message
// (--drop, seeded: the same messages every run) ends with an error naming
// the lost message and how far the run got once --loss-wait has passed
// without the peer's message, not after the 60 s stall bound. Either end
// may give up first (the other then sees it leave, and --loopback reports
// the first one's error; only the client names the faults, injected on
// its device).
func TestUnreliableLatLost(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send-lat", "-c", "UD", "-n", "1000"}, `waiting for the peer's SEND \d+: likely a message lost on an unreliable transport \(-c UD resends nothing`},
		{[]string{"send-lat", "-c", "UC", "-n", "1000"}, `waiting for the peer's SEND \d+: likely a message lost on an unreliable transport \(-c UC resends nothing`},
		{[]string{"write-lat", "-c", "UC", "-n", "1000"}, `waiting for the peer's RDMA WRITE \d+: likely a message lost on an unreliable transport \(-c UC resends nothing`},
		{[]string{"send-lat", "-c", "UD", "-D", "20"}, `; \d+ round trips completed\n`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			args := append(tc.args, "--loopback", "--udp-port", "0", "--drop", "0.01", "--loss-wait", "300ms")
			_, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitFail, code, errs)
			require.Contains(t, errs, "nothing for 300ms (--loss-wait) ")
			require.Regexp(t, tc.want, errs)
			if !strings.Contains(errs, "rxectl "+tc.args[0]+": server: ") { // --loopback's server injects no faults
				require.Contains(t, errs, "faults are injected here (drop=0.01)")
			}
			if !slices.Contains(tc.args, "-D") {
				require.Regexp(t, `; \d+ of 1000 round trips completed\n`, errs)
			}
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

// TestLossWaitFlag: --loss-wait is the UC and UD latency tests'.
func TestLossWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send-lat", "--loss-wait", "2s", "--loopback"}, "--loss-wait is for -c UC and UD"},
		{[]string{"send-lat", "-c", "UD", "--loss-wait", "0s", "--loopback"}, "--loss-wait 0s: a positive duration"},
		{[]string{"send-bw", "-c", "UD", "--loss-wait", "2s", "--loopback"}, "flag provided but not defined: -loss-wait"},
	} {
		_, errs, code := runCmd(t, tc.args...)
		require.Equal(t, cli.ExitUsage, code, tc.args)
		require.Contains(t, errs, tc.want)
	}
	o, err := parsePerftest(findTest(t, "write-lat"), []string{"-c", "UC", "--loss-wait", "2s"})
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, o.lossWait)
	o, err = parsePerftest(findTest(t, "send-lat"), []string{"-c", "UD"})
	require.NoError(t, err)
	require.Equal(t, defLossWait, o.lossWait)
}

// TestUnreliableLossNoted: in loopback the server's note of what arrived
// of a size reaches the run's stderr, marked as the server's; with UC and
// UD, where a lost message and a client that stopped look alike to it, the
// note names both.
func TestUnreliableLossNoted(t *testing.T) {
	for _, tc := range []struct{ conn, size string }{{"UD", "2048"}, {"UC", "16384"}} {
		t.Run(tc.conn, func(t *testing.T) {
			t.Parallel()
			_, errs, code := runCmd(t, "send-bw", "-c", tc.conn, "-s", tc.size, "--loopback", "--udp-port", "0",
				"-n", "500", "--drop", "0.05,dir=send", "--seed", "3")
			require.Equal(t, cli.ExitOK, code, errs)
			m := regexp.MustCompile(`(?m)^server: Received (\d+) of 500 messages of ` + tc.size + ` bytes: the rest were lost on the way \(` +
				tc.conn + ` resends nothing\) or the client stopped sending before they arrived$`).FindStringSubmatch(errs)
			require.NotNil(t, m, errs)
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			require.Less(t, n, 500)
		})
	}
}

// TestCapWarningOncePerRun: a --loopback run whose socket buffers the
// kernel capped says so once, whichever of its two devices opens its
// sockets first, and so does every run in the process.
func TestCapWarningOncePerRun(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skipf("no net.core.rmem_max to compare with: %v", err)
	}
	if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || v >= netdev.DefaultRecvBuffer {
		t.Skipf("net.core.rmem_max = %s: the receive buffer asked for is not capped", strings.TrimSpace(string(b)))
	}
	for range 4 {
		_, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "10", "--no-force-buffers")
		require.Equal(t, cli.ExitOK, code, errs)
		require.Equal(t, 1, strings.Count(errs, "the kernel capped the socket buffers"), errs)
	}
}

// TestPrefixWriter: each line reaches the writer whole, with the prefix,
// however the writes cut it; a last line without its newline waits.
func TestPrefixWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
	}{
		{"one line", []string{" a\n"}, []string{"s: a\n"}},
		{"two in one write", []string{" a\n b\n"}, []string{"s: a\n", "s: b\n"}},
		{"cut", []string{" a", "b", "c\n d"}, []string{"s: abc\n"}},
		{"empty line", []string{"\n"}, []string{"s:\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got recordWriter
			w := &prefixWriter{w: &got, prefix: []byte("s:")}
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			require.Equal(t, tc.want, got.writes)
		})
	}
}

// recordWriter keeps each Write as a string.
type recordWriter struct{ writes []string }

func (r *recordWriter) Write(b []byte) (int, error) {
	r.writes = append(r.writes, string(b))
	return len(b), nil
}

// TestUDSizeAboveMTU: a UD message size given with -s above the path MTU
// is refused, as perftest's check_mtu refuses it; with -a the sizes stop
// at the MTU, with perftest's note.
func TestUDSizeAboveMTU(t *testing.T) {
	_, errs, code := runCmd(t, "send-bw", "-c", "UD", "-s", "8192", "--loopback", "--udp-port", "0", "-n", "20")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "-s 8192: a UD message is at most the path MTU, 4096 bytes")

	out, errs, code := runCmd(t, "send-bw", "-c", "UD", "-a", "--loopback", "--udp-port", "0", "-n", "20")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Equal(t, 1, strings.Count(errs, " Max msg size in UD is MTU 4096\n Changing to this MTU\n"), errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := fields(t, cFormatRE(fmtReport), lines[len(lines)-2])
	require.Equal(t, "4096", last[0], "-a stops at the MTU")
}
