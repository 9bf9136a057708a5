package perftest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot/plottest"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

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
	require.Equal(t, cli.ExitOK, code, errs)
	title, points, err := plottest.SVGPoints(file)
	require.NoError(t, err)
	require.Equal(t, "RDMA_Read Latency Test, MTU 4096, "+time.Now().Format("2006-01-02"), title)
	require.Equal(t, map[string][]int{"t_typical": allSizes(), "99% percentile": allSizes()}, points)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(b), ">latency [usec]</text>")
	require.Contains(t, string(b), ">message size [bytes] (log2 scale)</text>")
	require.Contains(t, string(b), ">8M</text>")
}

// TestPlotPNGBandwidth: write-bw -a draws the average bandwidth; the
// points match the JSON results.
func TestPlotPNGBandwidth(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "bw.png")
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-a", "-n", "5", "--plot", file, "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var res struct {
		Results []report.BW `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	p := &plot.Plot{Series: []plot.Series{{Color: plot.Blue}}}
	for _, r := range res.Results {
		p.Xs = append(p.Xs, float64(r.Size))
		p.Series[0].Ys = append(p.Series[0].Ys, r.Avg)
	}
	require.Len(t, p.Xs, len(allSizes()))
	require.NoError(t, plottest.CheckPNG(file, p))
}

// fakeLatSession is a session with latency results, for plots without a
// run.
func fakeLatSession() *session {
	s := &session{t: Test{"send-lat", verbSend, true}, o: &options{all: true}, mtu: 3}
	for i, n := range allSizes() {
		s.latResults = append(s.latResults, report.Lat{Size: n, Typical: 2 + float64(i*i)/10, P99: 5 + float64(i*i)/5})
	}
	return s
}

// TestPlotFiles: plot.Write draws a session's plot data as PNG or SVG by
// the file's extension, in either case: a latency test's two series, a
// bandwidth test's in Gb/s with XML's special characters escaped; a file
// it cannot create is an error.
func TestPlotFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := fakeLatSession()
	p := s.plotData()
	require.Equal(t, "Send Latency Test, MTU 1024, "+time.Now().Format("2006-01-02"), p.Title)
	require.NoError(t, plot.Write(filepath.Join(dir, "lat.PNG"), p))
	require.NoError(t, plottest.CheckPNG(filepath.Join(dir, "lat.PNG"), p))
	require.NoError(t, plot.Write(filepath.Join(dir, "lat.svg"), p))
	_, points, err := plottest.SVGPoints(filepath.Join(dir, "lat.svg"))
	require.NoError(t, err)
	require.Len(t, points, 2)

	// Bandwidth in Gb/s; XML special characters are escaped.
	s = &session{t: Test{"atomic-bw", verbAtomic, false}, o: &options{all: true, gbits: true, atomicType: "A<B&C"}, mtu: 5}
	s.bwResults = []report.BW{{Size: 8, Avg: 0.5}, {Size: 16, Avg: 0}}
	p = s.plotData()
	require.Equal(t, "BW average [Gb/sec]", p.YLabel)
	require.NoError(t, plot.Write(filepath.Join(dir, "bw.svg"), p))
	title, points, err := plottest.SVGPoints(filepath.Join(dir, "bw.svg"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(title, "Atomic A<B&C BW Test, MTU 4096, "), title)
	require.Equal(t, map[string][]int{"BW average": {8, 16}}, points)
	require.NoError(t, plot.Write(filepath.Join(dir, "bw.png"), p))
	require.NoError(t, plottest.CheckPNG(filepath.Join(dir, "bw.png"), p))

	require.Error(t, plot.Write(filepath.Join(dir, "no", "such.svg"), p))
}
