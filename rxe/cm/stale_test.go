package cm

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestStaleREJ: a REJ whose IDs do not name a connection as kernel ib_cm
// matches them (cm_acquire_rejected_id) is dropped, and the connection it
// seems to name stays as it was. A REJ of a REQ names our ID only, so it
// ends only a connection that has no remote ID yet: a late or duplicated
// one (the REQ it refused was retried and got through) used to end the
// connection the retry made.
func TestStaleREJ(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  bool // sent to the server (else to the client)
		rej     func(cid, sid ID) packet.REJ
		dropped bool
	}{
		{"REJ of a REQ, no local ID, to the established client", false, func(cid, sid ID) packet.REJ {
			return packet.REJ{RemoteCommID: uint32(cid), MessageRejected: packet.MsgREQ, Reason: packet.RejNoResources}
		}, true},
		{"REJ of a REQ with the server's ID, to the established client", false, func(cid, sid ID) packet.REJ {
			return packet.REJ{LocalCommID: uint32(sid), RemoteCommID: uint32(cid), MessageRejected: packet.MsgREQ,
				Reason: packet.RejConsumerReject}
		}, true},
		{"REJ of a REP, no local ID, to the established server", true, func(cid, sid ID) packet.REJ {
			return packet.REJ{RemoteCommID: uint32(sid), MessageRejected: packet.MsgREP, Reason: packet.RejConsumerReject}
		}, true},
		{"REJ naming another peer ID, to the established client", false, func(cid, sid ID) packet.REJ {
			return packet.REJ{LocalCommID: uint32(sid) + 1, RemoteCommID: uint32(cid), MessageRejected: packet.MsgOther,
				Reason: packet.RejTimeout}
		}, true},
		{"REJ timeout naming both IDs ends the client", false, func(cid, sid ID) packet.REJ {
			return packet.REJ{LocalCommID: uint32(sid), RemoteCommID: uint32(cid), MessageRejected: packet.MsgOther,
				Reason: packet.RejTimeout}
		}, false},
		{"REJ naming both IDs ends the server", true, func(cid, sid ID) packet.REJ {
			return packet.REJ{LocalCommID: uint32(cid), RemoteCommID: uint32(sid), MessageRejected: packet.MsgOther,
				Reason: packet.RejConsumerReject}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			cid := w.connect()
			sid := w.serverID()
			require.Equal(t, StateEstablished, w.client.State(cid))
			require.Equal(t, StateEstablished, w.server.State(sid))
			a, id, from := w.client, cid, serverAddr
			if tc.server {
				a, id, from = w.server, sid, clientAddr
			}
			dropped := a.Counters().Dropped
			var mad [packet.MADSize]byte
			rej := tc.rej(cid, sid)
			packet.EncodeCM(mad[:], 0x77, &rej)
			a.Receive(w.now, from, mad[:])
			_, sent := a.Poll()
			require.False(t, sent, "a REJ is never answered")
			ev, got := a.NextEvent()
			if tc.dropped {
				require.False(t, got, "no event: %+v", ev)
				require.Equal(t, StateEstablished, a.State(id), "the connection is untouched")
				require.Equal(t, dropped+1, a.Counters().Dropped)
				return
			}
			require.True(t, got)
			require.Equal(t, EventRejected, ev.Kind)
			require.Equal(t, id, ev.ID)
			require.Equal(t, StateTimeWait, a.State(id))
		})
	}
}

