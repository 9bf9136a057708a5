package perftest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// dynPollNote is the line perftest's force_dependecies prints last while
// it parses the command line when it turns its dynamic CQE polling off:
// for an iteration run of fewer than 3000 iterations, a bidirectional
// SEND test and every latency test.
const dynPollNote = "Disabling dynamic polling\n"

// TestDynamicPollingNote: the note and the header's "CQE Poll Batch"
// line (bandwidth tests only) follow perftest's rule: "Dynamic" while
// dynamic polling is on, else the fixed batch CTX_POLL_BATCH, 16.
func TestDynamicPollingNote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		notes string
		batch string
	}{
		{[]string{"write-bw", "192.0.2.1"}, "", "Dynamic"}, // 5000 iterations
		{[]string{"read-bw", "192.0.2.1"}, dynPollNote, "16"},
		{[]string{"read-bw", "-n", "2999", "192.0.2.1"}, dynPollNote, "16"},
		{[]string{"read-bw", "-n", "3000", "192.0.2.1"}, "", "Dynamic"},
		{[]string{"read-bw", "-a", "192.0.2.1"}, dynPollNote, "16"},
		{[]string{"write-bw", "-a", "192.0.2.1"}, "", "Dynamic"},
		{[]string{"read-bw", "-D", "5"}, peakWarning, "Dynamic"},
		{[]string{"write-bw", "--run_infinitely", "-D", "2"}, peakWarning, "Dynamic"},
		{[]string{"send-bw"}, peakWarning + dynPollNote, "16"}, // the server
		{[]string{"send-bw", "-b", "-n", "5000"}, dynPollNote, "16"},
		{[]string{"send-bw", "-b", "-D", "5"}, peakWarning + dynPollNote, "16"},
		{[]string{"write-bw", "-b", "-n", "5000"}, "", "Dynamic"},
		{[]string{"write-bw", "-n", "20001", "192.0.2.1"}, peakWarning, "Dynamic"},
		{[]string{"write-bw", "-l", "4", "-n", "100", "192.0.2.1"}, report.ResultLine + "\n" + listNote + dynPollNote, "16"},
		{[]string{"read-lat", "192.0.2.1"}, dynPollNote, ""},
		{[]string{"send-lat", "-D", "5"}, dynPollNote, ""},
		{[]string{"atomic-lat", "-n", "5000"}, dynPollNote, ""},
		{[]string{"read-bw", "--json", "192.0.2.1"}, "", "16"},
		{[]string{"read-lat", "--output", "latency", "192.0.2.1"}, "", ""},
	}
	for _, tc := range tests {
		pt := findTest(t, tc.args[0])
		o, err := parsePerftest(pt, tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.notes, o.parseNotes(), "%v", tc.args)
		require.Equal(t, tc.batch, o.cqePollBatch(pt), "%v", tc.args)
	}
}

// TestDynamicPollingHeader: a run prints the note first and the fixed
// batch in its header, as perftest does.
func TestDynamicPollingHeader(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "64")
	require.Equal(t, cli.ExitOK, code, errs)
	require.True(t, strings.HasPrefix(out, dynPollNote+report.ResultLine+"\n"), "%q", out)
	require.Contains(t, out, "\n CQ Moderation   : 20\n CQE Poll Batch  : 16\n Mtu ")
	require.NotContains(t, out, "Dynamic")
}
