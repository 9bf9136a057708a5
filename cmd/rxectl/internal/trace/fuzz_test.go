package trace

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readErrRE is the start of every error of Read: the line it names.
var readErrRE = regexp.MustCompile(`^line ([0-9]+): `)

// FuzzRead: Read never panics; it returns one event for each line that is
// not blank, in order, up to the first line that is not an event, and its
// error names that line, which is not blank; what it accepts, the timeline
// prints one line per event and Ladder either draws or says there is no
// QP.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"t":0,"dev":"a","qpn":1,"ev":"send","engine":"requester","op":"RC_SEND_ONLY","psn":5}` + "\n"))
	f.Add([]byte(`{"t":1.5,"ev":"states","states":["GET_ACK","CHECK_PSN","CHECK_ACK","DONE"]}`))
	f.Add([]byte("\n \r\n{\"ev\":\"send\"}\r\n\t\n{\"ev\":\"recv\"}\nnull\n{\"ev\":\"send\"}\n"))
	f.Add([]byte("{\"ev\":\"send\"}\n\n[1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := Read(bytes.NewReader(data))
		for _, ev := range evs {
			require.NotEmpty(t, ev.Ev, "an event without \"ev\"")
		}
		// The lines as Read's scanner splits them (a line is at most
		// 1 MiB: the fuzzer's inputs are shorter), numbered from 1.
		lines := strings.Split(string(data), "\n")
		upTo := len(lines) // the lines before the one the error names
		if err != nil {
			m := readErrRE.FindStringSubmatch(err.Error())
			require.NotNil(t, m, "error %q names no line", err)
			n, aerr := strconv.Atoi(m[1])
			require.NoError(t, aerr)
			require.True(t, n >= 1 && n <= len(lines), "line %d of %d", n, len(lines))
			require.NotEmpty(t, strings.TrimSpace(lines[n-1]), "a blank line %d refused", n)
			upTo = n - 1
		}
		events := 0
		for _, l := range lines[:upTo] {
			if strings.TrimSpace(l) != "" {
				events++
			}
		}
		require.Len(t, evs, events, "one event a line that is not blank")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		require.NoError(t, WriteTimeline(&buf, evs, Filter{}))
		require.Equal(t, len(evs), strings.Count(buf.String(), "\n"))
		d, err := Ladder(evs, Filter{})
		if err != nil {
			require.ErrorIs(t, err, ErrNoQP)
			return
		}
		require.NoError(t, d.WriteSVG(&bytes.Buffer{}))
	})
}
