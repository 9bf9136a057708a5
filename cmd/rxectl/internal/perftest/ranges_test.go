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
		args []string
		ok   bool
	}{
		{[]string{"write-bw", "-t", "15000", "-n", "15000"}, true},
		{[]string{"write-bw", "-t", "10000"}, true},
		{[]string{"write-bw", "-t", "15001"}, false},
		{[]string{"write-bw", "-s", "2147483647"}, true},
		{[]string{"write-bw", "-s", "2147483648"}, false},
		{[]string{"write-bw", "-s", "2048M"}, false},
	}
	for _, tc := range tests {
		_, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		if tc.ok {
			require.NoError(t, err, "%v", tc.args)
		} else {
			require.Error(t, err, "%v", tc.args)
		}
	}
}
