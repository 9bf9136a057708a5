package cm

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// lose returns a fate function that loses the listed occurrences ("client
// REQ" 1 = the client's first REQ) and delivers the rest; n 0 loses all.
func lose(rules map[string][]int) func(string, packet.CMAttr, int) fate {
	return func(from string, a packet.CMAttr, n int) fate {
		for _, k := range rules[from+" "+a.String()] {
			if k == 0 || k == n {
				return drop
			}
		}
		return deliver
	}
}

func TestAgentTable(t *testing.T) {
	type states struct{ client, server State }
	for _, tc := range []struct {
		name         string
		fate         func(string, packet.CMAttr, int) fate
		slowServer   bool // the server's consumer answers only after a duplicate REQ
		script       func(w *wire, id ID)
		log          []string
		client       []EventKind
		server       []EventKind
		after        states // after the script, before settling
		clientReason packet.REJReason
	}{
		{
			name:   "handshake",
			log:    []string{"client REQ", "server REP", "client RTU"},
			client: []EventKind{EventREP}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateEstablished, StateEstablished},
		},
		{
			name:   "REQ lost once is resent after the response timeout",
			fate:   lose(map[string][]int{"client REQ": {1}}),
			log:    []string{"client REQ (lost)", "client REQ", "server REP", "client RTU"},
			client: []EventKind{EventREP}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateEstablished, StateEstablished},
		},
		{
			name:   "REQ always lost: four sends, then REJ timeout and EventTimeout",
			fate:   lose(map[string][]int{"client REQ": {0}}),
			log:    []string{"client REQ (lost)", "client REQ (lost)", "client REQ (lost)", "client REQ (lost)", "client REJ"},
			client: []EventKind{EventTimeout}, clientReason: packet.RejTimeout,
			after: states{StateIdle, StateIdle},
		},
		{
			name:   "REP lost: the duplicate REQ brings the REP again",
			fate:   lose(map[string][]int{"server REP": {1}}),
			log:    []string{"client REQ", "server REP (lost)", "client REQ", "server REP", "client RTU"},
			client: []EventKind{EventREP}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateEstablished, StateEstablished},
		},
		{
			name:   "RTU lost: the server resends the REP, the client its RTU",
			fate:   lose(map[string][]int{"client RTU": {1}}),
			log:    []string{"client REQ", "server REP", "client RTU (lost)", "server REP", "client RTU"},
			client: []EventKind{EventREP}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateEstablished, StateEstablished},
		},
		{
			name: "RTU always lost: the server gives up with REJ timeout",
			fate: lose(map[string][]int{"client RTU": {0}}),
			log: []string{"client REQ", "server REP", "client RTU (lost)", "server REP", "client RTU (lost)",
				"server REP", "client RTU (lost)", "server REP", "client RTU (lost)", "server REJ"},
			client: []EventKind{EventREP, EventRejected}, server: []EventKind{EventREQ, EventTimeout},
			after: states{StateTimeWait, StateIdle}, clientReason: packet.RejTimeout,
		},
		{
			name: "slow server consumer: MRA on the duplicate REQ, REP later",
			fate: lose(map[string][]int{}), slowServer: true,
			log:    []string{"client REQ", "client REQ", "server MRA", "server REP", "client RTU"},
			client: []EventKind{EventREP}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateEstablished, StateEstablished},
		},
		{
			name: "client disconnects",
			script: func(w *wire, id ID) {
				require.NoError(w.t, w.client.Disconnect(w.now, id, []byte("bye")))
				w.pump()
			},
			log:    []string{"client REQ", "server REP", "client RTU", "client DREQ", "server DREP"},
			client: []EventKind{EventREP, EventDisconnected}, server: []EventKind{EventREQ, EventEstablished, EventDisconnect},
			after: states{StateTimeWait, StateTimeWait},
		},
		{
			name: "server disconnects, its DREQ lost once and the DREP once",
			fate: lose(map[string][]int{"server DREQ": {1}, "client DREP": {1}}),
			script: func(w *wire, id ID) {
				require.NoError(w.t, w.server.Disconnect(w.now, w.serverID(), nil))
				w.pump()
				w.advance(time.Second) // DREQ resent, DREP lost
				w.advance(time.Second) // DREQ resent, answered in time-wait
			},
			log: []string{"client REQ", "server REP", "client RTU", "server DREQ (lost)", "server DREQ",
				"client DREP (lost)", "server DREQ", "client DREP"},
			client: []EventKind{EventREP, EventDisconnect}, server: []EventKind{EventREQ, EventEstablished, EventDisconnected},
			// The client's time-wait ended as the DREQ came again: it
			// answers the DREQ of a connection it forgot.
			after: states{StateIdle, StateTimeWait},
		},
		{
			name: "DREQ never answered: disconnected by timeout",
			fate: lose(map[string][]int{"client DREQ": {0}}),
			script: func(w *wire, id ID) {
				require.NoError(w.t, w.client.Disconnect(w.now, id, nil))
				w.settle()
			},
			log: []string{"client REQ", "server REP", "client RTU", "client DREQ (lost)", "client DREQ (lost)",
				"client DREQ (lost)", "client DREQ (lost)"},
			client: []EventKind{EventREP, EventDisconnected}, server: []EventKind{EventREQ, EventEstablished},
			after: states{StateIdle, StateEstablished}, clientReason: packet.RejTimeout,
		},
		{
			name: "simultaneous disconnect",
			fate: func(from string, a packet.CMAttr, n int) fate {
				if a == packet.AttrDREQ {
					return late // both DREQs cross on the wire
				}
				return deliver
			},
			script: func(w *wire, id ID) {
				require.NoError(w.t, w.client.Disconnect(w.now, id, nil))
				require.NoError(w.t, w.server.Disconnect(w.now, w.serverID(), nil))
				w.pump()
				w.advance(time.Millisecond)
			},
			log: []string{"client REQ", "server REP", "client RTU", "client DREQ (late)", "server DREQ (late)",
				"client DREP", "server DREP"},
			client: []EventKind{EventREP, EventDisconnected}, server: []EventKind{EventREQ, EventEstablished, EventDisconnected},
			after: states{StateTimeWait, StateTimeWait},
		},
		{
			name: "every MAD duplicated: one set of events",
			fate: func(string, packet.CMAttr, int) fate { return dup },
			script: func(w *wire, id ID) {
				require.NoError(w.t, w.client.Disconnect(w.now, id, nil))
				w.pump()
			},
			// Each side's consumer answers after the repeat came: the
			// repeated REQ gets an MRA, and so does the repeated REP.
			log: []string{"client REQ (twice)", "server MRA (twice)", "server REP (twice)", "client MRA (twice)", "client RTU (twice)",
				"client DREQ (twice)", "server DREP (twice)", "server DREP (twice)"},
			client: []EventKind{EventREP, EventDisconnected}, server: []EventKind{EventREQ, EventEstablished, EventDisconnect},
			after: states{StateTimeWait, StateTimeWait},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			w.fate = tc.fate
			w.autoREQ = !tc.slowServer
			id := w.connect()
			if tc.slowServer {
				w.advance(time.Second) // REQ resent → MRA
				require.Equal(t, StateMRASent, w.server.State(w.serverID()))
				require.Equal(t, StateREQSent, w.client.State(id))
				d, _ := w.client.Deadline()
				require.Equal(t, duration(20)+duration(10), d.Sub(w.now), "the MRA's service timeout")
				require.NoError(t, w.server.Accept(w.now, w.serverID(), testREP()))
				w.pump()
			}
			w.settleHandshake()
			if tc.script != nil {
				tc.script(w, id)
			}
			require.Equal(t, tc.log, w.log)
			require.Equal(t, tc.client, w.kinds("client"), "client events")
			require.Equal(t, tc.server, w.kinds("server"), "server events")
			require.Equal(t, tc.after.client, w.client.State(id), "client state")
			if len(w.events["server"]) > 0 {
				require.Equal(t, tc.after.server, w.server.State(w.serverID()), "server state")
			}
			if tc.clientReason != 0 {
				last := w.events["client"][len(w.events["client"])-1]
				require.Equal(t, tc.clientReason, last.Reason)
			}
			w.settle()
			if tc.after.server != StateEstablished {
				require.Zero(t, w.server.Len(), "time-wait ends")
			}
			if tc.after.client != StateEstablished {
				require.Zero(t, w.client.Len(), "time-wait ends")
			}
		})
	}
}

