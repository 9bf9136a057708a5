package perftest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/dump"
	"github.com/gorxe/gorxe/internal/testutil"
)

// loadProof returns the command line args (a perftest subcommand and its
// arguments) with -u testutil.QPTimeout after the subcommand: the ACK
// timeout of a run whose subject is not the retry budget, one that
// outlasts a loaded host's stalls. A -u among the arguments comes later
// and wins.
func loadProof(args ...string) []string {
	return append([]string{args[0], "-u", testutil.QPTimeoutArg}, args[1:]...)
}

// loopbackDefaultTimeout reports whether the arguments of a perftest
// subcommand ask for --loopback and leave the ACK timeout (-u,
// --qp-timeout) at its default.
func loopbackDefaultTimeout(args []string) bool {
	loopback := false
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == "loopback":
			loopback = true
		case name == "u" || name == "qp-timeout":
			return false
		}
	}
	return loopback
}

// udLossWait is the --loss-wait runCmd gives a --loopback UC or UD
// latency run that leaves it at its default: loopback loses none of a
// ping-pong's messages, and under -race on a loaded host a 1 s silence
// (the default) ended 5 of 80 UD send-lat runs beside two busy loops, as
// the 0.6-1.8 s stalls of a process that gets no processor
// (docs/performance.md, "RETRY_EXC_ERR on a loaded machine") do; a lost
// message still fails the run, later. A test about losses sets
// --loss-wait itself.
const udLossWait = "10s"

// unreliableLatDefaultWait reports whether args, the arguments of
// perftest subcommand pt, ask for a --loopback UC or UD latency run
// (multicast included) that leaves --loss-wait at its default.
func unreliableLatDefaultWait(pt Test, args []string) bool {
	o, err := parsePerftest(pt, args)
	return err == nil && pt.lat && o.loopback && (o.connType == "UC" || o.connType == "UD") && !o.set["loss-wait"]
}

// runCmd runs an rxectl command line in this process as rxectl's command
// table would: a perftest subcommand, "help" of one, or "dump". It returns
// the output and the exit status. A --loopback run that does not set the
// ACK timeout runs loadProof: its two ends share the test process, and
// under -race on a loaded host one end's goroutines can go without a
// processor for longer than perftest's 8 tries of 67 ms (-u 14), which
// ended loss-free loopback runs in RETRY_EXC_ERR; a test about the retry
// budget sets -u itself. For the same reason a --loopback UC or UD
// latency run (multicast included) that does not set --loss-wait waits
// udLossWait for the peer's next message.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	switch {
	case args[0] == "dump":
		code = dump.Run(args[1:], strings.NewReader(""), &out, &errb)
	case args[0] == "help" && len(args) == 2:
		findTest(t, args[1]).Usage(&out)
	default:
		pt := findTest(t, args[0])
		if loopbackDefaultTimeout(args[1:]) {
			args = loadProof(args...)
		}
		if unreliableLatDefaultWait(pt, args[1:]) {
			args = append([]string{args[0], "--loss-wait", udLossWait}, args[1:]...)
		}
		code = pt.Run(args[1:], &out, &errb, nil)
	}
	return out.String(), errb.String(), code
}

// findTest returns the subcommand named cmd.
func findTest(t testing.TB, cmd string) Test {
	t.Helper()
	for _, pt := range Tests {
		if pt.cmd == cmd {
			return pt
		}
	}
	t.Fatalf("no test %q", cmd)
	return Test{}
}

// pcapFrames returns the frames of the pcap file (a --pcap capture).
func pcapFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	f, err := os.ReadFile(file)
	require.NoError(t, err)
	r, err := pcapgo.NewReader(bytes.NewReader(f))
	require.NoError(t, err)
	var frames [][]byte
	for {
		frame, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		require.NoError(t, err)
		frames = append(frames, frame)
	}
}

// TestLoopbackDefaultTimeout: runCmd makes loopback runs load-proof only
// when they leave the ACK timeout at its default.
func TestLoopbackDefaultTimeout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--loopback", "-n", "5"}, true},
		{[]string{"-loopback=true"}, true},
		{[]string{"--loopback", "-u", "8"}, false},
		{[]string{"--qp-timeout=20", "--loopback"}, false},
		{[]string{"-u=14", "--loopback"}, false},
		{[]string{"127.0.0.1", "-n", "5"}, false},
		{[]string{"--pcap", "loopback"}, false},
	} {
		require.Equal(t, tc.want, loopbackDefaultTimeout(tc.args), "%q", tc.args)
	}
}

// TestUnreliableLatDefaultWait: runCmd gives udLossWait to the --loopback
// UC, UD and multicast latency runs that leave --loss-wait at its
// default, and to no other run.
func TestUnreliableLatDefaultWait(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"send-lat", "-c", "UD", "--loopback"}, true},
		{[]string{"write-lat", "-c", "UC", "--loopback", "-n", "20"}, true},
		{[]string{"send-lat", "-g", "-M", "239.1.1.1", "--loopback"}, true},
		{[]string{"send-lat", "-c", "UD", "--loopback", "--loss-wait", "300ms"}, false},
		{[]string{"send-lat", "--loopback"}, false},            // RC
		{[]string{"send-bw", "-c", "UD", "--loopback"}, false}, // a bandwidth test
		{[]string{"send-lat", "-c", "UD", "127.0.0.1"}, false},
		{[]string{"send-lat", "-c", "XX", "--loopback"}, false}, // refused
	} {
		require.Equal(t, tc.want, unreliableLatDefaultWait(findTest(t, tc.args[0]), tc.args[1:]), "%q", tc.args)
	}
}
