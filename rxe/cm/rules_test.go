package cm

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// cmMAD returns the CM MAD carrying m in transaction tid.
func cmMAD(tid uint64, m packet.CMMessage) []byte {
	var b [packet.MADSize]byte
	packet.EncodeCM(b[:], tid, m)
	return b[:]
}

// drain discards what a has queued to send and to report.
func drain(a *Agent) {
	for _, ok := a.Poll(); ok; _, ok = a.Poll() {
	}
	for _, ok := a.NextEvent(); ok; _, ok = a.NextEvent() {
	}
}

// newServer returns a passive agent listening on service.
func newServer(t *testing.T, cfg Config) *Agent {
	cfg.CAGUID, cfg.TIDHigh, cfg.PacketLifeTime = 0x5E, 2, 10
	s := NewAgent(cfg)
	require.NoError(t, s.Listen(service))
	return s
}

// receiveREQ delivers to s a REQ of the client's (CA GUID 0xC1) with comm
// ID commID from QP qpn, and returns the connection it reported (0: none).
func receiveREQ(t *testing.T, s *Agent, now time.Time, commID, qpn uint32, edit func(*packet.REQ)) ID {
	req := testREQ()
	req.LocalCommID, req.LocalCAGUID, req.LocalQPN = commID, 0xC1, qpn
	if edit != nil {
		edit(req)
	}
	s.Receive(now, clientAddr, cmMAD(0x77, req))
	for e, ok := s.NextEvent(); ok; e, ok = s.NextEvent() {
		if e.Kind == EventREQ {
			return e.ID
		}
	}
	return 0
}

// TestResponseTimeoutPerSide: the active side waits for the REP the
// response timeout its REQ gives the peer (Remote CM Response Timeout),
// the passive side for the RTU the one the REQ gives its sender (Local CM
// Response Timeout), each 4.096 µs · 2^t plus twice the packet life time
// (IBA 12.6.5; kernel cm_send_req_locked, cm_format_rep's timeout_ms).
func TestResponseTimeoutPerSide(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	req := testREQ()
	req.RemoteCMResponseTimeout, req.LocalCMResponseTimeout = 12, 16
	_, err := w.client.Connect(w.now, serverAddr, req)
	require.NoError(t, err)
	d, ok := w.client.Deadline()
	require.True(t, ok)
	require.Equal(t, duration(12)+2*duration(10), d.Sub(w.now), "REP wait: remote response timeout")
	w.pump()
	require.NoError(t, w.server.Accept(w.now, w.serverID(), testREP()))
	d, ok = w.server.Deadline()
	require.True(t, ok)
	require.Equal(t, duration(16)+2*duration(10), d.Sub(w.now), "RTU wait: local response timeout")
}

// TestDeadlineIsEarliest: Deadline reports the earliest timer of all
// connections, so the owner's timer fires for the first one due.
func TestDeadlineIsEarliest(t *testing.T) {
	a := NewAgent(Config{CAGUID: 0xC1, PacketLifeTime: 10})
	for _, to := range []uint8{18, 12, 16} {
		req := testREQ()
		req.RemoteCMResponseTimeout = to
		_, err := a.Connect(t0, serverAddr, req)
		require.NoError(t, err)
	}
	d, ok := a.Deadline()
	require.True(t, ok)
	require.Equal(t, t0.Add(duration(12)+2*duration(10)), d)
}