// settleHandshake runs time until the handshake's timers are done (no DREQ
// is pending at this point).
func (w *wire) settleHandshake() {
	for i := 0; i < 50; i++ {
		busy := false
		for _, a := range []*Agent{w.client, w.server} {
			for _, c := range a.conns {
				if c.state == StateREQSent || c.state == StateREPSent {
					busy = true
				}
			}
		}
		if !busy {
			return
		}
		w.advance(time.Hour)
	}
}

func TestHandshakeFields(t *testing.T) {
	w := newWire(t)
	id := w.connect()
	req := w.events["server"][0].REQ
	require.Equal(t, uint32(id), req.LocalCommID)
	require.Equal(t, uint64(0xC1), req.LocalCAGUID)
	require.Equal(t, uint32(0x11), req.LocalQPN)
	rep := w.events["client"][0].REP
	require.Equal(t, uint32(w.serverID()), rep.LocalCommID)
	require.Equal(t, uint32(id), rep.RemoteCommID)
	require.Equal(t, uint64(0x5E), rep.LocalCAGUID)
	require.Equal(t, uint32(0x22), rep.LocalQPN)
	require.Equal(t, uint32(0x200), rep.StartingPSN)
	require.Equal(t, ID(0x1001), w.serverID())
	require.Equal(t, uint64(1)<<32|0x01000000, w.client.tid(1), "TID: hi_tid, then the comm ID little-endian")
}

