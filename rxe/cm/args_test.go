package cm

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestArgumentsOutOfRange: private data longer than its message carries,
// and REQ timeouts or retries wider than their bits, are refused with
// ErrInvalid and change nothing (kernel ib_send_cm_* refuse them with
// -EINVAL). They used to be cut or wrapped silently: the peer got other
// private data than the consumer gave, and a REQ whose MaxCMRetries of 16
// said 0 on the wire was retried 16 times here.
func TestArgumentsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int                                   // the longest private data accepted
		call func(w *wire, id ID, pd []byte) error // on a connection in the state the call needs
		rep  bool                                  // id is in REP received (else established)
	}{
		{"ConfirmREP", packet.RTUPrivateDataSize, func(w *wire, id ID, pd []byte) error { return w.client.ConfirmREP(id, pd) }, true},
		{"Reject", packet.REJPrivateDataSize, func(w *wire, id ID, pd []byte) error {
			return w.client.Reject(id, packet.RejConsumerReject, pd)
		}, true},
		{"Disconnect", packet.DREQPrivateDataSize, func(w *wire, id ID, pd []byte) error { return w.client.Disconnect(w.now, id, pd) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			w.autoREP = !tc.rep
			id := w.connect()
			state := w.client.State(id)
			sent := len(w.log)
			require.ErrorIs(t, tc.call(w, id, make([]byte, tc.max+1)), ErrInvalid)
			w.pump()
			require.Equal(t, state, w.client.State(id), "the connection is as it was")
			require.Len(t, w.log, sent, "nothing was sent")
			pd := make([]byte, tc.max)
			pd[tc.max-1] = 0xA5
			require.NoError(t, tc.call(w, id, pd))
			w.pump()
			last := w.events["server"][len(w.events["server"])-1]
			require.Equal(t, pd, last.PrivateData, "the peer gets the whole private data")
		})
	}

	a := NewAgent(Config{})
	for name, mut := range map[string]func(*packet.REQ){
		"MaxCMRetries 16":            func(r *packet.REQ) { r.MaxCMRetries = 16 },
		"RemoteCMResponseTimeout 32": func(r *packet.REQ) { r.RemoteCMResponseTimeout = 32 },
		"LocalCMResponseTimeout 40":  func(r *packet.REQ) { r.LocalCMResponseTimeout = 40 },
		"LocalACKTimeout 32":         func(r *packet.REQ) { r.Primary.LocalACKTimeout = 32 },
	} {
		req := testREQ()
		mut(req)
		_, err := a.Connect(t0, serverAddr, req)
		require.ErrorIs(t, err, ErrInvalid, name)
		require.Zero(t, a.Len(), name)
		_, sent := a.Poll()
		require.False(t, sent, name)
	}
}
