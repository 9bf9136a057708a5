package plot

import (
	"bytes"
	"image/color"
	"image/png"
	"math"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAxesScale: the y axis starts at 0 and reaches the largest finite
// value, at a whole number of steps; a plot of zeros still has a unit
// axis; NaN and infinities do not set the scale, and an infinite value
// is drawn at the top, inside the chart.
func TestAxesScale(t *testing.T) {
	tests := []struct {
		name       string
		ys         []float64
		step, ymax float64
	}{
		{"above a step", []float64{1, 8.2}, 2, 10},
		{"zeros", []float64{0, 0}, 0.2, 1},
		{"not finite", []float64{3, math.NaN(), math.Inf(1)}, 0.5, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plot{Xs: []float64{2, 4, 8}[:len(tc.ys)], Series: []Series{{Ys: tc.ys}}}
			a := p.axes()
			require.InDelta(t, tc.step, a.ystep, 1e-12)
			require.InDelta(t, tc.ymax, a.ymax, 1e-12)
		})
	}
	p := &Plot{Xs: []float64{2, 4}, Series: []Series{{Ys: []float64{3, math.Inf(1)}}}}
	_, py := p.Pixel(4, math.Inf(1))
	require.InDelta(t, plotTop, py, 1e-9)
}

// TestXTickLabels: at most plotTicksX ticks are labelled, and the SVG
// writes a label for those only.
func TestXTickLabels(t *testing.T) {
	for n := 1; n <= 30; n++ {
		p := &Plot{Xs: []float64{1, math.Exp2(float64(n - 1))}}
		_, labelled := p.axes().xTicks()
		k := 0
		for _, l := range labelled {
			if l {
				k++
			}
		}
		require.LessOrEqual(t, k, plotTicksX, "%d ticks", n)
		require.True(t, labelled[0], "%d ticks", n)
	}
	// 2 B .. 8 MiB: 23 ticks, every other one labelled: 12 labels.
	p := &Plot{Title: "t", Xs: []float64{2, 8 << 20}, Series: []Series{{Name: "a", Ys: []float64{1, 2}}, {Name: "b", Ys: []float64{2, 1}}}}
	var b bytes.Buffer
	require.NoError(t, p.writeSVG(&b))
	labels := regexp.MustCompile(`text-anchor="middle">(\d+[KM]?)</text>`).FindAllStringSubmatch(b.String(), -1)
	require.Len(t, labels, 12)
	require.Equal(t, "2", labels[0][1])
	require.Equal(t, "8", labels[1][1])
	require.Equal(t, "8M", labels[11][1])
	// The legend has a row per series.
	legend := regexp.MustCompile(`<text x="[0-9.]+" y="([0-9.]+)">[ab]</text>`).FindAllStringSubmatch(b.String(), -1)
	require.Len(t, legend, 2)
	require.NotEqual(t, legend[0][1], legend[1][1])
}

// TestPNGTickLabelsAndLegend: the PNG labels the same ticks as the SVG
// (nothing is written under an unlabelled one) and gives each series its
// own legend row.
func TestPNGTickLabelsAndLegend(t *testing.T) {
	p := &Plot{Title: "t", Xs: []float64{2, 8 << 20},
		Series: []Series{{Name: "a", Color: Blue, Ys: []float64{1, 2}}, {Name: "b", Color: Orange, Ys: []float64{1, 2}}}}
	var b bytes.Buffer
	require.NoError(t, p.writePNG(&b))
	img, err := png.Decode(&b)
	require.NoError(t, err)
	a := p.axes()
	inked := func(x0, y0, x1, y1 int) bool {
		for y := y0; y <= y1; y++ {
			for x := x0; x <= x1; x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r != 0xffff || g != 0xffff || bl != 0xffff {
					return true
				}
			}
		}
		return false
	}
	y0 := Height - plotBottom
	for _, x := range []float64{2, 8} {
		px := int(math.Round(a.px(x)))
		require.True(t, inked(px-3, y0+12, px+3, y0+26), "label of %v", x)
	}
	px := int(math.Round(a.px(4)))
	require.False(t, inked(px-3, y0+12, px+3, y0+26), "no label under 4")
	at := func(x, y int) color.RGBA { return img.At(x, y).(color.RGBA) }
	require.Equal(t, Blue, at(plotLeft+30, plotTop+14))
	require.Equal(t, Orange, at(plotLeft+30, plotTop+14+22))
}
