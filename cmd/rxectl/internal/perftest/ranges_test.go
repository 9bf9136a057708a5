package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPerftestRanges: the flag ranges perftest's parser checks
// (CHECK_VALUE_IN_RANGE: -t in [MIN_TX, MAX_TX] = [1, 15000]; -s in
// [1, UINT_MAX/2]), which the device allows (max_qp_wr 16384).
func TestPerftestRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args          []string
		ok            bool
		size, txDepth int    // what an accepted command line sets (0: not checked)
		flag          string // what a refusal names
	}{
		{[]string{"write-bw", "-t", "15000", "-n", "15000"}, true, 0, 15000, ""},
		{[]string{"write-bw", "-t", "10000"}, true, 0, 5000, ""}, // clipped to the 5000 iterations
		{[]string{"write-bw", "-t", "15001"}, false, 0, 0, "tx depth 15001 not in [1, 15000]"},
		{[]string{"write-bw", "-s", "2147483647"}, true, 2147483647, 0, ""},
		{[]string{"write-bw", "-s", "2048M"}, false, 0, 0, "size 2147483648 not in [1, 2147483647]"},
		{[]string{"write-bw", "-s", "2147483648"}, false, 0, 0, "size 2147483648 not in [1, 2147483647]"},
		{[]string{"write-bw", "-s", "2047M"}, true, 2047 << 20, 0, ""},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		if !tc.ok {
			require.Error(t, err, "%v", tc.args)
			require.Contains(t, err.Error(), tc.flag, "%v", tc.args)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		if tc.size != 0 {
			require.Equal(t, tc.size, o.size, "%v", tc.args)
		}
		if tc.txDepth != 0 {
			require.Equal(t, tc.txDepth, o.txDepth, "%v", tc.args)
		}
	}
}
