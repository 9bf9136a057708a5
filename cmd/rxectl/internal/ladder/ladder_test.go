package ladder

import (
	"bytes"
	"encoding/xml"
	"flag"
	"image"
	"image/png"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// lossy is a gorxe loopback READ run (see testdata/README.md): one READ
// request lost before the capture point, one READ response after it.
const lossy = "testdata/read_lossy.pcap"

func diagram(t *testing.T, name string, sel Selection) *Diagram {
	t.Helper()
	pkts := readPcap(t, name)
	d, err := FromCapture(pkts, flowstest.Analyse(pkts, flows.Options{}), sel)
	require.NoError(t, err)
	return d
}

// wellFormed parses an SVG document to its end.
func wellFormed(t *testing.T, doc []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	n := 0
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n++
	}
	require.Greater(t, n, 10)
}

func TestGoldenLossyRead(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, diagram(t, lossy, Selection{}).WriteSVG(&buf))
	wellFormed(t, buf.Bytes())
	const golden = "testdata/read_lossy.svg"
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String())
}

func TestFoldsMiddles(t *testing.T) {
	d := diagram(t, lossy, Selection{})
	rows := d.rows()
	bands := 0
	for _, r := range rows {
		if r.n > 1 {
			bands++
			require.Contains(t, r.label(), "READ_RESPONSE_MIDDLE ×")
		}
	}
	require.Greater(t, bands, 3)
	require.Less(t, len(rows), len(d.Items)/2, "folding makes the diagram shorter")
}

func TestKinds(t *testing.T) {
	d := diagram(t, lossy, Selection{})
	var seen [numKinds]int
	for _, it := range d.Items {
		seen[it.Kind]++
	}
	require.Equal(t, 2, seen[Lost], "the READ request lost before the capture point, the READ response after it")
	require.Equal(t, 1, seen[NAK], "the sequence error NAK")
	require.Positive(t, seen[Resent])
}

func TestSelection(t *testing.T) {
	d := diagram(t, lossy, Selection{FromFrame: 50, ToFrame: 60})
	for _, it := range d.Items {
		if it.Frame != 0 {
			require.True(t, it.Frame >= 50 && it.Frame <= 60, it.Frame)
		}
	}
	d = diagram(t, lossy, Selection{QP: 0x12, HasQP: true, ToTime: 2 * time.Millisecond})
	require.NotEmpty(t, d.Items)
	pkts := readPcap(t, lossy)
	_, err := FromCapture(pkts, flowstest.Analyse(pkts, flows.Options{}), Selection{QP: 0x99, HasQP: true})
	require.ErrorContains(t, err, "no flow to QP 0x99")
	_, err = FromCapture(pkts, flowstest.Analyse(pkts, flows.Options{}), Selection{FromFrame: 1000, ToFrame: 2000})
	require.ErrorIs(t, err, ErrNoPackets)
}

func TestEscapesText(t *testing.T) {
	d := &Diagram{Title: "a <b> & c", Left: "l", Right: "r", Items: []Item{{Kind: Note, Dir: OnLeft, Label: `x"<y>`}}}
	var buf bytes.Buffer
	require.NoError(t, d.WriteSVG(&buf))
	wellFormed(t, buf.Bytes())
	require.True(t, strings.Contains(buf.String(), "a &lt;b&gt; &amp; c"))
}

// TestPreview writes the diagram of $LADDER_PCAP to $LADDER_OUT.
func TestPreview(t *testing.T) {
	in, out := os.Getenv("LADDER_PCAP"), os.Getenv("LADDER_OUT")
	if in == "" || out == "" {
		t.Skip("set LADDER_PCAP and LADDER_OUT to draw a capture")
	}
	f, err := os.Create(out)
	require.NoError(t, err)
	require.NoError(t, diagram(t, in, Selection{}).WriteSVG(f))
	require.NoError(t, f.Close())
}

func readPcap(t *testing.T, name string) []flows.Packet {
	t.Helper()
	pkts, err := flowstest.ReadPcap(name)
	require.NoError(t, err)
	return pkts
}

func TestWritePNGAndSVG(t *testing.T) {
	d := diagram(t, lossy, Selection{FromFrame: 1, ToFrame: 60})
	dir := t.TempDir()
	require.NoError(t, Write(dir+"/l.png", d))
	f, err := os.Open(dir + "/l.png")
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	w, h := d.Size()
	require.Equal(t, image.Rect(0, 0, w*pngZoom, h*pngZoom), img.Bounds())
	// The NAK's red is drawn somewhere.
	red := false
	for y := 0; y < img.Bounds().Dy() && !red; y++ {
		for x := 0; x < img.Bounds().Dx(); x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == 0xc0 && g>>8 == 0x24 && b>>8 == 0x1b {
				red = true
				break
			}
		}
	}
	require.True(t, red)
	require.NoError(t, Write(dir+"/l.svg", d))
	doc, err := os.ReadFile(dir + "/l.svg")
	require.NoError(t, err)
	wellFormed(t, doc)
}

// TestTimeGoesBackwards: a frame stamped before the capture's first frame
// is drawn at the time of the frame ahead of it, so the items' times never
// decrease and no stamp is negative.
func TestTimeGoesBackwards(t *testing.T) {
	tests := []struct {
		name  string
		frame int // index into the packets
		by    time.Duration
	}{
		{"10 s before the first", 5, -10 * time.Second},
		{"an hour later", 5, time.Hour},
		{"the last a year earlier", -1, -365 * 24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkts := readPcap(t, lossy)
			i := tc.frame
			if i < 0 {
				i += len(pkts)
			}
			pkts[i].Time = pkts[i].Time.Add(tc.by)
			d, err := FromCapture(pkts, flowstest.Analyse(pkts, flows.Options{}), Selection{})
			require.NoError(t, err)
			for k := 1; k < len(d.Items); k++ {
				require.False(t, d.Items[k].Time.Before(d.Items[k-1].Time), "item %d", k)
			}
			var buf bytes.Buffer
			require.NoError(t, d.WriteSVG(&buf))
			wellFormed(t, buf.Bytes())
			require.NotContains(t, buf.String(), "+-")
		})
	}
}