// TestDREQRetry: a DREQ the peer does not answer is resent in its own
// transaction (the sender's transaction ID, not the REQ's, on the passive
// side too: kernel cm_form_tid), and when the retries run out the side
// enters time-wait (kernel cm_process_send_error in DREQ sent), where a
// late DREQ of the peer is still answered with a DREP.
func TestDREQRetry(t *testing.T) {
	w := newWire(t)
	cid := w.connect()
	w.settle()
	sid := w.serverID()
	require.Equal(t, StateEstablished, w.server.State(sid))
	require.NoError(t, w.server.Disconnect(w.now, sid, nil))
	for i := 0; i < 4; i++ { // the DREQ and its 3 retries, all lost
		o, attr, _ := pollMAD(t, w.server, "a DREQ")
		require.Equal(t, packet.AttrDREQ, attr)
		h, _, err := packet.DecodeCMHeader(o.MAD[:])
		require.NoError(t, err)
		require.Equal(t, w.server.tid(sid), h.TID, "DREQ %d in the server's own transaction", i)
		d, ok := w.server.Deadline()
		require.True(t, ok)
		w.now = d
		w.server.Tick(w.now)
	}
	e, ok := w.server.NextEvent()
	require.True(t, ok)
	require.Equal(t, EventDisconnected, e.Kind)
	require.Equal(t, packet.RejTimeout, e.Reason)
	require.Equal(t, StateTimeWait, w.server.State(sid))
	w.server.Receive(w.now, clientAddr, cmMAD(0x99, &packet.DREQ{LocalCommID: uint32(cid), RemoteCommID: uint32(sid), RemoteQPN: 0x22}))
	_, attr, _ := pollMAD(t, w.server, "the DREP of the late DREQ")
	require.Equal(t, packet.AttrDREP, attr)
}

// TestREQTimeoutREJ: an active side whose REQ retries run out rejects with
// reason Timeout, its CA GUID in an 8-byte ARI (IBA 12.9.5.1), by which a
// passive side still deciding finds the connection and ends it (kernel
// cm_acquire_rejected_id).
func TestREQTimeoutREJ(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	w.fate = func(from string, attr packet.CMAttr, n int) fate {
		if from == "server" || n > 1 {
			return drop // the server's MRAs and the REQ's retries are lost
		}
		return deliver
	}
	cid := w.connect()
	sid := w.serverID()
	require.Equal(t, StateREQRcvd, w.server.State(sid))
	for w.client.State(cid) != StateIdle {
		d, ok := w.client.Deadline()
		require.True(t, ok)
		w.now = d
		w.client.Tick(w.now)
		o, ok := w.client.Poll()
		require.True(t, ok)
		h, msg, err := packet.DecodeCMHeader(o.MAD[:])
		require.NoError(t, err)
		if packet.CMAttr(h.AttrID) == packet.AttrREJ {
			var rej packet.REJ
			require.NoError(t, rej.Decode(msg))
			require.Equal(t, packet.RejTimeout, rej.Reason)
			require.Equal(t, uint8(8), rej.RejectedInfoLen)
			require.Equal(t, uint64(0xC1), binary.BigEndian.Uint64(rej.ARI[:]))
			w.server.Receive(w.now, clientAddr, o.MAD[:])
		}
	}
	e, ok := w.server.NextEvent()
	require.True(t, ok)
	require.Equal(t, EventRejected, e.Kind)
	require.Equal(t, StateIdle, w.server.State(sid))
}

// TestOnlyTimeoutREJUsesARI: the ARI names the sender's CA GUID only in a
// REJ with reason Timeout (kernel cm_acquire_rejected_id); a REJ with
// another reason that names none of our IDs ends nothing, whatever its
// ARI holds.
func TestOnlyTimeoutREJUsesARI(t *testing.T) {
	s := newServer(t, Config{})
	sid := receiveREQ(t, s, t0, 0x31, 0x11, nil)
	require.NotZero(t, sid)
	rej := packet.REJ{LocalCommID: 0x31, MessageRejected: packet.MsgOther, RejectedInfoLen: 8, Reason: packet.RejConsumerReject}
	binary.BigEndian.PutUint64(rej.ARI[:], 0xC1)
	s.Receive(t0, clientAddr, cmMAD(0x77, &rej))
	_, ok := s.NextEvent()
	require.False(t, ok)
	require.Equal(t, StateREQRcvd, s.State(sid))
}

// TestAllocIDSkipsZeroAndInUse: local communication IDs come from
// Config.NextCommID, skipping 0 (which stands for "no ID" in a REJ of a
// REQ) and IDs in use.
func TestAllocIDSkipsZeroAndInUse(t *testing.T) {
	a := NewAgent(Config{CAGUID: 0xC1, NextCommID: ids(0, 5, 5, 0, 6)})
	var got []ID
	for i := 0; i < 2; i++ {
		id, err := a.Connect(t0, serverAddr, testREQ())
		require.NoError(t, err)
		got = append(got, id)
	}
	require.Equal(t, []ID{5, 6}, got)
}

