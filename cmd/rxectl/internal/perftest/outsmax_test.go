package perftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/rxe"
)

// outsAboveMax is what perftest's ctx_set_out_reads writes to standard
// error when -o is above the device's max_qp_rd_atom, after a
// RESULT_LINE on standard output; it then runs with that maximum.
const outsAboveMax = " Number of outstanding reads is above max = 128\n Changing to that max value\n"

// TestOutReadsAboveMax: -o takes any number, as perftest's parser does
// (CHECK_VALUE); one above the device maximum runs at the maximum with
// perftest's note, one of 0 or less at the maximum without a note
// (ctx_set_out_reads).
func TestOutReadsAboveMax(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args           []string
		outs           int
		stdout, stderr string
	}{
		{[]string{"read-bw", "-o", "200", "192.0.2.1"}, 128, report.ResultLine + "\n", outsAboveMax},
		{[]string{"atomic-lat", "-o", "129", "192.0.2.1"}, 128, report.ResultLine + "\n", outsAboveMax},
		{[]string{"read-bw", "-o", "200", "--json", "192.0.2.1"}, 128, "", outsAboveMax},
		{[]string{"read-bw", "-o", "128", "192.0.2.1"}, 128, "", ""},
		{[]string{"read-bw", "-o", "4", "192.0.2.1"}, 4, "", ""},
		{[]string{"read-bw", "-o", "0", "192.0.2.1"}, 0, "", ""},
		{[]string{"read-bw", "-o", "-1", "192.0.2.1"}, 0, "", ""},
		{[]string{"read-bw", "192.0.2.1"}, 0, "", ""},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.outs, o.outs, "%v: 0 is the device maximum", tc.args)
		stdout, stderr := o.outReadsNote()
		require.Equal(t, tc.stdout, stdout, "%v", tc.args)
		require.Equal(t, tc.stderr, stderr, "%v", tc.args)
	}
}

// TestOutReadsAboveMaxRun: the run goes on at the device maximum, with
// the note where perftest prints it: after the notes of its parser.
func TestOutReadsAboveMaxRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "64", "-o", "200")
	require.Equal(t, cli.ExitOK, code, errs)
	require.True(t, strings.HasPrefix(out, dynPollNote+report.ResultLine+"\n"+report.ResultLine+"\n"), "%q", out)
	require.Contains(t, errs, outsAboveMax)
	require.Contains(t, out, " Outstand reads  : 128\n")
	require.Contains(t, out, " OUT 0x80 ")
}

// TestMaxOutReadsIsTheDevices: the maximum the notes give is what the
// device reports as max_qp_rd_atom.
func TestMaxOutReadsIsTheDevices(t *testing.T) {
	t.Parallel()
	dev, err := rxe.Listen(netip.MustParseAddrPort("127.0.0.1:0"), rxe.Options{})
	require.NoError(t, err)
	defer dev.Close()
	require.Equal(t, maxOutReads, dev.Attr().MaxQPRdAtom)
}
