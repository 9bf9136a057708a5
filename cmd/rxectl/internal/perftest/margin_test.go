package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// marginRefusal is perftest's force_dependecies message when its
// duration is not more than twice the margin -f.
const marginRefusal = `(perftest: "please check that DURATION > 2*MARGIN")`

// TestMarginCheckedAlways: perftest checks DURATION > 2*MARGIN whatever
// the run: a --run_infinitely run (which takes the default margin, a
// quarter of -D, and uses none) and an iteration run, whose duration is
// DEF_DURATION, 5 s, and whose margin is -f or -1.
func TestMarginCheckedAlways(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // "": taken
	}{
		{[]string{"write-bw", "-D", "4", "-f", "2"}, "-D 4 is not more than twice the margin -f 2 " + marginRefusal},
		{[]string{"write-bw", "-D", "5", "-f", "2"}, ""},
		{[]string{"write-bw", "--run_infinitely", "-D", "4", "-f", "2"}, "-D 4 is not more than twice the margin -f 2 " + marginRefusal},
		{[]string{"write-bw", "--run_infinitely", "-f", "3"}, "-D 5 is not more than twice the margin -f 3 " + marginRefusal},
		{[]string{"write-bw", "--run_infinitely", "-f", "2"}, ""},
		{[]string{"write-bw", "--run_infinitely", "-D", "1"}, ""},
		{[]string{"read-bw", "-f", "3"}, "-f 3 without -D: perftest checks it against its default duration, 5 s, which is not more than twice it " + marginRefusal},
		{[]string{"read-lat", "-f", "2"}, ""},
		{[]string{"read-lat", "-f", "0"}, ""},
		{[]string{"read-bw"}, ""},
	}
	for _, tc := range tests {
		_, err := parsePerftest(findTest(t, tc.args[0]), append(tc.args[1:], "192.0.2.1"))
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
			continue
		}
		require.EqualError(t, err, tc.want, "%v", tc.args)
	}
}
