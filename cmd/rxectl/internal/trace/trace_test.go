package trace

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// timeout is rxe's TestTraceTimeout trace (synctest time): a WRITE whose
// packet is lost, resent when the ACK timer fires.
const timeout = "testdata/trace_write_timeout.jsonl"

func read(t *testing.T) []Event {
	t.Helper()
	f, err := os.Open(timeout)
	require.NoError(t, err)
	defer f.Close()
	evs, err := Read(f)
	require.NoError(t, err)
	return evs
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(name, got, 0o644))
	}
	want, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestTimelineGolden(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTimeline(&buf, read(t), Filter{}))
	golden(t, "testdata/trace_write_timeout.txt", buf.Bytes())
}

func TestTimelineFilter(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTimeline(&buf, read(t), Filter{Dev: "127.0.0.2:4791"}))
	require.Equal(t, 7, strings.Count(buf.String(), "\n"), buf.String())
	require.NotContains(t, buf.String(), "127.0.0.1:4791")
}

func TestLadderGolden(t *testing.T) {
	d, err := Ladder(read(t), Filter{})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, d.WriteSVG(&buf))
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	golden(t, "testdata/trace_write_timeout.svg", buf.Bytes())
	require.Contains(t, d.Right, "127.0.0.2:4791 QP 17")
}

func TestReadErrors(t *testing.T) {
	_, err := Read(strings.NewReader("{\"t\":0,\"ev\":\"send\"}\n\nnot json\n"))
	require.ErrorContains(t, err, "line 3")
	_, err = Read(strings.NewReader("{\"t\":0}\n"))
	require.ErrorContains(t, err, "not an rxe trace event")
	_, err = Ladder(nil, Filter{})
	require.ErrorIs(t, err, ErrNoQP)
	require.EqualError(t, err, "no QP in the trace sent a request")
	// With a filter, the error names it: the trace may hold requests
	// outside it.
	evs := []Event{{T: 0.5, Ev: "send", Engine: "requester", Dev: "127.0.0.1:4791", QPN: 17}}
	_, err = Ladder(evs, Filter{QPN: 18, HasQPN: true, Dev: "127.0.0.1:4791", From: 0.01, To: 0.02})
	require.ErrorIs(t, err, ErrNoQP)
	require.EqualError(t, err, "no QP in the trace sent a request matching --qp 18 --dev 127.0.0.1:4791 --time 0.01-0.02")
	d, err := Ladder(evs, Filter{QPN: 17, HasQPN: true})
	require.NoError(t, err)
	require.Equal(t, "requester 127.0.0.1:4791 QP 17", d.Left)
}

func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	svg := t.TempDir() + "/l.svg"
	require.Equal(t, 0, Run([]string{"--qp", "17", "--dev", "127.0.0.1:4791", "--ladder", svg, timeout}, &out, &errb), errb.String())
	require.Equal(t, 14, strings.Count(out.String(), "\n"), out.String())
	_, err := os.Stat(svg)
	require.NoError(t, err)
	out.Reset()
	require.Equal(t, 2, Run([]string{"--qp", "x", timeout}, &out, &errb))
	require.Equal(t, 2, Run(nil, &out, &errb))
	require.Equal(t, 2, Run([]string{"--time", "2-1", timeout}, &out, &errb))
	out.Reset()
	require.Equal(t, 0, Run([]string{"--time", "0.004-0.005", "--dev", "127.0.0.2:4791", timeout}, &out, &errb))
	require.Equal(t, 4, strings.Count(out.String(), "\n"), out.String())
	require.Equal(t, 1, Run([]string{"testdata/missing.jsonl"}, &out, &errb))
}

// TestRunFlagsAfterFile: as with rxectl dump, the flags may follow FILE,
// and the help lists them.
func TestRunFlagsAfterFile(t *testing.T) {
	var before, after, errb bytes.Buffer
	require.Equal(t, 0, Run([]string{"--qp", "17", "--dev", "127.0.0.1:4791", timeout}, &before, &errb), errb.String())
	require.Equal(t, 0, Run([]string{timeout, "--qp", "17", "--dev=127.0.0.1:4791"}, &after, &errb), errb.String())
	require.Equal(t, before.String(), after.String())
	require.Equal(t, 2, Run([]string{timeout, "--qp", "17", timeout}, &after, &errb))
	require.Contains(t, errb.String(), "want exactly one FILE, got 2 arguments")

	var help bytes.Buffer
	Usage(&help)
	for _, f := range []string{"qp N", "dev ADDR", "time T1-T2", "ladder FILE"} {
		require.Contains(t, help.String(), "  -"+f+"\n", help.String())
	}
}
