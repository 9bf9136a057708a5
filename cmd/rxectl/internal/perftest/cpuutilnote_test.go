package perftest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// cpuUtilWarning is what perftest's force_dependecies writes to standard
// error when --cpu_util comes without -D, after a RESULT_LINE on standard
// output; the run then goes on without the column.
const cpuUtilWarning = " CPU Utilization works only with Duration mode.\n"

// TestCPUUtilWithoutDuration: --cpu_util without -D is taken, as perftest
// takes it: a RESULT_LINE among the parse notes (in force_dependecies'
// order: after the peak warning, before the dynamic polling note), the
// warning on standard error, and no CPU figures.
func TestCPUUtilWithoutDuration(t *testing.T) {
	t.Parallel()
	line := report.ResultLine + "\n"
	tests := []struct {
		args           []string
		cpuUtil        bool
		stdout, stderr string
	}{
		{[]string{"read-bw", "--cpu_util", "192.0.2.1"}, false, line + dynPollNote, cpuUtilWarning},
		{[]string{"read-bw", "--cpu_util", "-n", "5000", "192.0.2.1"}, false, line, cpuUtilWarning},
		{[]string{"write-bw", "--cpu_util", "-n", "20001", "192.0.2.1"}, false, peakWarning + line, cpuUtilWarning},
		{[]string{"send-bw", "--cpu_util", "-n", "100", "192.0.2.1"}, false, line + dynPollNote, cpuUtilWarning},
		{[]string{"read-bw", "--cpu_util", "--json", "192.0.2.1"}, false, "", cpuUtilWarning},
		{[]string{"read-bw", "--cpu_util", "-D", "2", "-f", "0", "192.0.2.1"}, true, peakWarning, ""},
		{[]string{"read-bw", "-n", "5000", "192.0.2.1"}, false, "", ""},
		// The latency tests too (force_dependecies does not look at the
		// test): without -D the warning, with it the column. Their
		// dynamic polling is always off.
		{[]string{"write-lat", "--cpu_util", "192.0.2.1"}, false, line + dynPollNote, cpuUtilWarning},
		{[]string{"send-lat", "--cpu_util", "-n", "100"}, false, line + dynPollNote, cpuUtilWarning},
		{[]string{"atomic-lat", "--cpu_util", "--output", "latency", "192.0.2.1"}, false, "", cpuUtilWarning},
		{[]string{"read-lat", "--cpu_util", "-D", "2", "-f", "0", "192.0.2.1"}, true, dynPollNote, ""},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.cpuUtil, o.cpuUtil, "%v", tc.args)
		require.Equal(t, tc.stdout, o.parseNotes(), "%v", tc.args)
		require.Equal(t, tc.stderr, o.cpuUtilNote(), "%v", tc.args)
	}
}

// TestCPUUtilWithoutDurationRun: the run prints the notes first and its
// table without the CPU_Util column, a latency test's too.
func TestCPUUtilWithoutDurationRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "64", "--cpu_util")
	require.Equal(t, cli.ExitOK, code, errs)
	require.True(t, strings.HasPrefix(out, report.ResultLine+"\n"+dynPollNote+report.ResultLine+"\n"), "%q", out)
	require.Contains(t, errs, cpuUtilWarning)
	require.Contains(t, out, report.BWHeaderMiB+"\n")
	require.NotContains(t, out, report.CPUUtilHeader)

	out, errs, code = runCmd(t, "write-lat", "--loopback", "--udp-port", "0", "-n", "20", "--cpu_util")
	require.Equal(t, cli.ExitOK, code, errs)
	require.True(t, strings.HasPrefix(out, report.ResultLine+"\n"), "%q", out)
	require.Contains(t, errs, cpuUtilWarning)
	require.Contains(t, out, report.LatHeader+"\n")
	require.NotContains(t, out, report.CPUUtilHeader)
}