// TestOnlySendMethodTaken: the CM takes MADs of method Send only (kernel
// ib_cm registers its agent for IB_MGMT_METHOD_SEND); a REQ with another
// method is dropped.
func TestOnlySendMethodTaken(t *testing.T) {
	s := newServer(t, Config{})
	req := testREQ()
	req.LocalCommID, req.LocalCAGUID = 0x31, 0xC1
	mad := cmMAD(0x77, req)
	mad[3] = 0x81 // GetResp
	s.Receive(t0, clientAddr, mad)
	_, ok := s.NextEvent()
	require.False(t, ok)
	_, ok = s.Poll()
	require.False(t, ok)
	require.Equal(t, uint64(1), s.Counters().Dropped)
}

// TestTimeWaitExitKeepsNewerQP: when a connection leaves time-wait it
// forgets the peer's QP only if that QP still names it: a newer connection
// from the same QP keeps it, so a REQ from that QP while the newer one
// lives is still rejected as stale (IBA 12.9.8.4; kernel
// cm_cleanup_timewait removes only its own remote QPN entry).
func TestTimeWaitExitKeepsNewerQP(t *testing.T) {
	s := newServer(t, Config{})
	now := t0
	old := receiveREQ(t, s, now, 0x31, 0x11, nil)
	require.NoError(t, s.Accept(now, old, testREP()))
	s.Receive(now, clientAddr, cmMAD(0x77, &packet.RTU{LocalCommID: 0x31, RemoteCommID: uint32(old)}))
	require.Equal(t, StateEstablished, s.State(old))
	s.Receive(now, clientAddr, cmMAD(0x78, &packet.DREQ{LocalCommID: 0x31, RemoteCommID: uint32(old), RemoteQPN: 0x22}))
	require.Equal(t, StateTimeWait, s.State(old))
	drain(s)
	// The client's QP connects again while the old connection waits.
	newer := receiveREQ(t, s, now, 0x32, 0x11, nil)
	require.NotZero(t, newer)
	rep := testREP()
	rep.LocalQPN = 0x23
	require.NoError(t, s.Accept(now, newer, rep))
	drain(s)
	now = now.Add(s.timeWait(s.conns[old]))
	s.Tick(now)
	require.Equal(t, StateIdle, s.State(old), "time-wait over")
	require.Equal(t, StateREPSent, s.State(newer))
	drain(s)
	require.Zero(t, receiveREQ(t, s, now, 0x33, 0x11, nil), "a third REQ from the QP is not a new connection")
	_, rej := pollREJ(t, s)
	require.Equal(t, packet.RejStaleConn, rej.Reason)
}

// TestDuplicateREPMatchesPeerID: an established active side answers a
// repeated REP with its RTU only if the REP comes from the connection's
// peer (its Local Comm ID is the peer's), as kernel cm_dup_rep_handler
// looks the connection up by both IDs; another is dropped.
func TestDuplicateREPMatchesPeerID(t *testing.T) {
	w := newWire(t)
	cid := w.connect()
	w.settle()
	require.Equal(t, StateEstablished, w.client.State(cid))
	rep := testREP()
	rep.LocalCommID, rep.RemoteCommID, rep.LocalCAGUID = uint32(w.serverID())+7, uint32(cid), 0x5E
	w.client.Receive(w.now, serverAddr, cmMAD(0x88, rep))
	_, ok := w.client.Poll()
	require.False(t, ok, "no RTU")
	rep.LocalCommID = uint32(w.serverID())
	w.client.Receive(w.now, serverAddr, cmMAD(0x88, rep))
	_, attr, _ := pollMAD(t, w.client, "the RTU again")
	require.Equal(t, packet.AttrRTU, attr)
}

