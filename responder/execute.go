package responder

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// execute mirrors rxe execute: it places a SEND or WRITE packet's data,
// invalidates an IETH R_Key, and on success advances MSN (at the end of a
// message) and ePSN. READ and the atomics branch to their reply states.
func (r *Responder) execute() State {
	payload := r.pkt.Payload()
	switch r.kind {
	case kindSend:
		if st := r.scatter(payload); st != StateNone {
			return st
		}
	case kindWrite:
		n := len(r.dst) // checkWriteRKey resolved exactly the payload's bytes
		if r.placed == 0 {
			sge.Copy(r.dst, payload)
		}
		r.wva += uint64(n)
		r.wresid -= uint32(n)
		r.ctrs.BytesPlaced += uint64(n)
	case kindRead:
		// IBA C9-148: the MSN counts a READ when it is accepted.
		r.msn = (r.msn + 1) & packet.PSNMask
		return StateReadReply
	case kindAtomic:
		return StateAtomicReply
	case kindAtomicWrite:
		return StateAtomicWriteReply
	case kindFlush:
		return StateProcessFlush
	}
	if ieth := r.pkt.IETH(); ieth != nil {
		if !r.env.Mem.Invalidate(ieth.RKey()) {
			return StateErrInvalidateRKey
		}
	}
	end := r.mask&packet.MaskEnd != 0
	if end {
		r.msn = (r.msn + 1) & packet.PSNMask
	}
	r.epsn = r.psn.Next()
	switch {
	case end:
		r.inMsg = msgNone
	case r.kind == kindSend:
		r.inMsg = msgSend
	default:
		r.inMsg = msgWrite
	}
	r.status = verbs.WCSuccess
	if r.mask&packet.MaskComp != 0 {
		return StateComplete
	}
	return StateAcknowledge
}

// scatter copies SEND data into the receive WQE at its running offset
// (rxe send_data_in/copy_data). It returns StateNone on success.
func (r *Responder) scatter(data []byte) State {
	w := &r.wqe
	if !w.valid {
		return StateErrMalformedWQE
	}
	n := uint64(r.payloadLen())
	if n > w.total-w.placed {
		r.lenLocal = true
		return StateErrLength
	}
	if r.placed > 0 {
		// placeAhead put the bytes at this offset on arrival. Their
		// SGEs must still resolve now, as the copy in order would need
		// them to (rxe copy_data; a region deregistered since fails).
		if !w.cur.Check(r.lmem, w.sges, uint32(n)) {
			return StateErrMalformedWQE
		}
	} else if !w.cur.Scatter(r.lmem, w.sges, data) {
		return StateErrMalformedWQE
	}
	w.placed += n
	r.ctrs.BytesPlaced += n
	return StateNone
}

// word64 returns mem as a *uint64 if the request VA and the host address
// are both 8-byte aligned (IBA C9-123; rxe ERR_MISALIGNED_ATOMIC).
func word64(va uint64, mem []byte) (*uint64, bool) {
	if len(mem) < 8 || va&7 != 0 || uintptr(unsafe.Pointer(&mem[0]))&7 != 0 {
		return nil, false
	}
	return (*uint64)(unsafe.Pointer(&mem[0])), true
}

// atomicReply mirrors rxe atomic_reply: it executes COMPARE_SWAP or
// FETCH_ADD once, remembering the original value in a responder resource,
// or, for a duplicate, only replays (IBA 9.7.5.1.3: never twice).
func (r *Responder) atomicReply() State {
	if r.replay {
		return StateAcknowledge
	}
	a := r.pkt.AtomicETH()
	p, ok := word64(a.VA(), r.dst)
	if !ok {
		return StateErrMisalignedAtomic
	}
	var orig uint64
	if r.pkt.Opcode() == packet.RCCompareSwap {
		cmp, swap := a.Compare(), a.SwapAdd()
		for {
			orig = atomic.LoadUint64(p)
			if orig != cmp || atomic.CompareAndSwapUint64(p, orig, swap) {
				break
			}
		}
	} else {
		add := a.SwapAdd()
		orig = atomic.AddUint64(p, add) - add
	}
	res := r.newResource(kindAtomic, 1)
	res.orig = orig
	r.cur = res
	r.finishSingle()
	return StateAcknowledge
}