func TestClosedPortRejects(t *testing.T) {
	w := newWire(t)
	w.server.Unlisten(service)
	id := w.connect()
	require.Equal(t, []string{"client REQ", "server REJ"}, w.log)
	require.Equal(t, []EventKind{EventRejected}, w.kinds("client"))
	require.Equal(t, packet.RejInvalidServiceID, w.events["client"][0].Reason)
	require.Equal(t, StateIdle, w.client.State(id))
	require.Zero(t, w.client.Len())
	require.Zero(t, w.server.Len())
	require.Equal(t, uint64(1), w.server.Counters().RejectsSent)
}

func TestConsumerRejectCarriesPrivateData(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	w.rejectPD = []byte("go away")
	w.connect()
	require.Equal(t, []string{"client REQ", "server REJ"}, w.log)
	ev := w.events["client"][0]
	require.Equal(t, EventRejected, ev.Kind)
	require.Equal(t, packet.RejConsumerReject, ev.Reason)
	require.Equal(t, []byte("go away"), ev.PrivateData)
	require.Zero(t, w.server.Len())
}

func TestLateMADs(t *testing.T) {
	w := newWire(t)
	id := w.connect()
	sid := w.serverID()
	// Capture a REP and a DREQ to replay after the connection is gone.
	var rep, dreq [packet.MADSize]byte
	c := w.server.conns[sid]
	packet.EncodeCM(rep[:], c.tid, &c.rep)
	require.NoError(t, w.client.Disconnect(w.now, id, nil))
	o, ok := w.client.Poll()
	require.True(t, ok)
	dreq = o.MAD
	w.server.Receive(w.now, clientAddr, dreq[:])
	w.pump()
	// A late duplicate REQ of the connection in time-wait: REJ stale.
	var req [packet.MADSize]byte
	packet.EncodeCM(req[:], w.client.tid(id), &w.server.conns[sid].req)
	w.server.Receive(w.now, clientAddr, req[:])
	_, rej := pollREJ(t, w.server)
	require.Equal(t, packet.RejStaleConn, rej.Reason)
	w.settle()
	require.Zero(t, w.client.Len())
	require.Zero(t, w.server.Len())

	// Once forgotten: a late REP gets REJ "invalid communication ID", a
	// late DREQ still gets its DREP, late RTU and DREP are dropped.
	w.client.Receive(w.now, serverAddr, rep[:])
	_, rej = pollREJ(t, w.client)
	require.Equal(t, packet.RejInvalidCommID, rej.Reason)
	require.Equal(t, uint32(sid), rej.RemoteCommID)
	w.server.Receive(w.now, clientAddr, dreq[:])
	_, attr, msg := pollMAD(t, w.server, "a DREP for the late DREQ")
	require.Equal(t, packet.AttrDREP, attr)
	var drep packet.DREP
	require.NoError(t, drep.Decode(msg))
	require.Equal(t, packet.DREP{LocalCommID: uint32(sid), RemoteCommID: uint32(id)}, drep)
	_, ok = w.server.NextEvent()
	require.False(t, ok)
	require.Zero(t, w.server.Len())
}

