package ladder

import (
	"image/color"
	"io"
	"strings"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
)

// pngZoom is the PNG's pixels per SVG unit.
const pngZoom = 2

// raster draws on a plot.Raster, the PNG charts' primitives.
type raster struct{ r *plot.Raster }

// ascii replaces the characters the bitmap font lacks.
var ascii = strings.NewReplacer("→", "->", "←", "<-", "⇄", "<->", "×", "x", "µ", "u", "•", "*", "…", "...")

// Line draws a segment on the raster.
func (r raster) Line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	r.r.Line(x1, y1, x2, y2, c, width, dashed)
}

// Rect fills a rectangle.
func (r raster) Rect(x, y, w, h float64, c color.RGBA) { r.r.Rect(x, y, w, h, c) }

// Triangle fills a triangle.
func (r raster) Triangle(x1, y1, x2, y2, x3, y3 float64, c color.RGBA) {
	r.r.Triangle(x1, y1, x2, y2, x3, y3, c)
}

// Text draws s with the bitmap font, characters it lacks spelled in ASCII.
func (r raster) Text(x, y float64, s string, c color.RGBA, size int, a Anchor) {
	r.r.Text(x, y, ascii.Replace(s), c, [...]plot.Align{plot.AlignLeft, plot.AlignCenter, plot.AlignRight}[a])
}

// WritePNG writes d as a PNG image, drawn with the primitives and bitmap
// font of rxectl's PNG charts.
func (d *Diagram) WritePNG(w io.Writer) error {
	wd, h := d.Size()
	r := plot.NewRaster(wd, h, pngZoom)
	d.Draw(raster{r})
	return r.WritePNG(w)
}
