package perftest

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarginHelpDefault: the help gives -f's default as perftest's rule
// (a quarter of -D), not the internal "unset" value, which the command
// line refuses (perftest's CHECK_VALUE_NON_NEGATIVE for -f).
func TestMarginHelpDefault(t *testing.T) {
	t.Parallel()
	block := regexp.MustCompile(`(?m)^  -(f|margin) \S+\n(\s+\t.*\n)+`)
	for _, tc := range Tests {
		var b bytes.Buffer
		tc.Usage(&b)
		blocks := block.FindAllString(b.String(), -1)
		require.Len(t, blocks, 2, "%s: -f and --margin in\n%s", tc.cmd, b.String())
		for _, s := range blocks {
			require.Contains(t, s, "duration/4", tc.cmd)
			require.NotContains(t, s, "(default -1)", "%s: -f -1 is refused", tc.cmd)
		}
		_, err := parsePerftest(tc, []string{"-D", "4", "-f", "-1"})
		require.ErrorContains(t, err, "-f -1: a margin is a number of seconds, 0 or more", tc.cmd)
	}
}
