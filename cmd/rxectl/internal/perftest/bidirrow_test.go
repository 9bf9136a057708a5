package perftest

import (
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// TestBidirRowPrecision: a -b row is the sum of both directions, and
// perftest's print_full_bw_report picks its format by this end's own
// average before it adds the peer's (inc_accuracy): in Gb/s, six
// decimals (REPORT_FMT_EXT) when this end's direction is below 0.1, even
// if the sum is not, in the table and in the --out_json file alike.
func TestBidirRowPrecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		own, rem float64
		gbits    bool
		want     string // the sum's average as printed
	}{
		{0.064, 0.064, true, "0.128000"},
		{0.05, 0.03, true, "0.080000"},
		{0.2, 0.05, true, "0.25 "},
		{0.05, 0.2, false, "0.25 "}, // MiB/s: always two decimals
	}
	for _, tc := range tests {
		own := report.BW{Size: 8, Iters: 1000, Avg: tc.own, MsgRate: 1}
		rem := report.BW{Size: 8, Iters: 1000, Avg: tc.rem, MsgRate: 1}
		sum := bidirSum(own, rem, tc.gbits)
		require.InDelta(t, tc.own+tc.rem, sum.Avg, 1e-12)
		row := report.BWRow(sum, tc.gbits)
		require.Contains(t, row, tc.want, "%+v: %q", tc, row)
		s := &session{o: &options{gbits: tc.gbits}}
		js := s.bwJSONResults(sum)
		require.Contains(t, js, "\"BW_average\": "+strings.TrimSpace(tc.want)+",", "%+v: %q", tc, js)
	}
}
