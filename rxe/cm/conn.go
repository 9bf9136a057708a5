package cm

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// State is a connection's communication state (IBA 12.9.2, figures 93-95;
// the names of kernel ib_cm's states where the two agree).
type State uint8

// The states.
const (
	StateIdle        State = iota // no connection (unknown ID, or freed)
	StateREQSent                  // active: REQ sent, waiting for REP
	StateREPRcvd                  // active: REP received, waiting for the consumer
	StateREQRcvd                  // passive: REQ reported, waiting for the consumer
	StateMRASent                  // passive: MRA sent for the REQ, waiting for the consumer
	StateREPSent                  // passive: REP sent, waiting for RTU
	StateEstablished              // connection up
	StateDREQSent                 // DREQ sent, waiting for DREP
	StateTimeWait                 // disconnected; late MADs still answered
	StateSIDRREQSent              // active: SIDR_REQ sent, waiting for SIDR_REP (IBA 12.11)
	StateSIDRREQRcvd              // passive: SIDR_REQ reported, waiting for the consumer
)

var stateNames = [...]string{"idle", "REQ sent", "REP received", "REQ received", "MRA sent", "REP sent", "established", "DREQ sent", "time-wait", "SIDR_REQ sent", "SIDR_REQ received"}

// String returns the state's name.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state?"
}

// conn is one connection's state machine.
type conn struct {
	id       ID
	state    State
	passive  bool
	peer     netip.Addr
	tid      uint64 // transaction of the REQ, REP, MRA, RTU and their REJ
	req      packet.REQ
	rep      packet.REP
	rtu      packet.RTU
	mra      packet.MRA
	dreq     packet.DREQ
	sreq     packet.SIDRREQ // the SIDR_REQ of a SIDR state (sent or received)
	wait     time.Duration  // one attempt's response timeout
	retries  uint8          // retransmissions left
	deadline time.Time      // zero: no timer
	// mraRcvd: the peer's MRA for our REQ (active) or REP (passive) has
	// stretched the response timer; a later MRA does not (recvMRA).
	mraRcvd bool
}

// isSIDR reports whether c is a service ID resolution rather than a
// connection: it has no remote ID, no peer QP and no time-wait.
func (c *conn) isSIDR() bool { return c.state == StateSIDRREQSent || c.state == StateSIDRREQRcvd }

func (c *conn) remoteKey() remoteKey { return remoteKey{c.req.LocalCommID, c.req.LocalCAGUID} }

// remoteCommID returns the peer's communication ID (0 before the REP, on
// the active side).
func (c *conn) remoteCommID() uint32 {
	if c.passive {
		return c.req.LocalCommID
	}
	return c.rep.LocalCommID
}

// localQPN and remoteQPN return the QPNs of the two ends.
func (c *conn) localQPN() uint32 {
	if c.passive {
		return c.rep.LocalQPN
	}
	return c.req.LocalQPN
}

func (c *conn) remoteQPN() uint32 {
	if c.passive {
		return c.req.LocalQPN
	}
	return c.rep.LocalQPN
}

// peerResponse returns how long the peer may take to answer a CM message:
// the CM response timeout it announced (the REQ's remote timeout on the
// active side, its local one on the passive side) plus twice the packet
// life time (IBA 12.6.5).
func (a *Agent) peerResponse(c *conn) time.Duration {
	t := c.req.RemoteCMResponseTimeout
	if c.passive {
		t = a.fromPeer(c.req.LocalCMResponseTimeout)
	}
	return duration(t) + 2*duration(a.cfg.PacketLifeTime)
}

// timeWait returns how long a connection stays in time-wait: the local ACK
// timeout plus twice the packet life time, so that packets of the old
// connection are gone from the network (IBA 12.9.8.4). On the passive side
// the timeout is the peer's (its REQ's), bounded by Config.MaxPeerTimeout.
func (a *Agent) timeWait(c *conn) time.Duration {
	return duration(a.fromPeer(c.req.Primary.LocalACKTimeout)) + 2*duration(a.cfg.PacketLifeTime)
}

// fromPeer bounds a timeout exponent a peer chose by Config.MaxPeerTimeout.
func (a *Agent) fromPeer(t uint8) uint8 { return min(t, a.cfg.MaxPeerTimeout) }

// arm starts the response timer of a message just sent, with the REQ's
// retry budget.
func (a *Agent) arm(now time.Time, c *conn) {
	c.wait = a.peerResponse(c)
	c.retries = c.req.MaxCMRetries
	c.deadline = now.Add(c.wait)
}

func (a *Agent) enterTimeWait(now time.Time, c *conn) {
	a.unindexQP(c) // the peer's QP may connect again (kernel cm_enter_timewait)
	c.state = StateTimeWait
	c.deadline = now.Add(a.timeWait(c))
}

// expire runs connection c's expired timer.
func (a *Agent) expire(now time.Time, id ID, c *conn) {
	if c.state == StateTimeWait {
		a.ctr.TimeWaitExit++
		a.free(id)
		return
	}
	if c.retries > 0 {
		c.retries--
		a.ctr.Retransmits++
		c.deadline = now.Add(c.wait)
		switch c.state {
		case StateREQSent:
			a.send(c.peer, c.tid, &c.req)
		case StateREPSent:
			a.send(c.peer, c.tid, &c.rep)
		case StateDREQSent:
			a.send(c.peer, a.tid(c.id), &c.dreq)
		case StateSIDRREQSent:
			a.send(c.peer, c.tid, &c.sreq)
		default:
			c.deadline = time.Time{}
		}
		return
	}
	switch c.state {
	case StateREQSent, StateREPSent:
		// IBA 12.9.5.1: a side whose retries run out rejects with reason
		// Timeout, its CA GUID in the ARI.
		msg := uint8(packet.MsgREQ)
		if c.state == StateREPSent {
			msg = packet.MsgREP
		}
		rej := packet.REJ{LocalCommID: uint32(c.id), RemoteCommID: c.remoteCommID(), MessageRejected: msg,
			RejectedInfoLen: 8, Reason: packet.RejTimeout}
		binary.BigEndian.PutUint64(rej.ARI[:], a.cfg.CAGUID)
		a.send(c.peer, c.tid, &rej)
		a.ctr.RejectsSent++
		a.emit(Event{Kind: EventTimeout, ID: id, Peer: c.peer, Reason: packet.RejTimeout})
		a.free(id)
	case StateDREQSent:
		a.enterTimeWait(now, c)
		a.emit(Event{Kind: EventDisconnected, ID: id, Peer: c.peer, Reason: packet.RejTimeout})
	case StateSIDRREQSent:
		// No message: a SIDR has no REJ; the kernel reports
		// IB_CM_SIDR_REQ_ERROR (cm_process_send_error).
		a.emit(Event{Kind: EventTimeout, ID: id, Peer: c.peer, Reason: packet.RejTimeout})
		a.free(id)
	default:
		c.deadline = time.Time{}
	}
}