// atomicWriteReply mirrors rxe atomic_write_reply: an 8-byte store of the
// payload bytes as they are (native order), executed once.
func (r *Responder) atomicWriteReply() State {
	if r.replay {
		return StateAcknowledge
	}
	p, ok := word64(r.wva, r.dst)
	if !ok {
		return StateErrMisalignedAtomic
	}
	atomic.StoreUint64(p, binary.NativeEndian.Uint64(r.pkt.Payload()))
	r.wresid = 0
	r.ctrs.BytesPlaced += 8
	r.cur = r.newResource(kindAtomicWrite, 1)
	r.finishSingle()
	return StateAcknowledge
}

// processFlush mirrors rxe process_flush. Memory written through this
// package is already globally visible to the process, and there is no
// persistent memory to write back, so FLUSH only takes a resource.
func (r *Responder) processFlush() State {
	if r.replay {
		return StateAcknowledge
	}
	r.cur = r.newResource(kindFlush, 1)
	r.finishSingle()
	return StateAcknowledge
}

// finishSingle is the bookkeeping of a one-PSN request that executed.
func (r *Responder) finishSingle() {
	r.msn = (r.msn + 1) & packet.PSNMask
	r.epsn = r.psn.Next()
	r.inMsg = msgNone
	r.status = verbs.WCSuccess
}

// complete mirrors rxe do_complete: it posts the receive completion of the
// WQE in progress (success at the end of a SEND or WRITE WITH IMMEDIATE, or
// the error status of a failure), and consumes the WQE; RDMARecvs counts
// a successful one once the CQ has taken it. The completion of
// a request behind a READ response stream still queued is held until the
// stream, and the responses queued between the two, have gone (hold).
func (r *Responder) complete() State {
	if !r.wqe.valid {
		return StateAcknowledge
	}
	w := &r.wqe
	wc := &r.wc
	*wc = verbs.WC{ID: w.id, Status: r.status, Opcode: verbs.WCRecv, QPNum: r.cfg.QPN}
	if r.kind == kindWrite {
		wc.Opcode = verbs.WCRecvRDMAWithImm
	}
	if r.status == verbs.WCSuccess {
		wc.SrcQP = r.cfg.DestQPN
		wc.ByteLen = uint32(w.placed)
		if r.kind == kindWrite {
			wc.ByteLen = r.wlen
		}
		if imm := r.pkt.ImmDt(); imm != nil {
			wc.Flags |= verbs.WCFlagWithImm
			wc.Imm = imm.Imm()
		}
		if ieth := r.pkt.IETH(); ieth != nil {
			wc.Flags |= verbs.WCFlagWithInv
			wc.Imm = ieth.RKey()
		}
	}
	w.valid = false
	if r.holding() {
		r.hold(wc, r.pkt.BTH().SE())
		return StateAcknowledge
	}
	if !r.post(wc, r.pkt.BTH().SE()) {
		return StateErrCQOverflow
	}
	if r.status == verbs.WCSuccess {
		r.ctrs.RDMARecvs++
	}
	return StateAcknowledge
}

// holding reports whether a receive completion must wait (hold): a READ
// response stream is queued, or completions held behind one are still
// waiting for the responses queued after it, which a later completion
// must not overtake.
func (r *Responder) holding() bool { return r.q.hasRead() || r.held.Len() > 0 }

