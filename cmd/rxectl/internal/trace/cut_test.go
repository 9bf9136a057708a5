package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunCutTrace: a trace whose writer was killed ends in the middle of
// a line. rxectl trace prints the events before it, as rxectl dump prints
// the frames before a cut record, then says where the trace stops and
// exits with status 1; the same for a line that is no event at all.
func TestRunCutTrace(t *testing.T) {
	whole, err := os.ReadFile(timeout)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(whole), "\n")
	require.Greater(t, len(lines), 4)
	var full bytes.Buffer
	require.Equal(t, exitOK, Run([]string{timeout}, &full, &bytes.Buffer{}))
	timeline := strings.SplitAfter(full.String(), "\n")
	tests := []struct {
		name    string
		content string
		want    int // timeline lines printed
		err     string
	}{
		{"cut inside line 4", lines[0] + lines[1] + lines[2] + lines[3][:len(lines[3])/2], 3,
			"rxectl trace: %s: line 4: unexpected end of JSON input (the trace stops there: the 3 events before it are shown)\n"},
		{"not an event on line 3", lines[0] + lines[1] + "{\"x\":1}\n" + lines[3], 2,
			"rxectl trace: %s: line 3: no \"ev\": not an rxe trace event (the trace stops there: the 2 events before it are shown)\n"},
		{"not a trace at all", "\xd4\xc3\xb2\xa1\n", 0,
			"rxectl trace: %s: line 1: invalid character 'Ô' looking for beginning of value\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cut.jsonl")
			require.NoError(t, os.WriteFile(file, []byte(tc.content), 0o644))
			var out, errb bytes.Buffer
			require.Equal(t, exitFail, Run([]string{file}, &out, &errb))
			require.Equal(t, strings.Join(timeline[:tc.want], ""), out.String())
			require.Equal(t, strings.ReplaceAll(tc.err, "%s", file), errb.String())
		})
	}
}
