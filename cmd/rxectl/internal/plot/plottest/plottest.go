// Package plottest checks the files plot.Write draws, for the tests of
// plot and of the commands that draw plots.
package plottest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
)

// SVGPoints parses an SVG with encoding/xml (it must be well-formed
// throughout) and returns its title and, per series, the data-size of
// each point.
func SVGPoints(name string) (title string, points map[string][]int, err error) {
	f, err := os.Open(name)
	if err != nil {
		return "", nil, err
	}
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
		if err != nil {
			return "", nil, err
		}
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
				if err != nil {
					return "", nil, fmt.Errorf("data-size: %w", err)
				}
				if _, err = strconv.ParseFloat(attr["data-value"], 64); err != nil {
					return "", nil, fmt.Errorf("data-value: %w", err)
				}
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
	if len(stack) != 0 {
		return "", nil, errors.New("unclosed elements")
	}
	return title, points, nil
}

// CheckPNG decodes a PNG plot of p and checks its size and that the
// curves are drawn: every point and the middle of every segment; the
// title's band is inked and the corner is background.
func CheckPNG(name string, p *plot.Plot) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return err
	}
	if b := img.Bounds(); b != image.Rect(0, 0, plot.Width, plot.Height) {
		return fmt.Errorf("bounds %v", b)
	}
	white := color.RGBAModel.Convert(plot.White)
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
	for _, s := range p.Series {
		for i, y := range s.Ys {
			x, py := p.Pixel(p.Xs[i], y)
			if !inked(x, py) {
				return fmt.Errorf("%s: no point at size %v", s.Name, p.Xs[i])
			}
			if c := color.RGBAModel.Convert(img.At(int(math.Round(x)), int(math.Round(py)))); len(p.Series) == 1 && c != s.Color {
				return fmt.Errorf("%s: point at size %v has colour %v, want %v", s.Name, p.Xs[i], c, s.Color)
			}
			if i > 0 {
				x0, py0 := p.Pixel(p.Xs[i-1], s.Ys[i-1])
				if !inked((x+x0)/2, (py+py0)/2) {
					return fmt.Errorf("%s: no line before size %v", s.Name, p.Xs[i])
				}
			}
		}
	}
	ink := 0
	for y := 20; y < 40; y++ {
		for x := 0; x < plot.Width; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) != white {
				ink++
			}
		}
	}
	if ink <= 200 {
		return fmt.Errorf("title band has %d inked pixels, want more than 200", ink)
	}
	if c := color.RGBAModel.Convert(img.At(2, plot.Height-2)); c != white {
		return fmt.Errorf("corner is %v, not background", c)
	}
	return nil
}
