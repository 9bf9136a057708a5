package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOddRXDepth: perftest's "WA for a bug when rx_depth is odd in SEND"
// makes an odd -r even in every RUN_REGULAR run, -D runs included; not
// with -a or --run_infinitely.
func TestOddRXDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"send-bw", "-r", "511"}, 512},
		{[]string{"send-bw", "-r", "511", "-D", "5"}, 512},
		{[]string{"send-lat", "-r", "511", "-D", "5"}, 512},
		{[]string{"send-bw", "-r", "511", "--run_infinitely"}, 511},
		{[]string{"send-bw", "-r", "511", "-a"}, 511},
		{[]string{"send-bw", "-r", "511", "-n", "101"}, 102}, // -n bounds it first
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.rxDepth, "%v", tc.args)
	}
}

// TestUnreliableSRQRXDepth: with -c UC or UD and --use-srq, perftest
// raises the receive depth to MIN_SRQ_UD_RX_DEPTH (100) when -n is 100
// or less, after bounding it by -n.
func TestUnreliableSRQRXDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"send-bw", "-c", "UD", "--use-srq", "-n", "50"}, 100},
		{[]string{"send-bw", "-c", "UC", "--use-srq", "-n", "100"}, 100},
		{[]string{"send-lat", "-c", "UD", "--use-srq", "-n", "20"}, 100},
		{[]string{"send-bw", "-c", "UD", "--use-srq", "-n", "101"}, 102}, // -n bounds 512, then made even
		{[]string{"send-bw", "-c", "UD", "-n", "50"}, 50},
		{[]string{"send-bw", "--use-srq", "-n", "50"}, 50}, // RC
		{[]string{"send-bw", "-c", "UD", "--use-srq", "-n", "1000"}, 1000},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), tc.args[1:])
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.rxDepth, "%v", tc.args)
	}
}

// TestRXDepthOfReadAtomic: the read and atomic tests post no receives and
// refuse a receive depth above 1, as perftest's parser does ("On RDMA
// verbs rx depth can be only 1"), rather than giving their QPs receive
// queues of -r WQEs; -r 1 and the SEND and WRITE tests' -r are taken.
func TestRXDepthOfReadAtomic(t *testing.T) {
	t.Parallel()
	requireUsageErrors(t, []usageCase{
		{[]string{"read-bw", "-r", "2"}, "-r 2: read-bw posts no receives, its receive depth is 1 (perftest: \"On RDMA verbs rx depth can be only 1\")"},
		{[]string{"atomic-lat", "--rx-depth=512"}, "On RDMA verbs rx depth can be only 1"},
	})
	for _, args := range [][]string{{"read-lat", "-r", "1"}, {"atomic-bw", "-r", "1"}, {"write-bw", "-r", "64"}, {"send-lat", "-r", "64"}} {
		_, err := parsePerftest(findTest(t, args[0]), args[1:])
		require.NoError(t, err, "%v", args)
	}
}