// hold keeps the completion wc of a request that ran while a READ
// response stream was queued ahead of it, or completions held behind one
// (holding; solicited: its BTH SE bit), and
// queues its place behind that stream: an outHeld item, or one more
// completion for the outHeld item before the ACK just queued. That ACK
// acknowledges the requests between the two, and the ACK this request
// queues next replaces it (queueACK); the held entry keeps it, for a CQ
// overflow to send (postHeld). getReq has left room for the item and
// the request's response.
//
// Kernel rxe sends a READ's whole train (read_reply) before it takes the
// next request, so the requests behind it run, and complete, only once the
// train is out; and if the train faults (an R_Key or range check that
// fails as a response is built, the region deregistered or invalidated
// meanwhile: ERR_RKEY_VIOLATION) the QP moves to ERR before they run and
// their receive WQEs are flushed. Here they run on arrival and only their
// completions wait: once everything ahead of the outHeld item but hole and
// progress reports has been sent, it is taken and they are posted
// (releaseHeld); a flush first (Flush) completes
// their WQEs with WR_FLUSH_ERR, and so does a fault of the stream
// (readFault) for the requests received after the one the stream answers.
// A duplicate READ's stream (a re-read's extra stream under selective
// repeat, which goes ahead of them) answers a request received after
// some of them: a fault of it posts theirs as they are, since rxe ran
// them before the duplicate.
//
// What differs from rxe is only where no completion tells it: the data of
// a SEND or WRITE behind the stream is placed on arrival, so after a fault
// the buffers of a receive WQE flushed with WR_FLUSH_ERR may hold its
// message, and a WRITE's target its bytes, while the requester's WR for
// it completes with WR_FLUSH_ERR too. Neither is a result a consumer may
// use: of a completion in error only the WR ID, status and QP number are
// valid (ibv_poll_cq(3)), so a flushed receive WQE's buffers say nothing,
// and a requester's WR that completed in error does not say whether the
// responder ran it (an ACK lost before the QP failed leaves it the same
// way). An atomic behind the stream likewise executes on arrival (its
// ATOMIC ACKNOWLEDGE waits in the queue and a fault drops it); executing
// it later would mean holding back every request after it too, to keep
// their order (IBA 9.5), so it is not deferred.
func (r *Responder) hold(wc *verbs.WC, solicited bool) {
	r.heldIn++
	h := r.held.Push()
	h.wc, h.solicited, h.ack = *wc, solicited, false
	if n := r.q.Len(); n > 1 {
		if b, m := r.q.Back(), r.q.At(n-2); b.kind == outACK && m.kind == outHeld {
			h.ack, h.ackPSN, h.ackMSN = true, b.psn, b.msn
			m.nheld++
			return
		}
	}
	it := r.q.push()
	it.kind, it.nheld = outHeld, 1
}

// releaseHeld takes the outHeld items that nothing queued ahead of them
// orders and posts their completions, oldest first (hold, postHeld): those
// at the head of the output queue, or behind selective repeat's hole and
// progress reports only (report). A report acknowledges nothing, so it
// orders nothing before a completion; kernel rxe, which has no such
// report, posts a completion once the responses of the requests before
// it are out. The reports stay queued as they are.
func (r *Responder) releaseHeld() {
	for {
		i := 0
		for i < r.q.Len() && report(r.q.At(i)) {
			i++
		}
		if i == r.q.Len() || r.q.At(i).kind != outHeld {
			return
		}
		n := r.q.At(i).nheld
		r.q.remove(i)
		if !r.postHeld(int(n)) {
			return
		}
	}
}

// report reports whether it is a selective-repeat hole or progress report
// (queueHole, queueProgress): an urgent NAK.
func report(it *outItem) bool { return it.urgent && it.kind == outNAK }

