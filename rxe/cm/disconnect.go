package cm

import (
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Disconnect starts tearing down an established connection (IBA 12.9.6):
// it sends a DREQ with privateData (at most 220 bytes; more is ErrInvalid)
// and waits for the DREP, resending the DREQ up to the REQ's MaxCMRetries
// times. EventDisconnected reports the end.
func (a *Agent) Disconnect(now time.Time, id ID, privateData []byte) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.state != StateEstablished {
		return ErrState
	}
	if err := checkPD("DREQ", privateData, packet.DREQPrivateDataSize); err != nil {
		return err
	}
	c.dreq = packet.DREQ{LocalCommID: uint32(id), RemoteCommID: c.remoteCommID(), RemoteQPN: c.remoteQPN()}
	copy(c.dreq.PrivateData[:], privateData)
	c.state = StateDREQSent
	a.send(c.peer, a.tid(id), &c.dreq)
	a.arm(now, c)
	return nil
}

// recvDREQ handles a DREQ (IBA 12.9.6). One whose IDs name no connection
// of this agent is answered with a DREP all the same (kernel
// cm_dreq_handler, cm_issue_drep), so that the peer's retries end. One
// that names a connection but not its QP (Remote QPN) is dropped, as the
// kernel drops it: a DREP would end the sender's side of a connection this
// side keeps.
func (a *Agent) recvDREQ(now time.Time, from netip.Addr, tid uint64, msg []byte) {
	var dreq packet.DREQ
	_ = dreq.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(dreq.RemoteCommID)]
	if c == nil || c.remoteCommID() != dreq.LocalCommID {
		a.send(from, tid, &packet.DREP{LocalCommID: dreq.RemoteCommID, RemoteCommID: dreq.LocalCommID})
		a.ctr.Dropped++
		return
	}
	if c.localQPN() != dreq.RemoteQPN {
		a.ctr.Dropped++
		return
	}
	drep := packet.DREP{LocalCommID: uint32(c.id), RemoteCommID: dreq.LocalCommID}
	pd := clonePD(dreq.PrivateData[:])
	switch c.state {
	case StateEstablished, StateREPSent:
		// A DREQ in REP sent means the RTU was lost on its way (IBA
		// 12.9.5.2): the connection was established and now ends.
		a.send(c.peer, tid, &drep)
		a.enterTimeWait(now, c)
		a.emit(Event{Kind: EventDisconnect, ID: c.id, Peer: c.peer, PrivateData: pd})
	case StateDREQSent:
		// Simultaneous disconnect: both sides sent a DREQ. Answer the
		// peer's; ours is answered too, or times out harmlessly.
		a.send(c.peer, tid, &drep)
		a.enterTimeWait(now, c)
		a.emit(Event{Kind: EventDisconnected, ID: c.id, Peer: c.peer, PrivateData: pd})
	case StateTimeWait:
		a.send(c.peer, tid, &drep) // our DREP was lost
		a.ctr.Duplicates++
	default:
		a.ctr.Dropped++
	}
}

// recvDREP handles a DREP: the answer to our DREQ.
func (a *Agent) recvDREP(now time.Time, msg []byte) {
	var drep packet.DREP
	_ = drep.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(drep.RemoteCommID)]
	if c == nil || drep.LocalCommID != c.remoteCommID() {
		a.ctr.Dropped++
		return
	}
	switch c.state {
	case StateDREQSent:
		a.enterTimeWait(now, c)
		a.emit(Event{Kind: EventDisconnected, ID: c.id, Peer: c.peer, PrivateData: clonePD(drep.PrivateData[:])})
	case StateTimeWait:
		a.ctr.Duplicates++
	default:
		a.ctr.Dropped++
	}
}

// Shutdown ends every connection of the agent because its device is going
// away, telling each peer as kernel ib_cm's cm_destroy_id does: an
// unanswered REQ is rejected with reason Timeout (Abort), a REQ or REP not
// yet decided by the consumer and a REP whose RTU has not come are rejected
// as the consumer's (RejConsumerReject), an established connection gets a
// DREQ, and one already disconnecting is left to its peer; a SIDR_REQ
// waiting for the consumer is answered with status "rejected". No DREP is
// awaited and nothing is resent: every connection is forgotten and no
// events are reported for them. The messages are queued for Poll, so the
// caller must send them before it closes its socket.
func (a *Agent) Shutdown(now time.Time) {
	for id, c := range a.conns {
		switch {
		case c.isSIDR():
			a.abortSIDR(c)
		case !c.passive && c.state == StateREQSent:
			_ = a.Abort(now, id)
		case c.state == StateREQRcvd || c.state == StateMRASent || c.state == StateREPRcvd:
			_ = a.Reject(id, packet.RejConsumerReject, nil)
		case c.passive && c.state == StateREPSent:
			rej := packet.REJ{LocalCommID: uint32(id), RemoteCommID: c.remoteCommID(), MessageRejected: packet.MsgOther,
				Reason: packet.RejConsumerReject}
			a.send(c.peer, c.tid, &rej)
		case c.state == StateEstablished:
			_ = a.Disconnect(now, id, nil)
		}
		a.free(id)
	}
	a.events = a.events[:0:0]
}