func TestCallErrors(t *testing.T) {
	w := newWire(t)
	require.ErrorIs(t, w.server.Listen(service), ErrListening)
	require.ErrorIs(t, w.client.ConfirmREP(99, nil), ErrUnknownID)
	require.ErrorIs(t, w.client.Disconnect(w.now, 99, nil), ErrUnknownID)
	require.ErrorIs(t, w.client.Accept(w.now, 99, testREP()), ErrUnknownID)
	require.ErrorIs(t, w.client.Reject(99, packet.RejConsumerReject, nil), ErrUnknownID)
	require.ErrorIs(t, w.client.Established(99), ErrUnknownID)
	w.autoREP = false
	id := w.connect()
	require.ErrorIs(t, w.client.Disconnect(w.now, id, nil), ErrState)
	require.ErrorIs(t, w.client.Accept(w.now, id, testREP()), ErrState)
	require.NoError(t, w.client.Reject(id, packet.RejConsumerReject, nil))
	w.pump()
	require.Equal(t, []EventKind{EventREQ, EventRejected}, w.kinds("server"))

	small := NewAgent(Config{MaxConns: 1})
	_, err := small.Connect(t0, serverAddr, testREQ())
	require.NoError(t, err)
	_, err = small.Connect(t0, serverAddr, testREQ())
	require.ErrorIs(t, err, ErrTooMany)
}

func TestEstablishedByTraffic(t *testing.T) {
	w := newWire(t)
	w.fate = lose(map[string][]int{"client RTU": {0}})
	w.connect()
	sid := w.serverID()
	require.Equal(t, StateREPSent, w.server.State(sid))
	require.NoError(t, w.server.Established(sid))
	require.Equal(t, StateEstablished, w.server.State(sid))
	_, running := w.server.Deadline()
	require.False(t, running)
	require.ErrorIs(t, w.server.Established(sid), ErrState)
}

func TestAbort(t *testing.T) {
	w := newWire(t)
	w.fate = lose(map[string][]int{"client REQ": {0}})
	id := w.connect()
	require.NoError(t, w.client.Abort(w.now, id))
	require.Zero(t, w.client.Len())
	require.ErrorIs(t, w.client.Abort(w.now, id), ErrUnknownID)
	_, rej := pollREJ(t, w.client)
	require.Equal(t, packet.RejTimeout, rej.Reason)

	w = newWire(t)
	w.autoREP = false
	id = w.connect()
	require.NoError(t, w.client.Abort(w.now, id))
	w.pump()
	require.Equal(t, []EventKind{EventREQ, EventRejected}, w.kinds("server"))
	require.Zero(t, w.server.Len())
}

// TestAbortREPSent: a passive side that gives up waiting for the RTU sends
// the REJ kernel cm_destroy_id sends in REP sent: consumer reject,
// rejecting "other", both comm IDs and no ARI. It ends the client's
// established connection.
func TestAbortREPSent(t *testing.T) {
	w := newWire(t)
	w.fate = lose(map[string][]int{"client RTU": {0}})
	cid := w.connect()
	sid := w.serverID()
	require.Equal(t, StateREPSent, w.server.State(sid))
	require.Equal(t, StateEstablished, w.client.State(cid))
	require.NoError(t, w.server.Abort(w.now, sid))
	require.Zero(t, w.server.Len())
	o, rej := pollREJ(t, w.server)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Equal(t, uint8(packet.MsgOther), rej.MessageRejected)
	require.Equal(t, uint32(sid), rej.LocalCommID)
	require.Equal(t, uint32(cid), rej.RemoteCommID)
	require.Zero(t, rej.RejectedInfoLen, "no ARI: the kernel matches a consumer reject by its IDs")
	w.client.Receive(w.now, serverAddr, o.MAD[:])
	w.pump()
	require.Equal(t, []EventKind{EventREP, EventRejected}, w.kinds("client"))
	require.Equal(t, StateTimeWait, w.client.State(cid))
	require.ErrorIs(t, w.server.Abort(w.now, sid), ErrUnknownID)
	w.settle()
	require.Zero(t, w.client.Len())
}

