package main

// --plot: bandwidth (BW tests) or latency (LAT tests: t_typical and the
// 99th percentile) against the message size of a -a run, as an SVG written
// by hand or a PNG drawn with the standard library (image, image/png,
// image/draw) and the 5x7 bitmap font of font.go.

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// plotSeries is one curve: a value per x of the plot.
type plotSeries struct {
	name  string
	color color.RGBA
	ys    []float64
}

// plot is what a chart shows.
type plot struct {
	title, xLabel, yLabel string
	unit                  string    // of the y values, for the points' tooltips
	xs                    []float64 // message sizes in bytes, > 0, ascending
	series                []plotSeries
}

// Series colours.
var (
	plotBlue   = color.RGBA{0x1f, 0x5f, 0xbf, 0xff}
	plotOrange = color.RGBA{0xe0, 0x6c, 0x00, 0xff}
	plotGrid   = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	plotBlack  = color.RGBA{0, 0, 0, 0xff}
	plotWhite  = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// plotData is the chart of this side's results.
func (s *session) plotData() *plot {
	p := &plot{
		title:  fmt.Sprintf("%s, MTU %d, %s", s.testTitle(), s.mtu.Bytes(), time.Now().Format("2006-01-02")),
		xLabel: "message size [bytes] (log2 scale)",
	}
	if s.t.lat {
		p.unit = "usec"
		p.yLabel = "latency [usec]"
		typ := plotSeries{name: "t_typical", color: plotBlue}
		p99 := plotSeries{name: "99% percentile", color: plotOrange}
		for _, r := range s.latResults {
			p.xs = append(p.xs, float64(r.Size))
			typ.ys = append(typ.ys, r.Typical)
			p99.ys = append(p99.ys, r.P99)
		}
		p.series = []plotSeries{typ, p99}
		return p
	}
	p.unit = bwUnit(s.o.gbits)
	p.yLabel = "BW average [" + strings.TrimSuffix(p.unit, "/s") + "/sec]"
	avg := plotSeries{name: "BW average", color: plotBlue}
	for _, r := range s.bwResults {
		p.xs = append(p.xs, float64(r.Size))
		avg.ys = append(avg.ys, r.Avg)
	}
	p.series = []plotSeries{avg}
	return p
}

// writePlot writes p to the file name, as SVG or PNG by its extension.
func writePlot(name string, p *plot) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if strings.HasSuffix(strings.ToLower(name), ".png") {
		err = p.writePNG(w)
	} else {
		err = p.writeSVG(w)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Chart geometry, in pixels (SVG user units are pixels too).
const (
	plotWidth   = 960
	plotHeight  = 600
	plotLeft    = 120 // the y tick labels and the y label
	plotRight   = 40
	plotTop     = 70 // the title and the legend
	plotBottom  = 90 // the x tick labels and the x label
	plotTicksX  = 12 // at most this many labelled x ticks
	plotTicksY  = 6  // about this many y ticks
	plotMarkerR = 3  // point radius
)

// axes maps data to pixels: x on a log2 scale over [lx0, lx1], y linear
// over [0, ymax].
type axes struct {
	lx0, lx1 float64
	ymax     float64
	ystep    float64
}

func (p *plot) axes() axes {
	a := axes{lx0: 1, lx1: 2}
	if len(p.xs) > 0 {
		a.lx0, a.lx1 = math.Log2(p.xs[0]), math.Log2(p.xs[len(p.xs)-1])
	}
	if a.lx1-a.lx0 < 1 {
		a.lx0, a.lx1 = a.lx0-0.5, a.lx1+0.5
	}
	top := 0.0
	for _, s := range p.series {
		for _, y := range s.ys {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				top = max(top, y)
			}
		}
	}
	if top <= 0 {
		top = 1
	}
	a.ystep = niceStep(top / plotTicksY)
	a.ymax = math.Ceil(top/a.ystep) * a.ystep
	return a
}

// niceStep is the smallest of 1, 2 and 5 times a power of ten at least v.
func niceStep(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v*(1-1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// px and py are the pixel coordinates of a data point.
func (a axes) px(x float64) float64 {
	return plotLeft + (math.Log2(x)-a.lx0)/(a.lx1-a.lx0)*(plotWidth-plotLeft-plotRight)
}

func (a axes) py(y float64) float64 {
	y = min(max(y, 0), a.ymax)
	return plotHeight - plotBottom - y/a.ymax*(plotHeight-plotTop-plotBottom)
}

// xTicks returns the powers of two on the x axis and whether each is
// labelled.
func (a axes) xTicks() (ticks []float64, labelled []bool) {
	first, last := int(math.Ceil(a.lx0-1e-9)), int(math.Floor(a.lx1+1e-9))
	every := max(1, (last-first+plotTicksX)/plotTicksX)
	for e := first; e <= last; e++ {
		ticks = append(ticks, math.Exp2(float64(e)))
		labelled = append(labelled, (e-first)%every == 0)
	}
	return ticks, labelled
}

// yTicks returns the y tick values.
func (a axes) yTicks() []float64 {
	var t []float64
	for i := 0; ; i++ {
		v := float64(i) * a.ystep
		if v > a.ymax*(1+1e-9) {
			return t
		}
		t = append(t, v)
	}
}

// sizeLabel is a message size as "512", "4K", "8M".
func sizeLabel(x float64) string {
	n := int64(x)
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// yLabel formats a y tick with as many decimals as the step needs.
func (a axes) yLabel(v float64) string {
	dec := max(0, int(-math.Floor(math.Log10(a.ystep)+1e-9)))
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// writeSVG writes the chart as SVG 1.1. Each point is a circle of class
// "point" with data-size and data-value attributes and a tooltip.
func (p *plot) writeSVG(w io.Writer) error {
	a := p.axes()
	var b strings.Builder
	esc := func(s string) string {
		var e strings.Builder
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	x0, x1 := float64(plotLeft), float64(plotWidth-plotRight)
	y0, y1 := float64(plotHeight-plotBottom), float64(plotTop)
	fmt.Fprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(p.title))
	fmt.Fprintf(&b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", plotWidth, plotHeight)
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"32\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">%s</text>\n", plotWidth/2, esc(p.title))

	xt, lab := a.xTicks()
	yt := a.yTicks()
	b.WriteString("<g stroke=\"#dddddd\" stroke-width=\"1\">\n")
	for _, x := range xt {
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", a.px(x), y0, a.px(x), y1)
	}
	for _, y := range yt[1:] {
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, a.py(y), x1, a.py(y))
	}
	b.WriteString("</g>\n<g stroke=\"black\" stroke-width=\"1\">\n")
	fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, y0, x1, y0)
	fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, y0, x0, y1)
	for _, x := range xt {
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", a.px(x), y0, a.px(x), y0+5)
	}
	for _, y := range yt {
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0-5, a.py(y), x0, a.py(y))
	}
	b.WriteString("</g>\n<g>\n")
	for i, x := range xt {
		if lab[i] {
			fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", a.px(x), y0+22, sizeLabel(x))
		}
	}
	for _, y := range yt {
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0-9, a.py(y)+4, a.yLabel(y))
	}
	fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", (x0+x1)/2, plotHeight-30, esc(p.xLabel))
	yMid := (y0 + y1) / 2
	fmt.Fprintf(&b, "<text x=\"30\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 30 %.1f)\">%s</text>\n", yMid, yMid, esc(p.yLabel))
	b.WriteString("</g>\n")

	// The legend, top left inside the plot area, then the curves over it.
	b.WriteString("<g class=\"legend\">\n")
	for si, s := range p.series {
		ly := y1 + 18 + float64(si)*20
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", x0+15, ly-4, x0+40, ly-4, svgColor(s.color))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x0+48, ly, esc(s.name))
	}
	b.WriteString("</g>\n")
	for _, s := range p.series {
		col := svgColor(s.color)
		fmt.Fprintf(&b, "<g class=\"series\" data-name=\"%s\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", esc(s.name), col)
		for i, y := range s.ys {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", a.px(p.xs[i]), a.py(y))
		}
		b.WriteString("\"/>\n")
		for i, y := range s.ys {
			v := strconv.FormatFloat(y, 'f', 2, 64)
			fmt.Fprintf(&b, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" data-size=\"%d\" data-value=\"%s\"><title>%d bytes: %s %s</title></circle>\n",
				a.px(p.xs[i]), a.py(y), plotMarkerR, col, int64(p.xs[i]), v, int64(p.xs[i]), v, esc(p.unit))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// writePNG draws the chart with the standard library and the built-in
// bitmap font.
func (p *plot) writePNG(w io.Writer) error {
	a := p.axes()
	img := image.NewRGBA(image.Rect(0, 0, plotWidth, plotHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotWhite), image.Point{}, draw.Src)
	x0, x1 := plotLeft, plotWidth-plotRight
	y0, y1 := plotHeight-plotBottom, plotTop
	xt, lab := a.xTicks()
	yt := a.yTicks()
	for _, x := range xt {
		drawLine(img, a.px(x), float64(y0), a.px(x), float64(y1), 1, plotGrid)
	}
	for _, y := range yt[1:] {
		drawLine(img, float64(x0), a.py(y), float64(x1), a.py(y), 1, plotGrid)
	}
	drawLine(img, float64(x0), float64(y0), float64(x1), float64(y0), 1, plotBlack)
	drawLine(img, float64(x0), float64(y0), float64(x0), float64(y1), 1, plotBlack)
	for i, x := range xt {
		px := a.px(x)
		drawLine(img, px, float64(y0), px, float64(y0+5), 1, plotBlack)
		if lab[i] {
			drawText(img, sizeLabel(x), int(math.Round(px)), y0+12, 2, alignCenter, plotBlack)
		}
	}
	for _, y := range yt {
		py := a.py(y)
		drawLine(img, float64(x0-5), py, float64(x0), py, 1, plotBlack)
		drawText(img, a.yLabel(y), x0-10, int(math.Round(py))-7, 2, alignRight, plotBlack)
	}
	drawText(img, p.title, plotWidth/2, 22, 2, alignCenter, plotBlack)
	drawText(img, p.xLabel, (x0+x1)/2, plotHeight-40, 2, alignCenter, plotBlack)
	drawTextUp(img, p.yLabel, 18, (y0+y1)/2, 2, plotBlack)
	// The legend first: the curves go over it.
	for si, s := range p.series {
		ly := y1 + 14 + si*22
		drawLine(img, float64(x0+15), float64(ly), float64(x0+40), float64(ly), 2, s.color)
		drawText(img, s.name, x0+48, ly-7, 2, alignLeft, plotBlack)
	}
	for _, s := range p.series {
		for i := 1; i < len(s.ys); i++ {
			drawLine(img, a.px(p.xs[i-1]), a.py(s.ys[i-1]), a.px(p.xs[i]), a.py(s.ys[i]), 2, s.color)
		}
		for i, y := range s.ys {
			fillDisc(img, a.px(p.xs[i]), a.py(y), plotMarkerR, s.color)
		}
	}
	return png.Encode(w, img)
}

// drawLine draws a line of the given width (1 or more pixels).
func drawLine(img *image.RGBA, xa, ya, xb, yb float64, width int, c color.RGBA) {
	n := int(math.Ceil(math.Max(math.Abs(xb-xa), math.Abs(yb-ya))))
	for i := 0; i <= n; i++ {
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		x := int(math.Round(xa + t*(xb-xa)))
		y := int(math.Round(ya + t*(yb-ya)))
		for dx := range width {
			for dy := range width {
				img.SetRGBA(x+dx-width/2, y+dy-width/2, c)
			}
		}
	}
}

// fillDisc draws a filled disc.
func fillDisc(img *image.RGBA, cx, cy float64, r int, c color.RGBA) {
	x, y := int(math.Round(cx)), int(math.Round(cy))
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			if dx*dx+dy*dy <= r*r+r {
				img.SetRGBA(x+dx, y+dy, c)
			}
		}
	}
}