// TestMRAMatchesMessageAndIDs: an MRA stretches the response timer only
// if it acknowledges the message this side waits on (MRA of a REQ in REQ
// sent, of a REP in REP sent) and, for a REP, comes from the peer (both
// IDs match), as kernel cm_mra_handler and cm_acquire_mraed_id check.
func TestMRAMatchesMessageAndIDs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		passive bool
		msg     uint8
		badID   bool
	}{
		{"REQ sent, MRA of a REP", false, packet.MsgREP, false},
		{"REQ sent, MRA of other", false, packet.MsgOther, false},
		{"REP sent, MRA of a REQ", true, packet.MsgREQ, false},
		{"REP sent, MRA from another peer ID", true, packet.MsgREP, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			a, peer := w.client, serverAddr
			var id ID
			mra := packet.MRA{MessageMRAed: tc.msg, ServiceTimeout: 20}
			if tc.passive {
				w.fate = lose(map[string][]int{"client RTU": {0}})
				cid := w.connect()
				a, peer, id = w.server, clientAddr, w.serverID()
				require.Equal(t, StateREPSent, a.State(id))
				mra.LocalCommID = uint32(cid)
				if tc.badID {
					mra.LocalCommID++
				}
			} else {
				var err error
				id, err = a.Connect(w.now, serverAddr, testREQ())
				require.NoError(t, err)
			}
			drain(a)
			before, ok := a.Deadline()
			require.True(t, ok)
			mra.RemoteCommID = uint32(id)
			a.Receive(w.now, peer, cmMAD(0x55, &mra))
			after, ok := a.Deadline()
			require.True(t, ok)
			require.Equal(t, before, after, "the timer is unchanged")
		})
	}
}

// TestREQTransportTypes: a REQ for an RC or a UC connection is reported to
// the consumer (IBA 12.6.5 Transport Service Type; kernel ib_cm connects
// both); any other type is rejected with "invalid transport type".
func TestREQTransportTypes(t *testing.T) {
	for _, tc := range []struct {
		typ      uint8
		reported bool
	}{{packet.CMTransportRC, true}, {packet.CMTransportUC, true}, {3, false}} {
		s := newServer(t, Config{})
		id := receiveREQ(t, s, t0, 0x31, 0x11, func(r *packet.REQ) { r.TransportServiceType = tc.typ })
		require.Equal(t, tc.reported, id != 0, "transport type %d", tc.typ)
		if !tc.reported {
			_, rej := pollREJ(t, s)
			require.Equal(t, packet.RejInvalidTransportType, rej.Reason)
		}
	}
}

// TestREQBeyondMaxConns: a REQ that comes while the server's agent tracks
// Config.MaxConns connections is dropped without a REJ, as kernel
// cm_req_handler sends nothing when it cannot allocate the REQ's cm_id
// (cm_alloc_id_priv fails); the client resends it on its response timeout,
// and the resent one is reported once the table has room (a REJ "no
// resources" would end the client's attempt for good).
func TestREQBeyondMaxConns(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	w.server.cfg.MaxConns = 1
	first := w.connect()
	req := testREQ()
	req.LocalQPN = 0x12
	second, err := w.client.Connect(w.now, serverAddr, req)
	require.NoError(t, err)
	w.pump()
	require.Equal(t, []string{"client REQ", "client REQ"}, w.log, "no REJ for the second")
	require.Equal(t, []EventKind{EventREQ}, w.kinds("server"))
	require.Empty(t, w.events["client"])
	require.Equal(t, uint64(1), w.server.Counters().Dropped)
	require.Zero(t, w.server.Counters().RejectsSent)
	require.Equal(t, 1, w.server.Len())
	require.Equal(t, StateREQSent, w.client.State(second))

	// The server's consumer refuses the first; the second's next try finds
	// room and connects.
	require.NoError(t, w.server.Reject(w.serverID(), packet.RejConsumerReject, nil))
	w.autoREQ = true
	w.pump()
	require.Equal(t, StateIdle, w.client.State(first))
	w.advance(time.Second)
	require.Equal(t, []EventKind{EventREQ, EventREQ, EventEstablished}, w.kinds("server"))
	require.Equal(t, uint32(0x12), w.events["server"][1].REQ.LocalQPN)
	require.Equal(t, []EventKind{EventRejected, EventREP}, w.kinds("client"))
	require.Equal(t, second, w.events["client"][1].ID)
	require.Equal(t, StateEstablished, w.client.State(second))
	require.Equal(t, uint64(1), w.client.Counters().Retransmits)
	require.Equal(t, uint64(1), w.server.Counters().Dropped)
}

