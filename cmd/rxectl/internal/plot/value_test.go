package plot

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSVGPointValues: each point's data-value and tooltip carry its value
// with two decimals, or six below 0.1 (as perftest's REPORT_FMT_EXT
// prints small Gb/s figures), so a 2-byte run in Gb/s does not read 0.00.
func TestSVGPointValues(t *testing.T) {
	tests := []struct {
		y          float64
		value, tip string
	}{
		{4439.8312, "4439.83", "4439.83 Gb/s"},
		{0.5, "0.50", "0.50 Gb/s"},
		{0.016637, "0.016637", "0.016637 Gb/s"},
		{0.000123, "0.000123", "0.000123 Gb/s"},
		{0, "0.00", "0.00 Gb/s"},
	}
	p := &Plot{Title: "t", Unit: "Gb/s", Series: []Series{{Name: "BW average", Color: Blue}}}
	for i, tc := range tests {
		p.Xs = append(p.Xs, float64(int(2)<<i))
		p.Series[0].Ys = append(p.Series[0].Ys, tc.y)
	}
	var b bytes.Buffer
	require.NoError(t, p.writeSVG(&b))
	re := regexp.MustCompile(`data-size="(\d+)" data-value="([^"]*)"><title>\d+ bytes: ([^<]*)</title>`)
	m := re.FindAllStringSubmatch(b.String(), -1)
	require.Len(t, m, len(tests))
	for i, tc := range tests {
		require.Equal(t, strconv.Itoa(int(p.Xs[i])), m[i][1])
		require.Equal(t, tc.value, m[i][2], "%v", tc.y)
		require.Equal(t, tc.tip, m[i][3], "%v", tc.y)
	}
}