// postHeld posts the n oldest held completions (hold), in order, and
// reports whether the receive CQ took them all. A receive CQ that
// overflows fails the responder as it would have failed on that request
// (class G, no NAK: rxe do_complete -> ERR_CQ_OVERFLOW), which is then
// the failure reported, even if a request after it failed already. The
// responses still queued, of that request and of requests rxe would not
// have run, are dropped; the ACK of the requests before it that the
// dropped ACK had replaced (hold) is queued again; the completions still
// held wait for Flush.
func (r *Responder) postHeld(n int) bool {
	for range n {
		h := r.held.Front()
		ok := r.post(&h.wc, h.solicited)
		if ok && h.wc.Status == verbs.WCSuccess {
			r.ctrs.RDMARecvs++
		}
		ack, psn, msn := h.ack, h.ackPSN, h.ackMSN
		r.held.Pop()
		if !ok {
			r.overflowHeld(ack, psn, msn)
			return false
		}
	}
	return true
}

// overflowHeld fails the responder on a receive CQ overflow met while
// posting a held completion (postHeld): everything queued is dropped
// but, if ack, the ACK of psn and msn that the request's own ACK had
// replaced.
func (r *Responder) overflowHeld(ack bool, psn packet.PSN, msn uint32) {
	r.q.truncate(0)
	if ack {
		it := r.q.push()
		it.kind, it.psn, it.msn = outACK, psn, msn
	}
	r.failed = false
	r.fail(verbs.WCGeneralErr, StateErrCQOverflow)
}

// acknowledge mirrors rxe acknowledge: the error NAK if one is pending, the
// ATOMIC ACKNOWLEDGE of an atomic, the empty READ RESPONSE ONLY of FLUSH
// and ATOMIC_WRITE, and for SEND/WRITE an ACK when the packet asked for
// one — or ended a message (ACKing every message end is cheap insurance
// against a requester that never sets AckReq; ACKs coalesce anyway).
func (r *Responder) acknowledge() State {
	switch {
	case r.nak:
		r.queueNAK(r.nakSyn, r.psn, true)
	case r.kind == kindAtomic:
		r.queueAtomicACK(r.psn, r.cur.orig)
	case r.kind == kindAtomicWrite || r.kind == kindFlush:
		r.queueRead(readReq{psn: r.psn}, r.msn)
	case r.pkt.AckReq() || r.mask&packet.MaskEnd != 0:
		r.queueACK(r.psn)
	}
	return StateCleanup
}

// cleanup mirrors rxe cleanup.
func (r *Responder) cleanup() State {
	r.dst = nil
	return StateDone
}

// duplicateRequest mirrors rxe duplicate_request (IBA 9.7.5.1.1, C9-105,
// C9-106): SEND and WRITE are acknowledged again, never re-executed; READ
// and the atomics are answered from their responder resource; anything
// without a resource is dropped (class D). Under selective repeat a
// duplicate READ is served as an extra stream of just its range, ahead of
// the train being sent, which it neither rewinds nor stops.
func (r *Responder) duplicateRequest() State {
	switch r.kind {
	case kindSend, kindWrite:
		// The newest PSN this responder has completed.
		r.queueACK(r.epsn.Add(-1))
		return StateCleanup
	case kindRead:
		res := r.findResource(kindRead, r.psn)
		if res == nil || !r.replayRead(res) {
			r.ctrs.DuplicateDropped++
			return StateCleanup
		}
		if r.cfg.SelectiveRepeat {
			if r.coveredRead(res) || r.firstWholeDuplicate(res) {
				r.ctrs.ReadsCovered++
				return StateCleanup
			}
			r.clipToStream(res)
		} else if r.restartTrain(res) {
			return StateCleanup
		}
		r.replay = true
		r.ctrs.ReadReplays++
		return StateReadReply
	}
	res := r.findResource(r.kind, r.psn)
	if res == nil || res.first != r.psn {
		r.ctrs.DuplicateDropped++
		return StateCleanup
	}
	r.cur, r.replay = res, true
	switch r.kind {
	case kindAtomic:
		return StateAtomicReply
	case kindAtomicWrite:
		return StateAtomicWriteReply
	}
	return StateProcessFlush
}
