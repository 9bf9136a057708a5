package plot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlotAxes(t *testing.T) {
	for _, tc := range []struct{ v, want float64 }{{0.3, 0.5}, {1, 1}, {1.2, 2}, {4, 5}, {7, 10}, {2000, 2000}, {2100, 5000}} {
		require.InDelta(t, tc.want, niceStep(tc.v), tc.want*1e-9, "%v", tc.v)
	}
	for n, want := range map[float64]string{2: "2", 512: "512", 1024: "1K", 3 << 10: "3K", 1 << 20: "1M", 8 << 20: "8M", 1536: "1536"} {
		require.Equal(t, want, sizeLabel(n))
	}
	p := &Plot{Xs: []float64{2, 4, 8}, Series: []Series{{Ys: []float64{1, 2.5, 9.4}}}}
	a := p.axes()
	require.Equal(t, 2.0, a.ystep)
	require.Equal(t, 10.0, a.ymax)
	require.Equal(t, []float64{0, 2, 4, 6, 8, 10}, a.yTicks())
	require.InDelta(t, plotLeft, a.px(2), 1e-9)
	require.InDelta(t, Width-plotRight, a.px(8), 1e-9)
	require.InDelta(t, Height-plotBottom, a.py(0), 1e-9)
	require.InDelta(t, plotTop, a.py(10), 1e-9)
	ticks, labelled := a.xTicks()
	require.Equal(t, []float64{2, 4, 8}, ticks)
	require.Equal(t, []bool{true, true, true}, labelled)
	// 23 powers of two: every other one labelled.
	a = (&Plot{Xs: []float64{2, 8 << 20}}).axes()
	ticks, labelled = a.xTicks()
	require.Len(t, ticks, 23)
	require.True(t, labelled[0] && !labelled[1] && labelled[2] && labelled[22])
	require.Equal(t, "0.5", axes{ystep: 0.5}.yLabel(0.5))
	require.Equal(t, "20", axes{ystep: 10}.yLabel(20))
}

func TestFontGlyphs(t *testing.T) {
	for ch, rows := range glyphRows {
		for _, r := range rows {
			require.Len(t, r, glyphW, "%q", ch)
			require.Equal(t, "", strings.Trim(r, ".#"), "%q", ch)
		}
	}
	require.Equal(t, glyphs['?'], glyph('€'))
	require.Equal(t, 0, textWidth("", 2))
	require.Equal(t, 2*(3*glyphAdvance-1), textWidth("abc", 2))
}
