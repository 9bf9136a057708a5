package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPerftestRefusals: command lines perftest's parser or
// force_dependecies refuses, and the limits of each flag's range
// (perftest_parameters.h: MIN_RX/MAX_RX, MIN_CQ_MOD/MAX_CQ_MOD,
// MIN_QP_NUM), refused here too, each saying what is wrong; and the
// values just inside each limit, taken.
func TestPerftestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // "": taken
	}{
		// "Message size cannot be changed for Atomic tests" (-a sets
		// the size to MAX_SIZE, so atomics refuse it too).
		{[]string{"atomic-bw", "-a"}, "message size of atomic tests is 8 bytes"},
		{[]string{"atomic-lat", "-s", "16"}, "message size of atomic tests is 8 bytes"},
		{[]string{"atomic-bw", "-s", "8"}, ""},
		{[]string{"send-bw", "-r", "16384"}, ""},
		{[]string{"send-bw", "-r", "16385"}, "rx depth 16385 not in [1, 16384]"},
		{[]string{"send-bw", "-r", "0"}, "rx depth 0 not in [1, 16384]"},
		{[]string{"write-bw", "-Q", "1024"}, ""},
		{[]string{"write-bw", "-Q", "1025"}, "cq-mod 1025 not in [1, 1024]"},
		{[]string{"write-bw", "-Q", "0"}, "cq-mod 0 not in [1, 1024]"},
		{[]string{"write-bw", "-q", "0"}, "QPs 0 not in [1, 1024]"},
		{[]string{"write-bw", "-u", "31"}, ""},
		{[]string{"write-bw", "-u", "32"}, "qp-timeout 32 not in [0, 31]"},
		// "Duration mode currently doesn't support running on all sizes";
		// --run_infinitely is a duration run.
		{[]string{"write-bw", "-a", "-D", "4"}, "cannot be combined with -a"},
		{[]string{"write-bw", "-a", "--run_infinitely"}, "cannot be combined with -a"},
		// rxectl's own: a post list is posted whole, within the tx depth;
		// a receive post list within the receives posted; --json is
		// the whole report, --output one figure.
		{[]string{"write-bw", "-n", "16", "-l", "4", "-t", "4"}, ""},
		{[]string{"write-bw", "-n", "16", "-l", "4", "-t", "3"}, "the post list -l 4 is longer than the tx depth -t 3"},
		{[]string{"send-bw", "--recv_post_list", "3", "-n", "9", "-r", "2"}, "--recv_post_list 3 is more than the 2 receives"},
		{[]string{"send-bw", "--recv_post_list", "2", "-n", "10", "-r", "2"}, ""},
		{[]string{"write-bw", "--json", "--output", "bandwidth"}, "--json and --output cannot be combined"},
		// "Setting Outstanding reads only available on READ verb", for
		// any value of -o.
		{[]string{"write-bw", "-o", "0"}, "-o: outstanding reads are for the read and atomic tests"},
		// "Multiple QPs only available on bw tests".
		{[]string{"read-lat", "-q", "2"}, `latency tests use one QP (perftest: "Multiple QPs only available on bw tests")`},
		{[]string{"send-lat", "--qp=3"}, `latency tests use one QP (perftest: "Multiple QPs only available on bw tests")`},
		{[]string{"read-lat", "-q", "1"}, ""},
	}
	for _, tc := range tests {
		_, err := parsePerftest(findTest(t, tc.args[0]), append(tc.args[1:], "192.0.2.1"))
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
			continue
		}
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// TestRateNote: perftest's note that the burst size follows the tx depth
// comes with --rate_limit when --burst_size is not given or is 0
// (force_dependecies: burst_size <= 0), not when it is given.
func TestRateNote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate_limit", "1"}, " Setting burst size to tx depth = 128"},
		{[]string{"--rate_limit", "1", "--burst_size", "0"}, " Setting burst size to tx depth = 128"},
		{[]string{"--rate_limit", "1", "--burst_size", "16"}, ""},
		{[]string{"--rate_limit", "1", "-t", "32"}, " Setting burst size to tx depth = 32"},
		{nil, ""},
	} {
		o, err := parsePerftest(findTest(t, "write-bw"), append(tc.args, "192.0.2.1"))
		require.NoError(t, err, "%v", tc.args)
		require.Equal(t, tc.want, o.rateNote(), "%v", tc.args)
	}
}
