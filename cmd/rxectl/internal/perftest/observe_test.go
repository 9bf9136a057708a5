package perftest

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/trace"
)

// TestLadderAndTrace: a loopback READ run with one READ response dropped
// after the capture point draws its ladder from a temporary capture,
// writes both devices' QP traces into one file, and says what went wrong.
func TestLadderAndTrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	svg, tr := filepath.Join(dir, "run.svg"), filepath.Join(dir, "run.jsonl")
	_, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "5", "-s", "16384", "-m", "1024",
		"--drop", "RC_RDMA_READ_RESPONSE_MIDDLE#3,dir=recv", "--ladder", svg, "--trace", tr, "--selective-repeat=off")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, errs, "What went wrong")
	require.Contains(t, errs, "lost after the capture point")
	require.NotContains(t, errs, "Capture ", "--ladder's own capture is not reported")

	doc, err := os.ReadFile(svg)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
	}
	require.Contains(t, string(doc), "lost after the capture point")

	f, err := os.Open(tr)
	require.NoError(t, err)
	defer f.Close()
	evs, err := trace.Read(f)
	require.NoError(t, err)
	devs, kinds := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		devs[ev.Dev] = true
		kinds[ev.Ev] = true
	}
	require.Len(t, devs, 2, "both loopback devices trace into the file")
	for _, k := range []string{"send", "recv", "states", "retry", "complete", "qp_state", "timer_arm"} {
		require.True(t, kinds[k], k)
	}
}

func TestObserveFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"read-bw", "--loopback", "--ladder", "x.pdf"}, "must end in .svg or .png"},
		{[]string{"read-bw", "--loopback", "--ladder", "x.svg", "--pcap", "x.svg"}, "name the same file"},
		{[]string{"read-bw", "--loopback", "--trace", "x.pcap", "--pcap", "x.pcap"}, "name the same file"},
	} {
		_, errs, code := runCmd(t, tc.args...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.want)
	}
}
