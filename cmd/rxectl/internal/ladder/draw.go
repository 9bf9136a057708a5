package ladder

import (
	"bufio"
	"fmt"
	"html"
	"image/color"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
)

// Layout in pixels.
const (
	width      = 800
	laneLeft   = 250
	laneRight  = 700
	timeX      = 8
	rowH       = 22
	bandH      = 30
	gapH       = 26
	headerH    = 100
	footerH    = 20
	arrowDrop  = 8 // an arrow goes down this much: time passes in flight
	arrowHead  = 7
	fontSize   = 11
	titleSize  = 14
	legendRowY = 44
)

// Colours of the kinds.
var colors = [numKinds]color.RGBA{
	Request:  {0x22, 0x22, 0x22, 0xff},
	Response: {0x1f, 0x5f, 0xa8, 0xff},
	Resent:   {0xe0, 0x7b, 0x00, 0xff},
	NAK:      {0xc0, 0x24, 0x1b, 0xff},
	RNR:      {0x8e, 0x44, 0xad, 0xff},
	Lost:     {0xc0, 0x24, 0x1b, 0xff},
	Timeout:  {0x9a, 0x6a, 0x00, 0xff},
	Note:     {0x55, 0x55, 0x55, 0xff},
	CNP:      {0x00, 0x7a, 0x7a, 0xff},
}

var (
	black     = color.RGBA{0, 0, 0, 0xff}
	grey      = color.RGBA{0x99, 0x99, 0x99, 0xff}
	bandFill  = color.RGBA{0xe8, 0xf0, 0xfa, 0xff}
	timeoutBg = color.RGBA{0xff, 0xf3, 0xcd, 0xff}
	white     = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// Anchor says where a text's x is.
type Anchor uint8

// Text anchors.
const (
	Start Anchor = iota
	Middle
	End
)

// Canvas is what a diagram is drawn on: SVG here, PNG in the plot package.
type Canvas interface {
	// Line draws a line; dashed lines alternate 4 pixels on and off.
	Line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool)
	// Rect fills a rectangle.
	Rect(x, y, w, h float64, c color.RGBA)
	// Triangle fills a triangle.
	Triangle(x1, y1, x2, y2, x3, y3 float64, c color.RGBA)
	// Text writes s with its baseline at y.
	Text(x, y float64, s string, c color.RGBA, size int, a Anchor)
}

// Size returns the width and height of the drawing of d.
func (d *Diagram) Size() (w, h int) {
	h = headerH + footerH
	for _, r := range d.rows() {
		h += r.height()
	}
	return width, h
}

func (r *row) height() int {
	h := rowH
	if r.n > 1 {
		h = bandH
	}
	if r.gap > 0 {
		h += gapH
	}
	return h
}

// Draw draws d on c.
func (d *Diagram) Draw(c Canvas) {
	w, h := d.Size()
	rows := d.rows()
	c.Rect(0, 0, float64(w), float64(h), white)
	c.Text(float64(w)/2, 22, d.Title, black, titleSize, Middle)
	d.legend(c)
	top, bottom := float64(headerH-18), float64(h-footerH)
	c.Text(laneLeft, top-4, d.Left, black, fontSize, Middle)
	c.Text(laneRight, top-4, d.Right, black, fontSize, Middle)
	c.Line(laneLeft, top, laneLeft, bottom, grey, 2, false)
	c.Line(laneRight, top, laneRight, bottom, grey, 2, false)
	var t0 time.Time
	if len(rows) > 0 {
		t0 = rows[0].Time
	}
	y := float64(headerH)
	for i := range rows {
		r := &rows[i]
		if r.gap > 0 {
			c.Rect(laneLeft-3, y+2, 6, gapH-4, white)
			c.Rect(laneRight-3, y+2, 6, gapH-4, white)
			c.Line(laneLeft, y+2, laneLeft, y+gapH-2, grey, 2, true)
			c.Line(laneRight, y+2, laneRight, y+gapH-2, grey, 2, true)
			c.Text((laneLeft+laneRight)/2, y+gapH/2+4, flows.Human(r.gap)+" later", grey, fontSize, Middle)
			y += gapH
		}
		d.drawRow(c, r, y, t0)
		y += float64(r.height() - gapHeight(r))
	}
}

func gapHeight(r *row) int {
	if r.gap > 0 {
		return gapH
	}
	return 0
}

// legend draws one sample of each kind the diagram uses.
func (d *Diagram) legend(c Canvas) {
	var used [numKinds]bool
	folded := false
	for _, r := range d.rows() {
		used[r.Kind] = true
		folded = folded || r.n > 1
	}
	x := 20.0
	for k := Kind(0); k < numKinds; k++ {
		if !used[k] {
			continue
		}
		col := colors[k]
		switch k {
		case Timeout:
			c.Rect(x, legendRowY-9, 22, 12, timeoutBg)
		case Note:
			c.Text(x+11, legendRowY+1, "•", col, fontSize, Middle)
		default:
			c.Line(x, legendRowY-3, x+22, legendRowY-3, col, 2, k == Lost)
		}
		c.Text(x+27, legendRowY+1, kindNames[k], black, fontSize, Start)
		x += 27 + float64(len(kindNames[k]))*6.6 + 16
	}
	if folded {
		c.Rect(x, legendRowY-9, 22, 12, bandFill)
		c.Text(x+27, legendRowY+1, "folded run of MIDDLE packets", black, fontSize, Start)
	}
	note := "time goes down; left column: time since the first row"
	for _, it := range d.Items {
		if it.Frame > 0 {
			note += " and frame number"
			break
		}
	}
	c.Text(20, legendRowY+20, note, grey, fontSize, Start)
}

