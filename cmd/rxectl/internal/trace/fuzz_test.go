package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzRead: Read never panics; what it accepts, the timeline prints one
// line per event and Ladder either draws or says there is no QP.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"t":0,"dev":"a","qpn":1,"ev":"send","engine":"requester","op":"RC_SEND_ONLY","psn":5}` + "\n"))
	f.Add([]byte(`{"t":1.5,"ev":"states","states":["GET_ACK","CHECK_PSN","CHECK_ACK","DONE"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := Read(bytes.NewReader(data))
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