// TestShutdown: a device going away tells the peer of every connection
// what kernel cm_destroy_id would, and forgets them all.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(w *wire)
		side     string // the side that shuts down
		reason   packet.REJReason
		rejected uint8 // REJ's MessageRejected, if a REJ
		attr     packet.CMAttr
		peer     []EventKind // the peer's events at the end
	}{
		{"REQ sent", func(w *wire) { w.fate = lose(map[string][]int{"client REQ": {0}}) },
			"client", packet.RejTimeout, packet.MsgOther, packet.AttrREJ, nil},
		// The peer holds the REQ (its consumer has not answered): the REJ
		// names no ID of the peer's, which finds the connection by the
		// client's ID and GUID.
		{"REQ sent, held by the peer", func(w *wire) { w.autoREQ = false },
			"client", packet.RejTimeout, packet.MsgOther, packet.AttrREJ, []EventKind{EventREQ, EventRejected}},
		{"REQ received", func(w *wire) { w.autoREQ = false },
			"server", packet.RejConsumerReject, packet.MsgREQ, packet.AttrREJ, []EventKind{EventRejected}},
		{"REP received", func(w *wire) { w.autoREP = false },
			"client", packet.RejConsumerReject, packet.MsgREP, packet.AttrREJ, []EventKind{EventREQ, EventRejected}},
		{"REP sent", func(w *wire) { w.fate = lose(map[string][]int{"client RTU": {0}}) },
			"server", packet.RejConsumerReject, packet.MsgOther, packet.AttrREJ, []EventKind{EventREP, EventRejected}},
		{"established, client", func(*wire) {}, "client", 0, 0, packet.AttrDREQ,
			[]EventKind{EventREQ, EventEstablished, EventDisconnect}},
		{"established, server", func(*wire) {}, "server", 0, 0, packet.AttrDREQ,
			[]EventKind{EventREP, EventDisconnect}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			tc.setup(w)
			w.connect()
			a, peer, peerName := w.client, w.server, "server"
			if tc.side == "server" {
				a, peer, peerName = w.server, w.client, "client"
			}
			require.Equal(t, 1, a.Len())
			a.Shutdown(w.now)
			require.Zero(t, a.Len())
			_, ok := a.NextEvent()
			require.False(t, ok, "no events for forgotten connections")
			_, ok = a.Deadline()
			require.False(t, ok, "no timers after Shutdown")
			o, attr, msg := pollMAD(t, a, "the peer is told")
			require.Equal(t, tc.attr, attr)
			if tc.attr == packet.AttrREJ {
				var rej packet.REJ
				require.NoError(t, rej.Decode(msg))
				require.Equal(t, tc.reason, rej.Reason)
				require.Equal(t, tc.rejected, rej.MessageRejected)
			}
			_, more := a.Poll()
			require.False(t, more, "one message per connection")
			w.fate = nil
			w.transmit(a, o)
			w.pump()
			w.settle()
			require.Equal(t, tc.peer, w.kinds(peerName))
			require.Zero(t, peer.Len(), "the peer forgets the connection too")
		})
	}
}

// TestAbortEstablished: a consumer that gives up an attempt which got
// established just before (the RTU came as its context ended) disconnects
// it: a DREQ ends the peer's side too. Abort used to refuse it (ErrState),
// and rxe's Accept then destroyed the QP of a connection both agents kept
// established for ever.
func TestAbortEstablished(t *testing.T) {
	w := newWire(t)
	cid := w.connect()
	sid := w.serverID()
	require.Equal(t, StateEstablished, w.server.State(sid))
	require.NoError(t, w.server.Abort(w.now, sid))
	w.pump()
	require.Equal(t, []string{"client REQ", "server REP", "client RTU", "server DREQ", "client DREP"}, w.log)
	require.Equal(t, []EventKind{EventREP, EventDisconnect}, w.kinds("client"))
	require.Equal(t, StateTimeWait, w.client.State(cid))
	require.Equal(t, StateTimeWait, w.server.State(sid))
	w.settle()
	require.Zero(t, w.client.Len())
	require.Zero(t, w.server.Len())
}

// TestAbortREPReceived: an active side that gives up after the REP came
// but before it confirmed it (rxe.Dial's context ending with the REP
// event still queued) rejects the REP as kernel cm_destroy_id does in REP
// received: consumer reject, rejecting the REP, both IDs. It used to send
// reason Timeout with no CA GUID in the ARI, which kernel
// cm_acquire_rejected_id looks up by that GUID and so never finds: the
// kernel's passive side kept resending its REP.
func TestAbortREPReceived(t *testing.T) {
	w, cid, sid := repReceived(t)
	require.NoError(t, w.client.Abort(w.now, cid))
	require.Zero(t, w.client.Len())
	o, rej := pollREJ(t, w.client)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Equal(t, uint8(packet.MsgREP), rej.MessageRejected)
	require.Equal(t, uint32(cid), rej.LocalCommID)
	require.Equal(t, uint32(sid), rej.RemoteCommID)
	w.server.Receive(w.now, clientAddr, o.MAD[:])
	w.pump()
	require.Equal(t, []EventKind{EventREQ, EventRejected}, w.kinds("server"))
	require.Zero(t, w.server.Len())
}