// drawRow draws one row with its top at y.
func (d *Diagram) drawRow(c Canvas, r *row, y float64, t0 time.Time) {
	col := colors[r.Kind]
	h := float64(r.height() - gapHeight(r))
	stamp := "+" + flows.Human(r.Time.Sub(t0))
	if r.Frame > 0 {
		stamp += "  #" + strconv.Itoa(r.Frame)
	}
	c.Text(timeX, y+h/2+4, stamp, grey, fontSize, Start)
	mid := (laneLeft + laneRight) / 2.0
	switch r.Dir {
	case Across:
		c.Rect(laneLeft-60, y+2, laneRight-laneLeft+120, h-4, timeoutBg)
		c.Text(mid, y+h/2+4, r.label(), col, fontSize, Middle)
		return
	case OnLeft, OnRight:
		if r.n > 1 {
			c.Rect(laneLeft+1, y+2, laneRight-laneLeft-2, h-4, bandFill)
		}
		x, a, tip := float64(laneLeft)+12, Start, float64(laneLeft)+8
		if r.Dir == OnRight {
			x, a, tip = laneRight-12, End, laneRight-8
		}
		base := float64(laneLeft) + 2
		if r.Dir == OnRight {
			base = laneRight - 2
		}
		c.Triangle(base, y+h/2-4, base, y+h/2+4, tip, y+h/2, col)
		c.Text(x, y+h/2+4, r.label(), col, fontSize, a)
		return
	}
	x1, x2 := float64(laneLeft), float64(laneRight)
	if r.Dir == ToLeft {
		x1, x2 = x2, x1
	}
	ya := y + (h-arrowDrop)/2
	yb := ya + arrowDrop
	if r.n > 1 {
		c.Rect(laneLeft+1, y+2, laneRight-laneLeft-2, h-4, bandFill)
	}
	if r.Kind == Lost {
		frac, lx := 0.5, (3*x1+x2)/4
		if r.Cut {
			frac, lx = 0.85, mid
		}
		xm := x1 + frac*(x2-x1)
		ym := ya + frac*(yb-ya)
		c.Line(x1, ya, xm, ym, col, 1.5, true)
		c.Line(xm-5, ym-5, xm+5, ym+5, col, 2, false)
		c.Line(xm-5, ym+5, xm+5, ym-5, col, 2, false)
		c.Text(lx, ya-1, r.label(), col, fontSize, Middle)
		return
	}
	c.Line(x1, ya, x2, yb, col, 1.5, false)
	dir := 1.0
	if x2 < x1 {
		dir = -1
	}
	c.Triangle(x2, yb, x2-dir*arrowHead*1.4, yb-arrowHead/2-1, x2-dir*arrowHead*1.4, yb+arrowHead/2-1, col)
	c.Text(mid, ya-1, r.label(), col, fontSize, Middle)
}

// svg is a Canvas writing SVG elements.
type svg struct{ w *bufio.Writer }

// Line writes a <line>.
func (s svg) Line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="4 4"`
	}
	fmt.Fprintf(s.w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n", f(x1), f(y1), f(x2), f(y2), hex(c), f(width), dash)
}

// Rect writes a filled <rect>.
func (s svg) Rect(x, y, w, h float64, c color.RGBA) {
	fmt.Fprintf(s.w, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", f(x), f(y), f(w), f(h), hex(c))
}

// Triangle writes a filled <polygon>.
func (s svg) Triangle(x1, y1, x2, y2, x3, y3 float64, c color.RGBA) {
	fmt.Fprintf(s.w, `<polygon points="%s,%s %s,%s %s,%s" fill="%s"/>`+"\n", f(x1), f(y1), f(x2), f(y2), f(x3), f(y3), hex(c))
}

// Text writes an escaped <text>.
func (s svg) Text(x, y float64, t string, c color.RGBA, size int, a Anchor) {
	anchor := [...]string{"start", "middle", "end"}[a]
	fmt.Fprintf(s.w, `<text x="%s" y="%s" font-size="%d" fill="%s" text-anchor="%s">%s</text>`+"\n", f(x), f(y), size, hex(c), anchor, html.EscapeString(t))
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// WriteSVG writes d as an SVG document.
func (d *Diagram) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	wd, h := d.Size()
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">`+"\n", wd, h, wd, h)
	d.Draw(svg{bw})
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// Write writes d to the file name: PNG when the name ends in ".png",
// SVG otherwise.
func Write(name string, d *Diagram) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if strings.HasSuffix(strings.ToLower(name), ".png") {
		err = d.WritePNG(f)
	} else {
		err = d.WriteSVG(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
