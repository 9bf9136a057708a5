package responder

import (
	"errors"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// resource is a responder resource (rxe struct resp_res; IBA 9.7.5.1.3):
// what is needed to answer a duplicate READ, atomic, FLUSH or ATOMIC_WRITE
// without executing it again.
type resource struct {
	kind  reqKind // kindNone: free
	first packet.PSN
	npsn  int // PSNs used: first .. first+npsn-1
	// READ: the original request.
	va     uint64
	rkey   uint32
	length uint32
	// COMPARE_SWAP / FETCH_ADD: the value before the operation.
	orig uint64
}

// readReq is a READ to answer: a new one, a replayed part of one, or the
// empty response of FLUSH/ATOMIC_WRITE (length 0).
type readReq struct {
	psn    packet.PSN
	va     uint64
	rkey   uint32
	length uint32
}

// readPSNs returns the number of PSNs a READ of length bytes uses
// (IBA 9.7.1: max(1, ceil(length/PMTU))).
func (r *Responder) readPSNs(length uint32) int {
	return max(1, int((uint64(length)+uint64(r.mtu)-1)/uint64(r.mtu)))
}

// newResource takes the next resource, recycling the oldest (rxe
// rxe_prepare_res).
func (r *Responder) newResource(kind reqKind, npsn int) *resource {
	res := &r.res[r.resHead]
	r.resHead++
	if r.resHead == len(r.res) {
		r.resHead = 0
	}
	*res = resource{kind: kind, first: r.psn, npsn: npsn}
	return res
}

// findResource returns the resource of the given kind whose PSNs include
// psn (rxe find_resource), or nil.
func (r *Responder) findResource(kind reqKind, psn packet.PSN) *resource {
	for i := range r.res {
		res := &r.res[i]
		if res.kind == kind && psn.InRange(res.first, res.npsn) {
			return res
		}
	}
	return nil
}

// replayRead checks a duplicate READ against its resource (rxe
// duplicate_request): same R_Key, a sub-range of the original, and a PSN
// span inside the original's. It sets r.rd on success.
func (r *Responder) replayRead(res *resource) bool {
	reth := r.pkt.RETH()
	va, length := reth.VA(), reth.DMALen()
	if va < res.va || length > res.length || va-res.va > uint64(res.length-length) {
		return false
	}
	if res.length != 0 && reth.RKey() != res.rkey {
		return false
	}
	if int(r.psn.Diff(res.first))+r.readPSNs(length) > res.npsn {
		return false
	}
	r.rd = readReq{psn: r.psn, va: va, rkey: res.rkey, length: length}
	return true
}

// restartTrain handles a duplicate READ (r.rd, checked by replayRead)
// whose original train res is still in the output queue. If the duplicate
// asks for PSNs the train has not sent yet, the train answers it and the
// duplicate is dropped; if it asks for PSNs already sent (responses lost,
// or overtaken so that the requester dropped the rest), the train is
// rewound to the duplicate's PSN and continues from there with FIRST, so
// the requester does not wait behind the rest of a train it will discard.
// rxe does the same: its duplicate_request points the QP's current read
// resource at the replayed position. It reports whether it handled the
// duplicate.
func (r *Responder) restartTrain(res *resource) bool {
	end := res.first.Add(res.npsn)
	for i := range r.q.Len() {
		it := r.q.At(i)
		if it.kind != outRead || it.rkey != res.rkey || it.psn.Before(res.first) || !it.psn.Before(end) {
			continue
		}
		if !r.rd.psn.Before(it.psn) {
			r.ctrs.ReadsCovered++
			return true
		}
		it.psn, it.va, it.resid, it.first = r.rd.psn, r.rd.va, r.rd.length, true
		r.ctrs.ReadRestarts++
		return true
	}
	return false
}

// readReply mirrors rxe read_reply, except that it only queues the response
// train; NextPacket builds the packets. A new READ takes a resource and
// moves ePSN past all its PSNs now, so that later requests are processed
// while the train is still being sent. A replay restarts at the duplicate's
// PSN with FIRST/ONLY, as rdmavt does (rxe sends MIDDLE/LAST there); both
// rxe's and rdmavt's requesters accept it.
func (r *Responder) readReply() State {
	if !r.replay {
		n := r.readPSNs(r.rd.length)
		res := r.newResource(kindRead, n)
		res.va, res.rkey, res.length = r.rd.va, r.rd.rkey, r.rd.length
		r.epsn = r.psn.Add(n)
		r.inMsg = msgNone
	}
	r.queueRead(r.rd, r.msn)
	return StateCleanup
}

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

// emit builds the packet at the head of the output queue into buf. It
// returns the packet length and true, or false with n < 0 if buf is too
// small (the item is kept) and n == 0 if the item was dropped.
func (r *Responder) emit(buf []byte) (int, bool) {
	it := r.q.Front()
	h := &r.hdr
	*h = packet.Headers{}
	h.BTH = packet.BTHFields{PKey: r.cfg.PKey, DestQP: r.cfg.DestQPN, PSN: it.psn}
	h.AETH.MSN = it.msn
	var payload []byte
	switch it.kind {
	case outACK:
		h.BTH.Opcode = packet.RCAcknowledge
		h.AETH.Syndrome = r.ackSyndrome(it.msn)
	case outNAK:
		h.BTH.Opcode = packet.RCAcknowledge
		h.AETH.Syndrome = it.syn
	case outAtomicACK:
		h.BTH.Opcode = packet.RCAtomicAcknowledge
		h.AETH.Syndrome = r.ackSyndrome(it.msn)
		h.AtomicAck = it.orig
	case outRead:
		n := min(it.resid, uint32(r.mtu))
		switch {
		case it.first && it.resid <= uint32(r.mtu):
			h.BTH.Opcode = packet.RCRDMAReadResponseOnly
		case it.first:
			h.BTH.Opcode = packet.RCRDMAReadResponseFirst
		case it.resid > uint32(r.mtu):
			h.BTH.Opcode = packet.RCRDMAReadResponseMiddle
		default:
			h.BTH.Opcode = packet.RCRDMAReadResponseLast
		}
		if h.BTH.Opcode != packet.RCRDMAReadResponseMiddle {
			h.AETH.Syndrome = r.ackSyndrome(it.msn)
		}
		if n > 0 {
			// Re-validate the region for every packet (rxe
			// rxe_recheck_mr): a deregistration mid-read fails cleanly.
			mem, ok := r.env.Mem.Remote(it.rkey, it.va, n, verbs.AccessRemoteRead)
			if !ok || len(mem) != int(n) {
				r.readFault(it)
				return r.emit(buf)
			}
			payload = mem
		}
	}
	n, err := packet.Build(buf, h, payload, &r.cfg.Pseudo)
	if err != nil {
		if errors.Is(err, packet.ErrBufferTooSmall) {
			return -1, false
		}
		r.ctrs.BuildErrors++
		r.q.Pop()
		return 0, false
	}
	switch it.kind {
	case outACK:
		r.ctrs.AcksSent++
	case outNAK:
		r.ctrs.NaksSent++
	case outAtomicACK:
		r.ctrs.AtomicAcksSent++
	case outRead:
		r.ctrs.ReadResponses++
		r.ctrs.BytesRead += uint64(len(payload))
		it.first = false
		it.psn = it.psn.Next()
		it.va += uint64(len(payload))
		it.resid -= uint32(len(payload))
		if it.resid > 0 {
			return n, true
		}
	}
	r.q.Pop()
	return n, true
}

// readFault turns a read train whose memory has gone into a Remote Access
// Error NAK for the response PSN that could not be sent (rxe read_reply ->
// ERR_RKEY_VIOLATION, class C), drops everything queued behind it, and
// fails the responder.
func (r *Responder) readFault(it *outItem) {
	*it = outItem{kind: outNAK, syn: packet.NAKSyndrome(packet.NAKRemoteAccess), psn: it.psn, msn: r.msn, fatal: true}
	r.q.Truncate(1)
	r.fail(verbs.WCRemAccessErr, StateErrRKeyViolation)
}
