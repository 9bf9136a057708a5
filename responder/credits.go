package responder

import "github.com/gorxe/gorxe/packet"

// ackSyndrome returns the syndrome of an ACK-type AETH carrying MSN msn:
// credit code 31 ("invalid", no flow control) as rxe always sends, or with
// Config.Credits the IBA credit code of the receive WQEs available (IBA
// 9.7.7.2.5), rounded down by the credit table. It records the limit
// sequence number it advertises (MSN + credits) for CreditUpdate.
func (r *Responder) ackSyndrome(msn uint32) packet.Syndrome {
	if !r.creditsOn() {
		return packet.SyndromeACKUnlimited
	}
	code := packet.CreditCode(r.available())
	n, _ := packet.Credits(code)
	r.advLSN, r.advertised = (msn+uint32(n))&packet.PSNMask, true
	return packet.ACKSyndrome(code)
}

// creditsOn reports whether the AETHs carry real credits: Config.Credits
// on an own receive queue (a QP on an SRQ always advertises 31).
func (r *Responder) creditsOn() bool {
	return r.cfg.Credits && !r.cfg.SRQ && r.env.RQ != nil
}

// available counts the receive WQEs not used by completed messages: those
// posted and the one taken by the SEND in progress, whose message the MSN
// does not count yet. MSN + available is then the SSN of the last message
// the WQEs can take, however late the AETH is built after its MSN was
// recorded (MSN + available never decreases).
func (r *Responder) available() int {
	n := r.env.RQ.Len()
	if r.wqe.valid {
		n++
	}
	return n
}

// CreditUpdate is called by the owner after receive WQEs were posted to
// the QP's own receive queue. If the requester may be blocked by credits —
// the newest advertised limit has been reached: every message it allowed
// has arrived, so no further ACK would tell the requester of the new WQEs —
// and the new WQEs raise the limit, it queues an unsolicited ACK repeating
// the acknowledgement of the last PSN received with the current MSN and
// credits (IBA 9.7.7.2.5: credits are updated by any ACK, a duplicate
// one included), unless an ACK is queued already (it will carry them). It
// reports whether it queued one: the owner must then have NextPacket
// called. Nothing is sent before the first advertisement: until then the
// requester may send its first message (the probe) anyway.
func (r *Responder) CreditUpdate() bool {
	if !r.creditsOn() || !r.advertised || r.failed || r.flushed {
		return false
	}
	if packet.PSN(r.advLSN).Diff(packet.PSN(r.msn)) > 0 {
		return false // the requester still has credits; its ACKs will carry more
	}
	n, _ := packet.Credits(packet.CreditCode(r.available()))
	if !packet.PSN((r.msn + uint32(n)) & packet.PSNMask).After(packet.PSN(r.advLSN)) {
		return false // nothing new to advertise
	}
	if r.q.Len() > 0 && r.q.Back().kind == outACK || r.q.Free() == 0 {
		return false // a queued ACK will carry the new credits (or the queue is full)
	}
	r.queueACK(r.epsn.Add(-1))
	r.ctrs.CreditUpdates++
	return true
}