// TestDuplicateREQInMRASent: every duplicate REQ while the consumer
// decides is answered with the MRA, not only the first (kernel
// cm_dup_req_handler resends the MRA in MRA REQ sent); then the consumer
// may still reject the REQ (kernel ib_send_cm_rej in MRA REQ sent).
func TestDuplicateREQInMRASent(t *testing.T) {
	s := newServer(t, Config{})
	id := receiveREQ(t, s, t0, 0x31, 0x11, nil)
	for i := 0; i < 2; i++ {
		require.Zero(t, receiveREQ(t, s, t0, 0x31, 0x11, nil))
		_, attr, _ := pollMAD(t, s, "an MRA")
		require.Equal(t, packet.AttrMRA, attr, "duplicate %d", i+1)
		require.Equal(t, StateMRASent, s.State(id))
	}
	require.NoError(t, s.Reject(id, packet.RejConsumerReject, nil))
	_, rej := pollREJ(t, s)
	require.Equal(t, uint8(packet.MsgREQ), rej.MessageRejected)
	require.Equal(t, StateIdle, s.State(id))
}

// TestRTUMatchesBothIDs: an RTU establishes the passive side only if both
// its IDs name the connection (kernel cm_rtu_handler, cm_acquire_id); one
// from another peer ID is dropped.
func TestRTUMatchesBothIDs(t *testing.T) {
	s := newServer(t, Config{})
	id := receiveREQ(t, s, t0, 0x31, 0x11, nil)
	require.NoError(t, s.Accept(t0, id, testREP()))
	s.Receive(t0, clientAddr, cmMAD(0x77, &packet.RTU{LocalCommID: 0x32, RemoteCommID: uint32(id)}))
	require.Equal(t, StateREPSent, s.State(id))
	s.Receive(t0, clientAddr, cmMAD(0x77, &packet.RTU{LocalCommID: 0x31, RemoteCommID: uint32(id)}))
	require.Equal(t, StateEstablished, s.State(id))
}

// TestDREQInREPSent: a DREQ that reaches a passive side still waiting for
// the RTU (the RTU was lost, the active side then disconnected) ends the
// connection like an established one: DREP, time-wait, EventDisconnect
// (IBA 12.9.5.2; kernel cm_dreq_handler in REP sent).
func TestDREQInREPSent(t *testing.T) {
	w := newWire(t)
	w.fate = lose(map[string][]int{"client RTU": {0}})
	cid := w.connect()
	sid := w.serverID()
	require.Equal(t, StateREPSent, w.server.State(sid))
	require.NoError(t, w.client.Disconnect(w.now, cid, nil))
	w.pump()
	require.Equal(t, StateTimeWait, w.server.State(sid))
	require.Equal(t, []EventKind{EventREQ, EventDisconnect}, w.kinds("server"))
	require.Equal(t, StateTimeWait, w.client.State(cid), "the DREP came")
}

// TestDREPMatchesBothIDs: a DREP ends the wait of a DREQ only if both its
// IDs name the connection (kernel cm_drep_handler, cm_acquire_id).
func TestDREPMatchesBothIDs(t *testing.T) {
	w := newWire(t)
	cid := w.connect()
	w.settle()
	sid := w.serverID()
	require.NoError(t, w.client.Disconnect(w.now, cid, nil))
	drain(w.client)
	w.client.Receive(w.now, serverAddr, cmMAD(0x66, &packet.DREP{LocalCommID: uint32(sid) + 1, RemoteCommID: uint32(cid)}))
	require.Equal(t, StateDREQSent, w.client.State(cid))
	w.client.Receive(w.now, serverAddr, cmMAD(0x66, &packet.DREP{LocalCommID: uint32(sid), RemoteCommID: uint32(cid)}))
	require.Equal(t, StateTimeWait, w.client.State(cid))
}

