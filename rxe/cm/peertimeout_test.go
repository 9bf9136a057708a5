package cm

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestPeerTimeoutsBounded: the timeouts a peer announces (the REQ's local
// CM response timeout, for our wait for its RTU; an MRA's service timeout,
// for our wait for its REP; the REQ's local ACK timeout, for our
// time-wait) count for at most Config.MaxPeerTimeout (24 by default, about
// 69 s). A peer that announced 31 (about 2.4 h) and died used to hold the
// connection, and rxe's Accept or Dial, for up to 16 such waits.
func TestPeerTimeoutsBounded(t *testing.T) {
	plt := duration(10) // the wire's agents' packet life time
	for _, tc := range []struct {
		name  string
		setup func(w *wire) (*Agent, ID)
		max   time.Duration
	}{
		{"RTU wait of a REQ with response timeout 31", func(w *wire) (*Agent, ID) {
			w.fate = lose(map[string][]int{"client RTU": {0}})
			req := testREQ()
			req.LocalCMResponseTimeout = 31
			_, err := w.client.Connect(w.now, serverAddr, req)
			require.NoError(w.t, err)
			w.pump()
			return w.server, w.serverID()
		}, duration(24) + 2*plt},
		{"REP wait after an MRA with service timeout 31", func(w *wire) (*Agent, ID) {
			w.autoREQ = false
			id := w.connect()
			var mad [packet.MADSize]byte
			packet.EncodeCM(mad[:], 1, &packet.MRA{LocalCommID: uint32(w.serverID()), RemoteCommID: uint32(id),
				MessageMRAed: packet.MsgREQ, ServiceTimeout: 31})
			w.client.Receive(w.now, serverAddr, mad[:])
			return w.client, id
		}, duration(24) + plt},
		{"time-wait of a REQ with local ACK timeout 31", func(w *wire) (*Agent, ID) {
			req := testREQ()
			req.Primary.LocalACKTimeout = 31
			id, err := w.client.Connect(w.now, serverAddr, req)
			require.NoError(w.t, err)
			w.pump()
			require.NoError(w.t, w.client.Disconnect(w.now, id, nil))
			w.pump()
			require.Equal(w.t, StateTimeWait, w.server.State(w.serverID()))
			return w.server, w.serverID()
		}, duration(24) + 2*plt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			a, id := tc.setup(w)
			require.NotEqual(t, StateIdle, a.State(id))
			d, ok := a.Deadline()
			require.True(t, ok)
			require.LessOrEqual(t, d.Sub(w.now), tc.max)
		})
	}
}
