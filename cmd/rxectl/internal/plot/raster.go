package plot

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
)

// Raster is an image drawn with the primitives of the PNG charts (lines,
// rectangles and the bitmap font), plus dashed lines and filled triangles,
// for other diagrams (the ladder diagrams). Coordinates are in points;
// the image has Zoom pixels per point, so the 5x7 font at Zoom 2 reads
// like an 11-point SVG label.
type Raster struct {
	img  *image.RGBA
	zoom float64
}

// Align says where Text's x is: the left edge, the centre or the right
// edge of the text.
type Align int

// Text alignments.
const (
	AlignLeft Align = iota
	AlignCenter
	AlignRight
)

// NewRaster returns a white w x h point raster with zoom pixels per point.
func NewRaster(w, h, zoom int) *Raster {
	img := image.NewRGBA(image.Rect(0, 0, w*zoom, h*zoom))
	draw.Draw(img, img.Bounds(), image.NewUniform(White), image.Point{}, draw.Src)
	return &Raster{img: img, zoom: float64(zoom)}
}

// Line draws a line width points wide; a dashed one alternates 4 points
// drawn and 4 not.
func (r *Raster) Line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	z := r.zoom
	w := max(1, int(math.Round(width*z)))
	if !dashed {
		drawLine(r.img, x1*z, y1*z, x2*z, y2*z, w, c)
		return
	}
	n := math.Hypot(x2-x1, y2-y1)
	for s := 0.0; s < n; s += 8 {
		e := math.Min(s+4, n)
		drawLine(r.img, (x1+(x2-x1)*s/n)*z, (y1+(y2-y1)*s/n)*z, (x1+(x2-x1)*e/n)*z, (y1+(y2-y1)*e/n)*z, w, c)
	}
}

// Rect fills a rectangle.
func (r *Raster) Rect(x, y, w, h float64, c color.RGBA) {
	z := r.zoom
	rect := image.Rect(int(math.Round(x*z)), int(math.Round(y*z)), int(math.Round((x+w)*z)), int(math.Round((y+h)*z)))
	draw.Draw(r.img, rect, image.NewUniform(c), image.Point{}, draw.Src)
}

// Triangle fills a triangle.
func (r *Raster) Triangle(x1, y1, x2, y2, x3, y3 float64, c color.RGBA) {
	z := r.zoom
	ax, ay, bx, by, cx, cy := x1*z, y1*z, x2*z, y2*z, x3*z, y3*z
	edge := func(px, py, qx, qy, sx, sy float64) float64 { return (qx-px)*(sy-py) - (qy-py)*(sx-px) }
	area := edge(ax, ay, bx, by, cx, cy)
	if area == 0 {
		return
	}
	minX, maxX := int(math.Floor(min(ax, bx, cx))), int(math.Ceil(max(ax, bx, cx)))
	minY, maxY := int(math.Floor(min(ay, by, cy))), int(math.Ceil(max(ay, by, cy)))
	for py := minY; py <= maxY; py++ {
		for px := minX; px <= maxX; px++ {
			x, y := float64(px)+0.5, float64(py)+0.5
			w0, w1, w2 := edge(bx, by, cx, cy, x, y), edge(cx, cy, ax, ay, x, y), edge(ax, ay, bx, by, x, y)
			pos := w0 >= 0 && w1 >= 0 && w2 >= 0
			neg := w0 <= 0 && w1 <= 0 && w2 <= 0
			if area > 0 && pos || area < 0 && neg {
				r.img.SetRGBA(px, py, c)
			}
		}
	}
}

// Text writes s in the bitmap font with its baseline at y (characters
// without a glyph show as '?').
func (r *Raster) Text(x, y float64, s string, c color.RGBA, a Align) {
	scale := int(r.zoom)
	align := [...]textAlign{alignLeft, alignCenter, alignRight}[a]
	top := int(math.Round(y*r.zoom)) - glyphH*scale
	drawText(r.img, s, int(math.Round(x*r.zoom)), top, scale, align, c)
}

// WritePNG encodes the raster as PNG.
func (r *Raster) WritePNG(w io.Writer) error { return png.Encode(w, r.img) }
