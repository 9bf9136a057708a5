package cm

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// recvREQ handles a REQ (IBA 12.9.5.2, passive side): a new request for a
// listened service becomes EventREQ; a duplicate is answered by the state
// its connection is in. One beyond Config.MaxConns is dropped.
func (a *Agent) recvREQ(now time.Time, from netip.Addr, tid uint64, msg []byte) {
	var req packet.REQ
	_ = req.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	if id, ok := a.byRemote[remoteKey{req.LocalCommID, req.LocalCAGUID}]; ok {
		a.dupREQ(a.conns[id], from, tid)
		return
	}
	reject := func(r packet.REJReason) {
		a.send(from, tid, &packet.REJ{RemoteCommID: req.LocalCommID, MessageRejected: packet.MsgREQ, Reason: r})
		a.ctr.RejectsSent++
	}
	if old, ok := a.byQP[qpKey{req.LocalCAGUID, req.LocalQPN}]; ok {
		reject(packet.RejStaleConn)
		a.staleQP(now, old)
		return
	}
	if _, ok := a.listeners[req.ServiceID]; !ok {
		reject(packet.RejInvalidServiceID)
		return
	}
	if req.TransportServiceType != packet.CMTransportRC && req.TransportServiceType != packet.CMTransportUC {
		reject(packet.RejInvalidTransportType)
		return
	}
	if len(a.conns) >= a.cfg.MaxConns {
		// No REJ: kernel cm_req_handler sends nothing when it cannot
		// allocate the REQ's cm_id (cm_alloc_id_priv fails), and "no
		// resources" would end the peer's attempt for good; the peer
		// resends the REQ on its response timeout and is served once
		// there is room.
		a.ctr.Dropped++
		return
	}
	id := a.allocID()
	c := &conn{id: id, state: StateREQRcvd, passive: true, peer: from, tid: tid, req: req}
	a.conns[id] = c
	a.byRemote[c.remoteKey()] = id
	a.indexQP(c)
	r := req
	a.emit(Event{Kind: EventREQ, ID: id, Peer: from, REQ: &r})
}

// dupREQ answers a REQ that repeats one already received: the active side
// did not hear our answer in time (IBA 12.9.5.2; kernel cm_dup_req_handler).
// In REP sent the REP's own timer resends it, so the duplicate is dropped.
// The MRA while the consumer decides is sent on the first duplicate (kernel
// ib_cm sends one only when its consumer asks for it).
func (a *Agent) dupREQ(c *conn, from netip.Addr, tid uint64) {
	a.ctr.Duplicates++
	switch c.state {
	case StateREQRcvd, StateMRASent:
		// The consumer has not decided yet: ask for patience.
		c.mra = packet.MRA{LocalCommID: uint32(c.id), RemoteCommID: c.req.LocalCommID,
			MessageMRAed: packet.MsgREQ, ServiceTimeout: a.cfg.ServiceTimeout}
		c.state = StateMRASent
		a.send(c.peer, c.tid, &c.mra)
	case StateTimeWait:
		a.send(from, tid, &packet.REJ{LocalCommID: uint32(c.id), RemoteCommID: c.req.LocalCommID,
			MessageRejected: packet.MsgREQ, Reason: packet.RejStaleConn})
		a.ctr.RejectsSent++
	}
}

// Accept answers the REQ of connection id with rep (IBA 12.9.5.2): the
// agent fills LocalCommID, RemoteCommID and LocalCAGUID; the caller fills
// its QPN, starting PSN, resources, RNR retry count, target ACK delay and
// private data, having moved its QP to RTR with the REQ's values. The REP is
// resent until the RTU arrives or the REQ's MaxCMRetries run out.
func (a *Agent) Accept(now time.Time, id ID, rep *packet.REP) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.state != StateREQRcvd && c.state != StateMRASent {
		return ErrState
	}
	c.rep = *rep
	c.rep.LocalCommID = uint32(id)
	c.rep.RemoteCommID = c.req.LocalCommID
	c.rep.LocalCAGUID = a.cfg.CAGUID
	c.state = StateREPSent
	a.send(c.peer, c.tid, &c.rep)
	a.arm(now, c)
	return nil
}

// Reject refuses connection id with reason and privateData (at most 148
// bytes; more is ErrInvalid): the REQ on the passive side (before Accept),
// the REP on the active side (before ConfirmREP). The connection is
// forgotten.
func (a *Agent) Reject(id ID, reason packet.REJReason, privateData []byte) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if err := checkPD("REJ", privateData, packet.REJPrivateDataSize); err != nil {
		return err
	}
	rej := packet.REJ{LocalCommID: uint32(id), RemoteCommID: c.remoteCommID(), Reason: reason}
	switch {
	case c.passive && (c.state == StateREQRcvd || c.state == StateMRASent):
		rej.MessageRejected = packet.MsgREQ
	case !c.passive && c.state == StateREPRcvd:
		rej.MessageRejected = packet.MsgREP
	default:
		return ErrState
	}
	copy(rej.PrivateData[:], privateData)
	a.send(c.peer, c.tid, &rej)
	a.free(id)
	return nil
}

