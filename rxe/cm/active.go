package cm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Connect starts a connection to the node at peer (IBA 12.9.5.1, active
// side): it sends req, with LocalCommID and LocalCAGUID filled in by the
// agent, and waits for the REP. The caller fills every other field (the
// service ID, its QPN and starting PSN, the path, the timeouts and retry
// counts, the private data).
func (a *Agent) Connect(now time.Time, peer netip.Addr, req *packet.REQ) (ID, error) {
	// The agent times the REQ with these fields: they must be what the
	// wire carries (IBA 12.6.5: 5-bit timeouts, 4-bit retries), so that
	// both sides time the connection alike.
	if req.RemoteCMResponseTimeout > 31 || req.LocalCMResponseTimeout > 31 || req.MaxCMRetries > 15 ||
		req.Primary.LocalACKTimeout > 31 {
		return 0, fmt.Errorf("%w: REQ timeouts %d, %d, %d (at most 31), CM retries %d (at most 15)", ErrInvalid,
			req.RemoteCMResponseTimeout, req.LocalCMResponseTimeout, req.Primary.LocalACKTimeout, req.MaxCMRetries)
	}
	if len(a.conns) >= a.cfg.MaxConns {
		return 0, ErrTooMany
	}
	id := a.allocID()
	c := &conn{id: id, state: StateREQSent, peer: peer, tid: a.tid(id), req: *req}
	c.req.LocalCommID = uint32(id)
	c.req.LocalCAGUID = a.cfg.CAGUID
	a.conns[id] = c
	a.send(peer, c.tid, &c.req)
	a.arm(now, c)
	return id, nil
}

// recvREP handles a REP (IBA 12.9.5.1): the answer to our REQ, or a
// duplicate of it, which the passive side resends while our RTU has not
// reached it. A duplicate is answered as kernel cm_dup_rep_handler
// answers it: with an MRA while the consumer has not confirmed the REP,
// with the RTU again once established, otherwise not at all.
func (a *Agent) recvREP(now time.Time, from netip.Addr, tid uint64, msg []byte) {
	var rep packet.REP
	_ = rep.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(rep.RemoteCommID)]
	if c == nil || c.passive {
		// A REP for no connection of ours is rejected with "invalid
		// communication ID" (IBA 12.6.7, reason 6), so that a passive
		// side whose REQ we gave up on stops resending its REP. Kernel
		// ib_cm drops it instead (cm_dup_rep_handler finds no
		// connection).
		a.send(from, tid, &packet.REJ{LocalCommID: rep.RemoteCommID, RemoteCommID: rep.LocalCommID,
			MessageRejected: packet.MsgREP, Reason: packet.RejInvalidCommID})
		a.ctr.RejectsSent++
		return
	}
	switch c.state {
	case StateREQSent:
		if old, ok := a.byQP[qpKey{rep.LocalCAGUID, rep.LocalQPN}]; ok {
			// Another connection has the peer's QP: reject the REP as
			// stale and end that one; this one stays in REQ sent, its REQ
			// retried, as in kernel cm_rep_handler.
			a.send(from, tid, &packet.REJ{LocalCommID: rep.RemoteCommID, RemoteCommID: rep.LocalCommID,
				MessageRejected: packet.MsgREP, Reason: packet.RejStaleConn})
			a.ctr.RejectsSent++
			a.staleQP(now, old)
			return
		}
		c.rep = rep
		c.state = StateREPRcvd
		c.deadline = time.Time{}
		a.indexQP(c)
		r := rep
		a.emit(Event{Kind: EventREP, ID: c.id, Peer: c.peer, REP: &r})
	case StateEstablished:
		if rep.LocalCommID != c.rep.LocalCommID {
			a.ctr.Dropped++
			return
		}
		// Our RTU was lost and the passive side resent its REP.
		a.send(c.peer, c.tid, &c.rtu)
		a.ctr.Duplicates++
	case StateREPRcvd:
		if rep.LocalCommID != c.rep.LocalCommID {
			a.ctr.Dropped++
			return
		}
		// The consumer has not confirmed the REP yet: ask the passive
		// side for patience, as kernel ib_cm does for rdma_cm, whose
		// handler of a REP received (cma_ib_handler) asks for a delayed
		// MRA (ib_prepare_cm_mra since 2025, before it ib_send_cm_mra
		// with IB_CM_MRA_FLAG_DELAY), so that cm_dup_rep_handler sends
		// one in MRA REP sent, only when the REP is repeated.
		a.send(c.peer, c.tid, &packet.MRA{LocalCommID: uint32(c.id), RemoteCommID: c.rep.LocalCommID,
			MessageMRAed: packet.MsgREP, ServiceTimeout: a.cfg.ServiceTimeout})
		a.ctr.Duplicates++
	default:
		a.ctr.Dropped++
	}
}

