package responder

import (
	"errors"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// emit builds the packet at the head of the output queue into buf. It
// returns the packet length and true, or false with n < 0 if buf is too
// small (the item is kept) and n == 0 if the item was dropped.
func (r *Responder) emit(buf []byte) (int, bool) {
	it := r.q.Front()
	h := &r.hdr
	*h = packet.Headers{}
	h.BTH = packet.BTHFields{PKey: r.cfg.PKey, DestQP: r.cfg.DestQPN, PSN: it.psn}
	h.AETH.MSN = it.msn
	var mem []byte // read response payload
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
	case outHeld:
		// The responses ahead of these completions have gone.
		r.releaseHeld()
		return 0, false
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
			var ok bool
			mem, ok = r.env.Mem.Remote(it.rkey, it.va, n, verbs.AccessRemoteRead)
			if !ok || len(mem) != int(n) {
				r.readFault(it)
				if r.q.Len() == 0 {
					return 0, false // a CQ overflow dropped the NAK too
				}
				return r.emit(buf)
			}
		}
	}
	f, err := packet.Begin(buf, h, len(mem), &r.cfg.Pseudo)
	if err != nil {
		if errors.Is(err, packet.ErrBufferTooSmall) {
			return -1, false
		}
		r.ctrs.BuildErrors++
		r.q.pop()
		return 0, false
	}
	// The payload is folded into the ICRC as it is copied out of the
	// memory region: one read of it, not two.
	n := f.SealICRC(packet.ICRCCopy(f.StartICRC(&r.icrc), f.Payload(), mem))
	switch it.kind {
	case outACK:
		r.ctrs.AcksSent++
	case outNAK:
		r.countNAK(it)
	case outAtomicACK:
		r.ctrs.AtomicAcksSent++
	case outRead:
		r.ctrs.ReadResponses++
		r.ctrs.BytesRead += uint64(len(mem))
		it.first = false
		it.psn = it.psn.Next()
		it.va += uint64(len(mem))
		it.resid -= uint32(len(mem))
		if it.resid > 0 {
			return n, true
		}
	}
	r.q.pop()
	if r.held.Len() > 0 {
		// Completions held behind the item just taken, with at most
		// hole and progress reports between, are posted with it, not
		// on the next call.
		r.releaseHeld()
	}
	return n, true
}

// countNAK counts a NAK sent, and among them selective repeat's reports
// (urgent items): progress reports, whose two PSNs are equal, apart from
// hole reports.
func (r *Responder) countNAK(it *outItem) {
	r.ctrs.NaksSent++
	switch {
	case !it.urgent:
	case it.psn == packet.PSN(it.msn):
		r.ctrs.SRProgressReports++
	default:
		r.ctrs.SRHolesReported++
	}
}

// readFault turns a read train whose memory has gone into a Remote Access
// Error NAK (rxe read_reply -> ERR_RKEY_VIOLATION, class C), drops
// everything queued behind it, and fails the responder. The NAK carries
// the PSN of the READ request the train answers, as rxe's acknowledge
// sends the request packet's PSN: a requester accepts it whichever of
// the responses before the fault it received (rxe check_psn takes an
// ACKNOWLEDGE before its oldest PSN inside a read train), whereas a NAK
// for the response that could not be sent is dropped, as a response after
// a gap, by a requester that lost one of the responses before it.
//
// The fault is the failure reported even if a request after the READ
// failed the responder already: that request's NAK, queued behind the
// train, is dropped with it, and kernel rxe, which answers a READ whole
// before it looks at the next request, fails on the READ (read_reply).
//
// The completions held (hold) are completed as rxe completes them, since
// it runs the request the stream answers (a READ, or a duplicate READ
// served again: duplicate_request, then read_reply's rxe_recheck_mr) only
// once every request received before it has run, and none after it:
//   - those of the requests received before it are posted as they are, in
//     order (heldBefore; a CQ overflow among them fails the responder
//     there instead, class G with no NAK, as rxe fails before it reaches
//     the READ);
//   - the receive WQE of a message in progress when it was received
//     completes with IBV_WC_REM_ACCESS_ERR, as rxe's class C error
//     completes the WQE in use (do_complete), whether the message has
//     ended since (its completion held) or not (faultInProgress);
//   - those of the requests received after it, never executed as far as
//     rxe's order goes, stay in r.held and are flushed with the rest
//     (Flush), WR_FLUSH_ERR whatever they would have reported.
//
// A READ's own train has no completion held before it (they leave the
// queue ahead of it); an extra stream of a re-read under selective repeat
// goes ahead of the completions of the requests between the READ and the
// re-read, which are posted here.
func (r *Responder) readFault(it *outItem) {
	before, mid := r.heldBefore(it), it.midMsg
	*it = outItem{kind: outNAK, syn: packet.NAKSyndrome(packet.NAKRemoteAccess), psn: it.req, msn: r.msn, fatal: true}
	r.q.truncate(1)
	if !r.postHeld(before) {
		return
	}
	r.failed = false
	r.fail(verbs.WCRemAccessErr, StateErrRKeyViolation)
	if mid {
		r.faultInProgress()
	}
}

// heldBefore returns how many of the completions still held (hold) belong
// to requests received before the request that the READ response stream
// it answers: those held when that request was received
// (outItem.heldMark) and not posted since.
func (r *Responder) heldBefore(it *outItem) int {
	taken := r.heldIn - uint64(r.held.Len())
	if it.heldMark <= taken {
		return 0
	}
	return int(min(it.heldMark-taken, uint64(r.held.Len())))
}

// faultInProgress completes, with IBV_WC_REM_ACCESS_ERR, the receive WQE
// of the message that was in progress when the request of a faulting
// READ response stream was received (readFault): the oldest completion
// still held, if the message has ended since, else the WQE in use. A
// receive CQ that overflows fails the responder there (class G) and drops
// the NAK, as rxe's do_complete returns ERR_CQ_OVERFLOW before its
// acknowledge.
func (r *Responder) faultInProgress() {
	var id uint64
	switch {
	case r.held.Len() > 0:
		id = r.held.Front().wc.ID
		r.held.Pop()
	case r.wqe.valid:
		id = r.wqe.id
		r.wqe.valid = false
		r.inMsg = msgNone
	default:
		return
	}
	r.wc = verbs.WC{ID: id, Status: verbs.WCRemAccessErr, Opcode: verbs.WCRecv, QPNum: r.cfg.QPN}
	if !r.post(&r.wc, false) {
		r.overflowHeld(false, 0, 0)
	}
}
