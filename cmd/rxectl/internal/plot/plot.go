// Package plot draws rxectl's --plot charts: curves of values (bandwidth,
// latencies) against the message size of a -a run on a log2 axis, as an
// SVG written by hand or a PNG drawn with the standard library (image,
// image/png, image/draw) and the 5x7 bitmap font of font.go.
package plot

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
)

// Series is one curve: a value per x of the plot.
type Series struct {
	Name  string
	Color color.RGBA
	Ys    []float64
}

// Plot is what a chart shows.
type Plot struct {
	Title, XLabel, YLabel string
	Unit                  string    // of the y values, for the points' tooltips
	Xs                    []float64 // message sizes in bytes, > 0, ascending
	Series                []Series
}

// Series colours.
var (
	Blue      = color.RGBA{0x1f, 0x5f, 0xbf, 0xff} // the first series
	Orange    = color.RGBA{0xe0, 0x6c, 0x00, 0xff} // the second series
	plotGrid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	plotBlack = color.RGBA{0, 0, 0, 0xff}
	White     = color.RGBA{0xff, 0xff, 0xff, 0xff} // the background
)

// Write writes p to the file name, as SVG or PNG by its extension.
func Write(name string, p *Plot) error {
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

// Width and Height are the chart's size in pixels (SVG user units are
// pixels too).
const (
	Width  = 960
	Height = 600
)

// Chart geometry, in pixels.
const (
	plotLeft    = 120 // the y tick labels and the y label
	plotRight   = 40
	plotTop     = 70 // the title and the legend
	plotBottom  = 90 // the x tick labels and the x label
	plotTicksX  = 12 // at most this many labelled x ticks
	plotTicksY  = 6  // about this many y ticks
	plotMarkerR = 3  // point radius
)

// Pixel is where the point (x, y) of p is drawn, in pixels from the top
// left corner.
func (p *Plot) Pixel(x, y float64) (px, py float64) {
	a := p.axes()
	return a.px(x), a.py(y)
}

// axes maps data to pixels: x on a log2 scale over [lx0, lx1], y linear
// over [0, ymax].
type axes struct {
	lx0, lx1 float64
	ymax     float64
	ystep    float64
}

func (p *Plot) axes() axes {
	a := axes{lx0: 1, lx1: 2}
	if len(p.Xs) > 0 {
		a.lx0, a.lx1 = math.Log2(p.Xs[0]), math.Log2(p.Xs[len(p.Xs)-1])
	}
	if a.lx1-a.lx0 < 1 {
		a.lx0, a.lx1 = a.lx0-0.5, a.lx1+0.5
	}
	top := 0.0
	for _, s := range p.Series {
		for _, y := range s.Ys {
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
	return plotLeft + (math.Log2(x)-a.lx0)/(a.lx1-a.lx0)*(Width-plotLeft-plotRight)
}

func (a axes) py(y float64) float64 {
	y = min(max(y, 0), a.ymax)
	return Height - plotBottom - y/a.ymax*(Height-plotTop-plotBottom)
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
func (p *Plot) writeSVG(w io.Writer) error {
	a := p.axes()
	var b strings.Builder
	esc := func(s string) string {
		var e strings.Builder
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	x0, x1 := float64(plotLeft), float64(Width-plotRight)
	y0, y1 := float64(Height-plotBottom), float64(plotTop)
	fmt.Fprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n",
		Width, Height, Width, Height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(p.Title))
	fmt.Fprintf(&b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", Width, Height)
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"32\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">%s</text>\n", Width/2, esc(p.Title))

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
	fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", (x0+x1)/2, Height-30, esc(p.XLabel))
	yMid := (y0 + y1) / 2
	fmt.Fprintf(&b, "<text x=\"30\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 30 %.1f)\">%s</text>\n", yMid, yMid, esc(p.YLabel))
	b.WriteString("</g>\n")

	// The legend, top left inside the plot area, then the curves over it.
	b.WriteString("<g class=\"legend\">\n")
	for si, s := range p.Series {
		ly := y1 + 18 + float64(si)*20
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", x0+15, ly-4, x0+40, ly-4, svgColor(s.Color))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x0+48, ly, esc(s.Name))
	}
	b.WriteString("</g>\n")
	for _, s := range p.Series {
		col := svgColor(s.Color)
		fmt.Fprintf(&b, "<g class=\"series\" data-name=\"%s\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", esc(s.Name), col)
		for i, y := range s.Ys {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", a.px(p.Xs[i]), a.py(y))
		}
		b.WriteString("\"/>\n")
		for i, y := range s.Ys {
			v := valueText(y)
			fmt.Fprintf(&b, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" data-size=\"%d\" data-value=\"%s\"><title>%d bytes: %s %s</title></circle>\n",
				a.px(p.Xs[i]), a.py(y), plotMarkerR, col, int64(p.Xs[i]), v, int64(p.Xs[i]), v, esc(p.Unit))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// valueText is a point's value as its data-value and tooltip give it:
// two decimals, or six when it is below 0.1 and not zero (the precision
// perftest's REPORT_FMT_EXT gives Gb/s figures below 0.1), so that a
// small figure does not read 0.00.
func valueText(y float64) string {
	if y != 0 && math.Abs(y) < 0.1 {
		return strconv.FormatFloat(y, 'f', 6, 64)
	}
	return strconv.FormatFloat(y, 'f', 2, 64)
}

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// writePNG draws the chart with the standard library and the built-in
// bitmap font.
func (p *Plot) writePNG(w io.Writer) error {
	a := p.axes()
	img := image.NewRGBA(image.Rect(0, 0, Width, Height))
	draw.Draw(img, img.Bounds(), image.NewUniform(White), image.Point{}, draw.Src)
	x0, x1 := plotLeft, Width-plotRight
	y0, y1 := Height-plotBottom, plotTop
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
	drawText(img, p.Title, Width/2, 22, 2, alignCenter, plotBlack)
	drawText(img, p.XLabel, (x0+x1)/2, Height-40, 2, alignCenter, plotBlack)
	drawTextUp(img, p.YLabel, 18, (y0+y1)/2, 2, plotBlack)
	// The legend first: the curves go over it.
	for si, s := range p.Series {
		ly := y1 + 14 + si*22
		drawLine(img, float64(x0+15), float64(ly), float64(x0+40), float64(ly), 2, s.Color)
		drawText(img, s.Name, x0+48, ly-7, 2, alignLeft, plotBlack)
	}
	for _, s := range p.Series {
		for i := 1; i < len(s.Ys); i++ {
			drawLine(img, a.px(p.Xs[i-1]), a.py(s.Ys[i-1]), a.px(p.Xs[i]), a.py(s.Ys[i]), 2, s.Color)
		}
		for i, y := range s.Ys {
			fillDisc(img, a.px(p.Xs[i]), a.py(y), plotMarkerR, s.Color)
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