// TestREJInDREQSent: a REJ of a connection whose DREQ is out ends it at
// once, as kernel cm_rej_handler does in DREQ sent (cancel the DREQ, enter
// time-wait, report the REJ, which rdma_cm passes on as
// RDMA_CM_EVENT_REJECTED): the peer never got our RTU and gave up its REP,
// its retries run out (reason timeout) or its consumer aborting
// (consumer reject). The DREQ is not resent after it, and no
// EventDisconnected follows.
func TestREJInDREQSent(t *testing.T) {
	cases := []struct {
		name   string
		reject func(w *wire) // makes the server send its REJ
		reason packet.REJReason
		dreqs  int // DREQs the client sends in all
	}{
		{"the peer's REP retries run out", func(w *wire) {
			for w.server.State(w.serverID()) == StateREPSent {
				w.advance(time.Hour)
			}
		}, packet.RejTimeout, 4},
		{"the peer aborts in REP sent", func(w *wire) {
			require.NoError(w.t, w.server.Abort(w.now, w.serverID()))
			w.pump()
		}, packet.RejConsumerReject, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWire(t)
			w.fate = func(from string, attr packet.CMAttr, n int) fate {
				if attr == packet.AttrRTU || attr == packet.AttrDREQ {
					return drop // the server stays in REP sent
				}
				return deliver
			}
			cid := w.connect()
			require.Equal(t, StateEstablished, w.client.State(cid))
			w.now = w.now.Add(time.Millisecond) // the DREQ's timer runs behind the REP's
			require.NoError(t, w.client.Disconnect(w.now, cid, nil))
			w.pump()
			c.reject(w)
			require.Equal(t, StateTimeWait, w.client.State(cid), "the REJ ends the connection")
			require.Equal(t, []EventKind{EventREP, EventRejected}, w.kinds("client"))
			require.Equal(t, c.reason, w.events["client"][1].Reason)
			w.settle()
			require.Equal(t, c.dreqs, w.seen["client DREQ"], "no DREQ after the REJ")
			require.Equal(t, []EventKind{EventREP, EventRejected}, w.kinds("client"), "no EventDisconnected")
			checkInvariants(t, w.client)
		})
	}
}

// TestDropREQ: a REQ its consumer drops (Drop: rxe's listener backlog is
// full) is forgotten without an answer, as kernel cm_destroy_id forgets a
// REQ received on -ENOMEM (cm_reset_to_idle); the client's retransmission
// of it is then a new request, reported again under a new ID, not a
// duplicate answered with an MRA. Drop takes only a REQ in REQ received.
func TestDropREQ(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	id := w.connect()
	dropped := w.serverID()
	require.NoError(t, w.server.Drop(dropped))
	w.pump()
	require.Equal(t, []string{"client REQ"}, w.log, "no answer")
	require.Zero(t, w.server.Len())
	require.Equal(t, StateIdle, w.server.State(dropped))
	require.ErrorIs(t, w.server.Drop(dropped), ErrUnknownID)

	w.advance(time.Second) // the client's response timeout
	require.Equal(t, []string{"client REQ", "client REQ"}, w.log, "no MRA for the retransmission")
	require.Equal(t, []EventKind{EventREQ, EventREQ}, w.kinds("server"))
	again := w.events["server"][1].ID
	require.NotEqual(t, dropped, again)
	require.Equal(t, StateREQRcvd, w.server.State(again))
	require.Zero(t, w.server.Counters().Duplicates)

	require.NoError(t, w.server.Accept(w.now, again, testREP()))
	w.autoREP = true
	w.pump()
	require.Equal(t, StateEstablished, w.client.State(id))
	require.Equal(t, StateEstablished, w.server.State(again))

	// A REQ whose peer was told to wait (MRA sent) is not dropped, and an
	// active connection never.
	s := newServer(t, Config{})
	waiting := receiveREQ(t, s, t0, 0x31, 0x11, nil)
	require.Zero(t, receiveREQ(t, s, t0, 0x31, 0x11, nil), "a duplicate: MRA")
	require.Equal(t, StateMRASent, s.State(waiting))
	require.ErrorIs(t, s.Drop(waiting), ErrState)
	require.ErrorIs(t, w.client.Drop(id), ErrState)
}
