package plot_test

import (
	"path/filepath"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot/plottest"
	"github.com/stretchr/testify/require"
)

// TestPlotWrite writes a two-series plot as PNG and SVG (the extension's
// case does not matter) and checks what was drawn.
func TestPlotWrite(t *testing.T) {
	dir := t.TempDir()
	p := &plot.Plot{Title: "A<B&C", XLabel: "size", YLabel: "latency [usec]", Unit: "usec"}
	for i := range 23 {
		p.Xs = append(p.Xs, float64(int(2)<<i))
	}
	typ, p99 := plot.Series{Name: "t_typical", Color: plot.Blue}, plot.Series{Name: "99% percentile", Color: plot.Orange}
	for i := range p.Xs {
		typ.Ys = append(typ.Ys, 2+float64(i*i)/10)
		p99.Ys = append(p99.Ys, 5+float64(i*i)/5)
	}
	p.Series = []plot.Series{typ, p99}
	require.NoError(t, plot.Write(filepath.Join(dir, "lat.PNG"), p))
	require.NoError(t, plottest.CheckPNG(filepath.Join(dir, "lat.PNG"), p))
	require.NoError(t, plot.Write(filepath.Join(dir, "lat.svg"), p))
	title, points, err := plottest.SVGPoints(filepath.Join(dir, "lat.svg"))
	require.NoError(t, err)
	require.Equal(t, "A<B&C", title)
	require.Len(t, points, 2)
	require.Len(t, points["t_typical"], 23)

	one := &plot.Plot{Title: "Atomic BW Test", Xs: []float64{8, 16}, Series: []plot.Series{{Name: "BW average", Color: plot.Blue, Ys: []float64{0.5, 0}}}}
	require.NoError(t, plot.Write(filepath.Join(dir, "bw.png"), one))
	require.NoError(t, plottest.CheckPNG(filepath.Join(dir, "bw.png"), one))
	require.Error(t, plot.Write(filepath.Join(dir, "no", "such.svg"), p))
}
