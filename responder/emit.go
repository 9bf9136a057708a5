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
		// Completions held behind the item just taken are posted with
		// it, not on the next call.
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
// The completions of the requests after the READ, held until the train
// had gone (hold), are not posted: their receive WQEs, never executed as
// far as rxe's order goes, stay in r.held and are flushed with the rest
// (Flush), WR_FLUSH_ERR whatever they would have reported.
func (r *Responder) readFault(it *outItem) {
	*it = outItem{kind: outNAK, syn: packet.NAKSyndrome(packet.NAKRemoteAccess), psn: it.req, msn: r.msn, fatal: true}
	r.q.truncate(1)
	r.failed = false
	r.fail(verbs.WCRemAccessErr, StateErrRKeyViolation)
}
