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

// runCmd runs an rxectl command line in this process as rxectl's command
// table would: a perftest subcommand, "help" of one, or "dump". It returns
// the output and the exit status. A --loopback run that does not set the
// ACK timeout runs loadProof: its two ends share the test process, and
// under -race on a loaded host one end's goroutines can go without a
// processor for longer than perftest's 8 tries of 67 ms (-u 14), which
// ended loss-free loopback runs in RETRY_EXC_ERR; a test about the retry
// budget sets -u itself.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	switch {
	case args[0] == "dump":
		code = dump.Run(args[1:], strings.NewReader(""), &out, &errb)
	case args[0] == "help" && len(args) == 2:
		findTest(t, args[1]).Usage(&out)
	default:
		if loopbackDefaultTimeout(args[1:]) {
			args = loadProof(args...)
		}
		code = findTest(t, args[0]).Run(args[1:], &out, &errb, nil)
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