// TestDREQWrongQPN: a DREQ that names a connection by both IDs but not by
// its QPN is dropped, as kernel cm_dreq_handler drops it; it used to be
// answered with a DREP naming the connection, which ends the sender's
// side while this side stays established. A DREQ of unknown IDs is still
// answered.
func TestDREQWrongQPN(t *testing.T) {
	w := newWire(t)
	cid := w.connect()
	sid := w.serverID()
	dropped := w.server.Counters().Dropped
	var mad [packet.MADSize]byte
	packet.EncodeCM(mad[:], 0x99, &packet.DREQ{LocalCommID: uint32(cid), RemoteCommID: uint32(sid), RemoteQPN: 0x23})
	w.server.Receive(w.now, clientAddr, mad[:])
	_, sent := w.server.Poll()
	require.False(t, sent, "no DREP")
	_, ev := w.server.NextEvent()
	require.False(t, ev)
	require.Equal(t, StateEstablished, w.server.State(sid))
	require.Equal(t, dropped+1, w.server.Counters().Dropped)

	packet.EncodeCM(mad[:], 0x9a, &packet.DREQ{LocalCommID: uint32(cid) + 1, RemoteCommID: uint32(sid), RemoteQPN: 0x22})
	w.server.Receive(w.now, clientAddr, mad[:])
	_, attr, _ := pollMAD(t, w.server, "a DREP for IDs of no connection")
	require.Equal(t, packet.AttrDREP, attr)
	require.Equal(t, StateEstablished, w.server.State(sid))
}

// TestStaleConnection: a REQ or REP from a peer QP that another
// connection already has means the peer lost that connection (it
// restarted without a DREQ): the REQ or REP is rejected with reason
// "stale connection" and the old connection, if established, is
// disconnected (IBA 12.9.8.4; kernel cm_match_req, cm_rep_handler). The
// restarted peer answers the DREQ of a connection it does not know, so the
// old connection ends, and the peer's next attempt connects. The old
// connection used to stay established for ever, its peer long gone.
func TestStaleConnection(t *testing.T) {
	t.Run("REQ: the client restarted", func(t *testing.T) {
		w := newWire(t)
		w.connect()
		old := w.serverID()
		// The client comes back with the same CA GUID and QPN, other IDs;
		// the old agent is gone.
		w.client = NewAgent(Config{CAGUID: 0xC1, TIDHigh: 3, PacketLifeTime: 10, NextCommID: counterFrom(0x500)})
		w.events["client"], w.log = nil, nil
		id := w.connect()
		require.Equal(t, []string{"client REQ", "server REJ", "server DREQ", "client DREP"}, w.log)
		require.Equal(t, []EventKind{EventRejected}, w.kinds("client"))
		require.Equal(t, packet.RejStaleConn, w.events["client"][0].Reason)
		require.Equal(t, StateIdle, w.client.State(id))
		require.Equal(t, []EventKind{EventREQ, EventEstablished, EventDisconnected}, w.kinds("server"))
		require.Equal(t, StateTimeWait, w.server.State(old), "the old connection ended")

		id = w.connect() // the retry
		require.Equal(t, StateEstablished, w.client.State(id))
		require.Equal(t, 2, w.server.Len(), "the new connection and the old one in time-wait")
		w.settle()
		require.Equal(t, 1, w.server.Len())
	})
	t.Run("REP: the server restarted", func(t *testing.T) {
		w := newWire(t)
		old := w.connect()
		// The server comes back with the same CA GUID and QPN, other IDs.
		w.server = NewAgent(Config{CAGUID: 0x5E, TIDHigh: 4, PacketLifeTime: 10, NextCommID: counterFrom(0x2000)})
		require.NoError(t, w.server.Listen(service))
		w.accepted = 0 // its QPs are numbered from the start again
		w.events["client"], w.events["server"], w.log = nil, nil, nil
		req := testREQ()
		req.LocalQPN = 0x12
		id, err := w.client.Connect(w.now, serverAddr, req)
		require.NoError(t, err)
		w.pump()
		require.Equal(t, []string{"client REQ", "server REP", "client REJ", "client DREQ", "server DREP"}, w.log)
		require.Equal(t, []EventKind{EventDisconnected}, w.kinds("client"), "the old connection ended")
		require.Equal(t, old, w.events["client"][0].ID)
		require.Equal(t, StateTimeWait, w.client.State(old))
		require.Equal(t, StateREQSent, w.client.State(id), "the new one waits, its REQ to be retried")
		require.Equal(t, []EventKind{EventREQ, EventRejected}, w.kinds("server"))
		require.Equal(t, packet.RejStaleConn, w.events["server"][1].Reason)

		w.advance(time.Second) // the REQ's retry connects
		require.Equal(t, StateEstablished, w.client.State(id))
	})
}
