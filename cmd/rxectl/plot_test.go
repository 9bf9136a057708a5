package main

import (
	"encoding/json"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// svgPoints parses an SVG with encoding/xml (it must be well-formed
// throughout) and returns its title and, per series, the data-size of
// each point.
func svgPoints(t *testing.T, name string) (title string, points map[string][]int) {
	t.Helper()
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	d := xml.NewDecoder(f)
	points = map[string][]int{}
	var series string
	var stack []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch e := tok.(type) {
		case xml.StartElement:
			stack = append(stack, e.Name.Local)
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			if e.Name.Local == "g" && attr["class"] == "series" {
				series = attr["data-name"]
			}
			if e.Name.Local == "circle" && attr["class"] == "point" {
				n, err := strconv.Atoi(attr["data-size"])
				require.NoError(t, err)
				_, err = strconv.ParseFloat(attr["data-value"], 64)
				require.NoError(t, err)
				points[series] = append(points[series], n)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 2 && stack[1] == "title" {
				title += string(e)
			}
		}
	}
	require.Empty(t, stack)
	return title, points
}

func allSizes() []int {
	var s []int
	for n := 2; n <= maxAllSize; n *= 2 {
		s = append(s, n)
	}
	return s
}

// TestPlotSVGLatency: read-lat -a draws t_typical and the 99th percentile,
// one point per size each.
func TestPlotSVGLatency(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "lat.svg")
	_, errs, code := runCmd(t, "read-lat", "--loopback", "--udp-port", "0", "-a", "-n", "5", "-m", "4096", "--plot", file)
	require.Equal(t, exitOK, code, errs)
	title, points := svgPoints(t, file)
	require.Equal(t, "RDMA_Read Latency Test, MTU 4096, "+time.Now().Format("2006-01-02"), title)
	require.Equal(t, map[string][]int{"t_typical": allSizes(), "99% percentile": allSizes()}, points)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(b), ">latency [usec]</text>")
	require.Contains(t, string(b), ">message size [bytes] (log2 scale)</text>")
	require.Contains(t, string(b), ">8M</text>")
}

// checkPNG decodes a PNG plot of p and checks its size and that the
// curves are drawn: every point and the middle of every segment.
func checkPNG(t *testing.T, name string, p *plot) {
	t.Helper()
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, plotWidth, plotHeight), img.Bounds())
	white := color.RGBAModel.Convert(plotWhite)
	inked := func(x, y float64) bool {
		for dx := -1; dx <= 1; dx++ {
			for dy := -1; dy <= 1; dy++ {
				if color.RGBAModel.Convert(img.At(int(math.Round(x))+dx, int(math.Round(y))+dy)) != white {
					return true
				}
			}
		}
		return false
	}
	a := p.axes()
	for _, s := range p.series {
		for i, y := range s.ys {
			x := a.px(p.xs[i])
			require.True(t, inked(x, a.py(y)), "%s: no point at size %v", s.name, p.xs[i])
			if len(p.series) == 1 {
				require.Equal(t, s.color, color.RGBAModel.Convert(img.At(int(math.Round(x)), int(math.Round(a.py(y))))))
			}
			if i > 0 {
				mx, my := (x+a.px(p.xs[i-1]))/2, (a.py(y)+a.py(s.ys[i-1]))/2
				require.True(t, inked(mx, my), "%s: no line before size %v", s.name, p.xs[i])
			}
		}
	}
	// The title's text is drawn: ink in the band above the plot.
	ink := 0
	for y := 20; y < 40; y++ {
		for x := 0; x < plotWidth; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) != white {
				ink++
			}
		}
	}
	require.Greater(t, ink, 200)
	// Background where nothing is drawn.
	require.Equal(t, white, color.RGBAModel.Convert(img.At(2, plotHeight-2)))
}

