package perftest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestBWRowUnits: print_report_bw's figures in the row's unit. With one
// post list of all 5 requests (-n 5 -l 5) the only window of the peak
// is the whole run, so the peak is the average (its time per message is
// the run's, truncated to whole nanoseconds); and the average is the
// message rate times the size, in MiB/s (format_factor 0x100000 bytes)
// or with --report_gbits in Gb/s (125,000,000 bytes): MsgRate[Mpps] ×
// 10^6 × 65536 / 2^20 = MsgRate × 62500, or MsgRate × 65536 × 8 / 1000;
// on send-bw's server as well.
func TestBWRowUnits(t *testing.T) {
	for _, tc := range []struct {
		flag   string
		perMpp float64 // average per Mpps of 65536-byte messages
	}{
		{"", 1e6 * 65536 / 0x100000},
		{"--report_gbits", 65536 * 8 / 1e3},
	} {
		t.Run("client"+tc.flag, func(t *testing.T) {
			args := []string{"write-bw", "--loopback", "--udp-port", "0", "-n", "5", "-l", "5", "-s", "65536"}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			peak, avg := requireRateAverage(t, out, tc.perMpp)
			require.InDelta(t, avg, peak, 0.01+1e-4*avg, out)
		})
		// send-bw's server times its receives from the first to the
		// last, with no peak (run_iter_bw_server).
		t.Run("server"+tc.flag, func(t *testing.T) {
			args := []string{"--udp-port", "0", "-n", "20", "-s", "65536"}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			_, sout := tcpEnds(t, "send-bw", args...)
			peak, _ := requireRateAverage(t, sout, tc.perMpp)
			require.Zero(t, peak, sout)
		})
	}
}

// requireRateAverage finds the one BW row of out and checks that its
// average is its message rate times perMpp (the row's figures are printed
// with 2 decimals, or 6 below 0.1 Gb/s, the rate with 6); it returns the
// peak and the average.
func requireRateAverage(t *testing.T, out string, perMpp float64) (peak, avg float64) {
	t.Helper()
	var row []string
	for _, f := range []string{fmtReport, fmtReportExt} {
		re := cFormatRE(f)
		for _, l := range strings.Split(out, "\n") {
			if re.MatchString(l) {
				require.Nil(t, row, "one row: %s", out)
				row = fields(t, re, l)
			}
		}
	}
	require.NotNil(t, row, out)
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		return v
	}
	peak, avg, rate := num(row[2]), num(row[3]), num(row[4])
	require.Positive(t, avg, out)
	require.InDelta(t, rate*perMpp, avg, 0.006+5e-7*perMpp, out)
	return peak, avg
}