// ConfirmREP ends the active side's handshake once the consumer has moved
// its QP to RTR and RTS with the REP's values: it sends the RTU with
// privateData (at most 224 bytes; more is ErrInvalid, as kernel
// ib_send_cm_rtu refuses it) and the connection is established.
func (a *Agent) ConfirmREP(id ID, privateData []byte) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.state != StateREPRcvd {
		return ErrState
	}
	if err := checkPD("RTU", privateData, packet.RTUPrivateDataSize); err != nil {
		return err
	}
	c.rtu = packet.RTU{LocalCommID: uint32(id), RemoteCommID: c.rep.LocalCommID}
	copy(c.rtu.PrivateData[:], privateData)
	a.send(c.peer, c.tid, &c.rtu)
	c.state = StateEstablished
	return nil
}

// recvMRA handles an MRA (IBA 12.6.6): the peer received our REQ (or REP)
// and needs up to its service timeout to answer, so the response timer
// is pushed out to that plus the packet life time, and each retry then
// waits as long. Only the first MRA of a message counts, as in kernel
// cm_mra_handler (REQ sent → MRA REQ received, REP sent → MRA REP
// received, where further MRAs are duplicates): a peer that kept sending
// MRAs would otherwise hold the connection attempt open for ever, its
// retries never running out.
func (a *Agent) recvMRA(now time.Time, msg []byte) {
	var mra packet.MRA
	_ = mra.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(mra.RemoteCommID)]
	if c == nil {
		a.ctr.Dropped++
		return
	}
	ok := c.state == StateREQSent && !c.passive && mra.MessageMRAed == packet.MsgREQ ||
		c.state == StateREPSent && c.passive && mra.MessageMRAed == packet.MsgREP && mra.LocalCommID == c.remoteCommID()
	if !ok {
		a.ctr.Dropped++
		return
	}
	if c.mraRcvd {
		a.ctr.Duplicates++
		return
	}
	c.mraRcvd = true
	c.wait = duration(a.fromPeer(mra.ServiceTimeout)) + duration(a.cfg.PacketLifeTime)
	c.deadline = now.Add(c.wait)
}

// Abort gives up a connection attempt (the consumer's context ended): an
// active one whose REQ is unanswered or whose REP the consumer has not
// confirmed, or a passive one whose REP is sent and whose RTU has not come.
// An unanswered REQ and a REP whose RTU has not come are withdrawn with a
// REJ with reason Timeout, this CA's GUID in the ARI (kernel cm_destroy_id
// in REQ sent; in REP sent the kernel's reason is consumer reject); the
// latter rejects "other", as kernel cm_format_rej's, and ends the peer's
// connection even if it already sent its RTU. A REP not yet confirmed is
// rejected with reason consumer reject (kernel cm_destroy_id in REP
// received). The connection is forgotten. An attempt that got
// established as the consumer gave up (its RTU came just before) is
// disconnected instead, a DREQ ending the peer's side too (kernel
// cm_destroy_id in established): the consumer will not use it, and left
// established it would be kept on both sides for ever. A service ID
// resolution is ended as abortSIDR says.
func (a *Agent) Abort(now time.Time, id ID) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.isSIDR() {
		a.abortSIDR(c)
		return nil
	}
	switch {
	case c.state == StateEstablished:
		return a.Disconnect(now, id, nil)
	case !c.passive && c.state == StateREQSent:
		// "Other", as kernel cm_format_rej in REQ sent; the peer finds
		// the connection by our ID and the ARI's GUID (recvREJ).
		rej := packet.REJ{LocalCommID: uint32(id), MessageRejected: packet.MsgOther, RejectedInfoLen: 8, Reason: packet.RejTimeout}
		binary.BigEndian.PutUint64(rej.ARI[:], a.cfg.CAGUID)
		a.send(c.peer, c.tid, &rej)
		a.free(id)
		return nil
	case !c.passive && c.state == StateREPRcvd:
		// Not Timeout: a REJ with that reason is looked up by the CA GUID
		// in its ARI (kernel cm_acquire_rejected_id), and Reject sends
		// none; a consumer reject is matched by both IDs.
		return a.Reject(id, packet.RejConsumerReject, nil)
	case c.passive && c.state == StateREPSent:
		// A consumer reject rejecting "other" with both IDs, as kernel
		// cm_destroy_id sends in REP sent (cm_format_rej): the peer's CM
		// matches it by the two IDs, and rdma_cm reports REJECTED with
		// reason 28 rather than a timeout the peer did not have.
		rej := packet.REJ{LocalCommID: uint32(id), RemoteCommID: c.remoteCommID(), MessageRejected: packet.MsgOther,
			Reason: packet.RejConsumerReject}
		a.send(c.peer, c.tid, &rej)
		a.free(id)
		return nil
	}
	return ErrState
}

// checkPD returns ErrInvalid if private data is longer than the n bytes
// its message carries (kernel ib_cm's senders refuse it with -EINVAL
// rather than cut it).
func checkPD(msg string, pd []byte, n int) error {
	if len(pd) > n {
		return fmt.Errorf("%w: %d bytes of private data (a %s carries %d)", ErrInvalid, len(pd), msg, n)
	}
	return nil
}