// TestPlotPNGBandwidth: write-bw -a draws the average bandwidth; the
// points match the JSON results.
func TestPlotPNGBandwidth(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "bw.png")
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-a", "-n", "5", "--plot", file, "--json")
	require.Equal(t, exitOK, code, errs)
	var res struct {
		Results []bwReport `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	p := &plot{series: []plotSeries{{color: plotBlue}}}
	for _, r := range res.Results {
		p.xs = append(p.xs, float64(r.Size))
		p.series[0].ys = append(p.series[0].ys, r.Avg)
	}
	require.Len(t, p.xs, len(allSizes()))
	checkPNG(t, file, p)
}

// fakeLatSession is a session with latency results, for plots without a
// run.
func fakeLatSession() *session {
	s := &session{t: ptest{"send-lat", verbSend, true}, o: &options{all: true}, mtu: 3}
	for i, n := range allSizes() {
		s.latResults = append(s.latResults, latResult{Size: n, Typical: 2 + float64(i*i)/10, P99: 5 + float64(i*i)/5})
	}
	return s
}

func TestPlotFiles(t *testing.T) {
	dir := t.TempDir()
	s := fakeLatSession()
	p := s.plotData()
	require.Equal(t, "Send Latency Test, MTU 1024, "+time.Now().Format("2006-01-02"), p.title)
	require.NoError(t, writePlot(filepath.Join(dir, "lat.PNG"), p))
	checkPNG(t, filepath.Join(dir, "lat.PNG"), p)
	require.NoError(t, writePlot(filepath.Join(dir, "lat.svg"), p))
	_, points := svgPoints(t, filepath.Join(dir, "lat.svg"))
	require.Len(t, points, 2)

	// Bandwidth in Gb/s; XML special characters are escaped.
	s = &session{t: ptest{"atomic-bw", verbAtomic, false}, o: &options{all: true, gbits: true, atomicType: "A<B&C"}, mtu: 5}
	s.bwResults = []bwReport{{Size: 8, Avg: 0.5}, {Size: 16, Avg: 0}}
	p = s.plotData()
	require.Equal(t, "BW average [Gb/sec]", p.yLabel)
	require.NoError(t, writePlot(filepath.Join(dir, "bw.svg"), p))
	title, points := svgPoints(t, filepath.Join(dir, "bw.svg"))
	require.True(t, strings.HasPrefix(title, "Atomic A<B&C BW Test, MTU 4096, "), title)
	require.Equal(t, map[string][]int{"BW average": {8, 16}}, points)
	require.NoError(t, writePlot(filepath.Join(dir, "bw.png"), p))
	checkPNG(t, filepath.Join(dir, "bw.png"), p)

	require.Error(t, writePlot(filepath.Join(dir, "no", "such.svg"), p))
}

func TestPlotAxes(t *testing.T) {
	for _, tc := range []struct{ v, want float64 }{{0.3, 0.5}, {1, 1}, {1.2, 2}, {4, 5}, {7, 10}, {2000, 2000}, {2100, 5000}} {
		require.InDelta(t, tc.want, niceStep(tc.v), tc.want*1e-9, "%v", tc.v)
	}
	for n, want := range map[float64]string{2: "2", 512: "512", 1024: "1K", 3 << 10: "3K", 1 << 20: "1M", 8 << 20: "8M", 1536: "1536"} {
		require.Equal(t, want, sizeLabel(n))
	}
	p := &plot{xs: []float64{2, 4, 8}, series: []plotSeries{{ys: []float64{1, 2.5, 9.4}}}}
	a := p.axes()
	require.Equal(t, 2.0, a.ystep)
	require.Equal(t, 10.0, a.ymax)
	require.Equal(t, []float64{0, 2, 4, 6, 8, 10}, a.yTicks())
	require.InDelta(t, plotLeft, a.px(2), 1e-9)
	require.InDelta(t, plotWidth-plotRight, a.px(8), 1e-9)
	require.InDelta(t, plotHeight-plotBottom, a.py(0), 1e-9)
	require.InDelta(t, plotTop, a.py(10), 1e-9)
	ticks, labelled := a.xTicks()
	require.Equal(t, []float64{2, 4, 8}, ticks)
	require.Equal(t, []bool{true, true, true}, labelled)
	// 23 powers of two: every other one labelled.
	a = (&plot{xs: []float64{2, maxAllSize}}).axes()
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