// Drop forgets the REQ of connection id, reported and not yet answered,
// without answering it, as kernel cm_destroy_id forgets a REQ received
// when its consumer failed for want of memory (-ENOMEM: cm_reset_to_idle,
// "allow future retries"): no REJ, no MRA. The peer resends the REQ on its
// CM response timeout, and the agent, which keeps nothing of it, reports
// the resent one as a new request. Only a REQ still in REQ received can be
// dropped: once an MRA has told the peer to wait, ErrState.
func (a *Agent) Drop(id ID) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if !c.passive || c.state != StateREQRcvd {
		return ErrState
	}
	a.free(id)
	return nil
}

// recvRTU handles an RTU (IBA 12.9.5.2): the passive side is established.
func (a *Agent) recvRTU(msg []byte) {
	var rtu packet.RTU
	_ = rtu.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(rtu.RemoteCommID)]
	if c == nil || !c.passive || rtu.LocalCommID != c.req.LocalCommID {
		a.ctr.Dropped++
		return
	}
	switch c.state {
	case StateREPSent:
		c.state = StateEstablished
		c.deadline = time.Time{}
		a.emit(Event{Kind: EventEstablished, ID: c.id, Peer: c.peer, PrivateData: clonePD(rtu.PrivateData[:])})
	case StateEstablished, StateDREQSent, StateTimeWait:
		a.ctr.Duplicates++
	default:
		a.ctr.Dropped++
	}
}

// Established moves a passive connection whose RTU is late to established,
// because its QP has already received a packet from the peer (the
// communication-established event, IBA 11.6.3.1, 12.9.5.2).
func (a *Agent) Established(id ID) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if !c.passive || c.state != StateREPSent {
		return ErrState
	}
	c.state = StateEstablished
	c.deadline = time.Time{}
	a.emit(Event{Kind: EventEstablished, ID: id, Peer: c.peer})
	return nil
}

// recvREJ handles a REJ (IBA 12.6.7): the peer refused, or gave up.
func (a *Agent) recvREJ(now time.Time, msg []byte) {
	var rej packet.REJ
	_ = rej.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.rejected(&rej)
	if c == nil {
		a.ctr.Dropped++
		return
	}
	ev := Event{Kind: EventRejected, ID: c.id, Peer: c.peer, Reason: rej.Reason, PrivateData: clonePD(rej.PrivateData[:])}
	switch c.state {
	case StateREQSent, StateREPRcvd, StateREQRcvd, StateMRASent, StateREPSent:
		a.emit(ev)
		a.free(c.id)
	case StateEstablished, StateDREQSent:
		// The peer timed out waiting for our RTU, or aborted, and gave
		// up: the connection is gone, and a DREQ of ours is not resent
		// (kernel cm_rej_handler enters time-wait in both states and
		// reports the REJ; rdma_cm passes it on as
		// RDMA_CM_EVENT_REJECTED even after rdma_disconnect).
		a.emit(ev)
		a.enterTimeWait(now, c)
	default:
		a.ctr.Dropped++
	}
}

// rejected returns the connection a REJ ends, or nil, matching the REJ's
// IDs as kernel ib_cm does (cm_acquire_rejected_id, cm_acquire_id):
//   - a REJ of a REQ (message rejected: REQ) names our ID only: it answers
//     a REQ whose sender knows no ID of the peer's yet, so it ends only a
//     connection that has no remote ID (the active side before the REP).
//     A late or duplicated one, whose REQ a retry has meanwhile got
//     through, must not end the connection that retry made;
//   - any other REJ names both IDs, and both must match the connection's;
//   - a REJ with reason Timeout from an active side that gave up its REQ
//     knows no ID of ours: it names itself by its communication ID and, in
//     the ARI, its CA GUID, the key of the REQ it sent (IBA 12.9.5.1).
func (a *Agent) rejected(rej *packet.REJ) *conn {
	if c := a.conns[ID(rej.RemoteCommID)]; c != nil {
		if rej.MessageRejected == packet.MsgREQ {
			if c.remoteCommID() == 0 {
				return c
			}
		} else if rej.LocalCommID == c.remoteCommID() {
			return c
		}
	}
	if rej.Reason == packet.RejTimeout && rej.RejectedInfoLen >= 8 {
		if id, ok := a.byRemote[remoteKey{rej.LocalCommID, binary.BigEndian.Uint64(rej.ARI[:])}]; ok {
			return a.conns[id]
		}
	}
	return nil
}

// clonePD returns a copy of private data without its trailing zeros (the
// wire carries no length), or nil if it is all zero.
func clonePD(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	if n == 0 {
		return nil
	}
	return append([]byte(nil), b[:n]...)
}
