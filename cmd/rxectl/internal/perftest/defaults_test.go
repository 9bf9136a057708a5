package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPerftestDefaults: what each test runs with when no flag is given,
// perftest's init_perftest_params and force_dependecies: -s 65536 for the
// bandwidth tests, 2 for the latency tests and 8 for the atomics; -n 5000
// for write-bw and 1000 for the others (write-lat included); -t 128 for the
// bandwidth tests and 1 for the latency tests; -r 512 for the SEND tests
// (at most -n) and 1 for the others (a WRITE test's 512 forced to 1);
// -Q 100, bounded by -t and 1 for messages above 8 KiB; -u 14;
// --retry_count 7; -p 18515.
func TestPerftestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd                                 string
		size, iters, tx, rx, cqMod, timeout int
	}{
		{"read-bw", 65536, 1000, 128, 1, 1, 14},
		{"write-bw", 65536, 5000, 128, 1, 1, 14},
		{"send-bw", 65536, 1000, 128, 512, 1, 14},
		{"atomic-bw", 8, 1000, 128, 1, 100, 14},
		{"read-lat", 2, 1000, 1, 1, 1, 14},
		{"write-lat", 2, 1000, 1, 1, 1, 14},
		{"send-lat", 2, 1000, 1, 512, 1, 14},
		{"atomic-lat", 8, 1000, 1, 1, 1, 14},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.cmd), []string{"192.0.2.1"})
		require.NoError(t, err, tc.cmd)
		got := []int{o.size, o.iters, o.txDepth, o.rxDepth, o.cqMod, o.timeout, o.retryCount, o.oobPort, o.qps, o.postList}
		want := []int{tc.size, tc.iters, tc.tx, tc.rx, tc.cqMod, tc.timeout, 7, 18515, 1, 1}
		require.Equal(t, want, got, "%s: size, iters, tx depth, rx depth, cq-mod, qp-timeout, retry count, port, QPs, post list", tc.cmd)
		require.False(t, o.noPeak, tc.cmd)
		require.Zero(t, o.duration, tc.cmd)
	}
}

// TestDurationDefaults: a duration run's settings, as perftest's
// force_dependecies leaves them: the margin a quarter of -D (rounded
// down) unless -f gives it, no peak, --run_infinitely's period
// DEF_DURATION (5 s) without -D; and the SEND tests' receive depth,
// which follows -n in an iteration run only.
func TestDurationDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args                 []string
		duration, margin, rx int
	}{
		{[]string{"write-bw", "-D", "20"}, 20, 5, 1},
		{[]string{"write-bw", "-D", "20", "-f", "3"}, 20, 3, 1},
		{[]string{"read-lat", "-D", "7"}, 7, 1, 1},
		{[]string{"write-bw", "--run_infinitely"}, 5, 1, 1},
		{[]string{"write-bw", "--run_infinitely", "-D", "2"}, 2, 0, 1},
		{[]string{"send-bw", "-D", "4", "-n", "10"}, 4, 1, 512},
		{[]string{"send-bw", "-n", "10"}, 0, -1, 10},
	}
	for _, tc := range tests {
		o, err := parsePerftest(findTest(t, tc.args[0]), append(tc.args[1:], "192.0.2.1"))
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, []int{tc.duration, tc.margin, tc.rx}, []int{o.duration, o.margin, o.rxDepth}, "%v: duration, margin, rx depth", tc.args)
		require.Equal(t, tc.duration > 0, o.noPeak, "%v: no peak in a duration run", tc.args)
	}
}
