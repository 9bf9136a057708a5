package perftest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestNoPeakRow: with -N the client computes no peak (print_report_bw:
// the peak's numerator is multiplied by !noPeak), so its row's BW peak
// is 0.00 while its average is measured; without -N the peak is
// measured too.
func TestNoPeakRow(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		peak  bool
	}{
		{nil, true},
		{[]string{"-N"}, false},
		{[]string{"--noPeak"}, false},
	} {
		args := append([]string{"write-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "64"}, tc.flags...)
		out, errs, code := runCmd(t, args...)
		require.Equal(t, cli.ExitOK, code, errs)
		rows := bwRows(t, out)
		require.Len(t, rows, 1, out)
		peak, err := strconv.ParseFloat(rows[0][2], 64)
		require.NoError(t, err)
		avg, err := strconv.ParseFloat(rows[0][3], 64)
		require.NoError(t, err)
		require.Positive(t, avg, out)
		if tc.peak {
			require.Positive(t, peak, out)
		} else {
			require.Equal(t, "0.00", rows[0][2], out)
		}
	}
}
