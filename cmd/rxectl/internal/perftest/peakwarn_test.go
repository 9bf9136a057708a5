package perftest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// peakWarning is the line perftest's force_dependecies prints (on
// stdout, while it parses the command line) when it turns the peak off
// itself: a duration run, send-bw's server, or more than 20,000
// iterations; not with -N, not for latency tests.
const peakWarning = " WARNING: BW peak won't be measured in this run.\n"

// listNote is the note force_dependecies prints before it when -l sets
// -Q.
const listNote = "Post List requested - CQ moderation will be the size of the post list\n"

// cqModWarning is force_dependecies' warning when -Q is given with a
// size above MSG_SIZE_CQ_MOD_LIMIT (8192) that would have turned it off.
var cqModWarning = report.ResultLine + "\nWarning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"

// TestParseNotes: the notes perftest prints while parsing, in its order,
// before anything else (dynPollNote: cqepoll_test.go) (the server's "Waiting for client" box included).
func TestParseNotes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "-D", "5"}, peakWarning},
		{[]string{"read-bw", "--run_infinitely"}, peakWarning},
		{[]string{"send-bw"}, peakWarning + dynPollNote}, // the server; 1000 iterations
		{[]string{"send-bw", "192.0.2.1"}, dynPollNote},
		{[]string{"send-bw", "-b"}, dynPollNote},
		{[]string{"send-bw", "-N"}, dynPollNote},
		{[]string{"send-bw", "--loopback"}, dynPollNote}, // prints the client's side
		{[]string{"write-bw", "-n", "20001", "192.0.2.1"}, peakWarning},
		{[]string{"write-bw", "-n", "20000", "192.0.2.1"}, ""},
		{[]string{"write-bw", "-N", "-D", "5"}, ""},
		{[]string{"send-lat", "-D", "5"}, dynPollNote},
		{[]string{"write-bw", "-D", "5", "-l", "4"}, report.ResultLine + "\n" + listNote + peakWarning},
		{[]string{"write-bw", "-l", "4", "192.0.2.1"}, report.ResultLine + "\n" + listNote},
		{[]string{"write-bw", "-D", "5", "--output", "bandwidth"}, ""},
		{[]string{"write-bw", "-D", "5", "--json"}, ""},
		{[]string{"write-bw", "-Q", "10", "192.0.2.1"}, cqModWarning}, // 64 KiB
		{[]string{"write-bw", "-Q", "1", "192.0.2.1"}, ""},
		{[]string{"write-bw", "-Q", "10", "-s", "8192", "192.0.2.1"}, ""},
		{[]string{"write-bw", "-Q", "10", "-a", "192.0.2.1"}, ""},
		{[]string{"write-bw", "-Q", "10", "-e", "192.0.2.1"}, ""},
		{[]string{"send-bw", "-Q", "10", "-c", "UD", "192.0.2.1"}, dynPollNote},
		{[]string{"write-lat", "-Q", "10", "-s", "65536", "192.0.2.1"}, cqModWarning + dynPollNote}, // checked before -Q is clipped to -t
		{[]string{"write-bw", "-Q", "8", "-l", "8", "-D", "5"}, cqModWarning + peakWarning},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.parseNotes(), "%v", tc.args)
	}
}

// TestPeakWarningPrinted: a run prints the warning first, as perftest.
func TestPeakWarningPrinted(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-D", "1", "-f", "0", "-s", "4096")
	require.Equal(t, cli.ExitOK, code, errs)
	require.True(t, strings.HasPrefix(out, peakWarning+report.ResultLine+"\n"), "%q", out)
	require.Equal(t, 1, strings.Count(out, "WARNING"))
}
