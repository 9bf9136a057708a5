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

// runCmd runs an rxectl command line in this process as rxectl's command
// table would: a perftest subcommand, "help" of one, or "dump". It returns
// the output and the exit status.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	switch {
	case args[0] == "dump":
		code = dump.Run(args[1:], strings.NewReader(""), &out, &errb)
	case args[0] == "help" && len(args) == 2:
		findTest(t, args[1]).Usage(&out)
	default:
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
