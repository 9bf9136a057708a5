package responder

import (
	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// maxDMALen is the largest RETH DMA length accepted (IBA C9-94; rxe
// check_length).
const maxDMALen = 1 << 31

// getReq mirrors rxe get_req: it drops what cannot be processed.
func (r *Responder) getReq() State {
	if r.failed || r.flushed || r.kind == kindNone || r.pkt.Opcode().Transport() != packet.TransportRC {
		r.ctrs.Dropped++
		return StateExit
	}
	// Every request queues at most one output item, and one more for a
	// receive completion held behind a READ response stream (holding):
	// one that takes a receive WQE, or any while one is in use (an error
	// completes it). With no room, drop the packet before it changes any
	// state: to the requester it is a loss.
	if r.q.Free() < 1 || r.q.Free() < 2 && r.holding() && (r.wqe.valid || r.mask&packet.MaskRWR != 0) {
		r.ctrs.Dropped++
		return StateExit
	}
	return StateCheckPSN
}

// checkPSN mirrors rxe check_psn for RC (IBA 9.7.5.1.1, C9-98..C9-100).
// A PSN after the expected one returns StateErrPSNOutOfSeq, which Receive
// hands to outOfSequence before going on (so that checkPSN stays small
// enough to be inlined on the in-order path).
func (r *Responder) checkPSN() State {
	switch d := r.psn.Diff(r.epsn); {
	case d > 0:
		return StateErrPSNOutOfSeq
	case d < 0:
		r.ctrs.DuplicateRequest++
		return StateDuplicateRequest
	}
	r.nakSent = false
	return StateCheckOpSeq
}

// outOfSequence handles a PSN after the expected one (rxe check_psn): one
// PSN Sequence Error NAK per gap (StateErrPSNOutOfSeq), later packets
// dropped (StateCleanup) until ePSN arrives (rxe sent_psn_nak). Under
// selective repeat the packet goes to the out-of-order buffer instead,
// except while an RNR NAK is outstanding.
func (r *Responder) outOfSequence() State {
	switch {
	case r.nakSent:
		r.ctrs.OutOfSeqDropped++
		return StateCleanup
	case r.cfg.SelectiveRepeat:
		return r.receiveOOO()
	}
	r.nakSent = true
	r.ctrs.OutOfSeqRequest++
	return StateErrPSNOutOfSeq
}

// checkOpSeq mirrors rxe check_op_seq for RC (IBA 9.7.5.1.2): inside a SEND
// only SEND MIDDLE/LAST may follow, inside a WRITE only WRITE MIDDLE/LAST,
// and outside a message no MIDDLE or LAST.
func (r *Responder) checkOpSeq() State {
	start := r.mask&packet.MaskStart != 0
	switch r.inMsg {
	case msgSend:
		if r.kind != kindSend || start {
			return StateErrMissingOpcodeLastC
		}
	case msgWrite:
		if r.kind != kindWrite || start {
			return StateErrMissingOpcodeLastC
		}
	default:
		if (r.kind == kindSend || r.kind == kindWrite) && !start {
			return StateErrMissingOpcodeFirst
		}
	}
	return StateCheckOpValid
}

// checkOpValid mirrors rxe check_op_valid/check_qp_attr_access: the QP's
// access flags must allow the operation; a violation is an Invalid Request
// (not a Remote Access Error).
func (r *Responder) checkOpValid() State {
	acc := r.cfg.Access
	var need verbs.AccessFlags
	switch r.kind {
	case kindRead:
		need = verbs.AccessRemoteRead
	case kindWrite, kindAtomicWrite:
		need = verbs.AccessRemoteWrite
	case kindAtomic:
		need = verbs.AccessRemoteAtomic
	case kindFlush:
		need = flushAccess(r.pkt.FETH())
	}
	if acc&need != need {
		return StateErrUnsupportedOpcode
	}
	return StateCheckResource
}

// FETH placement type bits and selectivity level (IBA memory placement
// extensions; rxe IB_FLUSH_GLOBAL/IB_FLUSH_PERSISTENT, IB_FLUSH_MR).
const (
	flushGlobal     = 1
	flushPersistent = 2
	flushLevelMR    = 1
)

// flushAccess returns the access rights a FLUSH needs.
func flushAccess(f packet.FETH) verbs.AccessFlags {
	var need verbs.AccessFlags
	plt := f.PlacementType()
	if plt&flushGlobal != 0 {
		need |= verbs.AccessFlushGlobal
	}
	if plt&flushPersistent != 0 {
		need |= verbs.AccessFlushPersistent
	}
	return need
}

// checkResource mirrors rxe check_resource: READ/atomic/FLUSH/ATOMIC_WRITE
// need responder resources; the first packet of a SEND and a WRITE WITH
// IMMEDIATE's last packet need a receive WQE, else RNR.
func (r *Responder) checkResource() State {
	if r.kind.usesResource() {
		// rxe trusts the requester to respect max_dest_rd_atomic and
		// recycles its resources; only zero resources is an error.
		if len(r.res) == 0 || r.cfg.MaxDestRdAtomic <= 0 {
			return StateErrTooManyRDMAAtmReq
		}
		return StateCheckLength
	}
	if r.mask&packet.MaskRWR != 0 {
		if r.env.RQ == nil {
			return StateErrRNR
		}
		wr, ok := r.env.RQ.Peek()
		if !ok {
			return StateErrRNR
		}
		r.takeWQE(wr)
		r.env.RQ.Pop()
	}
	return StateCheckLength
}

// takeWQE copies a posted receive WR into the responder.
func (r *Responder) takeWQE(wr *verbs.RecvWR) {
	w := &r.wqe
	w.valid = true
	w.id = wr.ID
	w.sges = append(w.sges[:0], wr.SGList...)
	w.total = wr.Length()
	w.placed, w.cur = 0, sge.Cursor{}
}

// checkLength mirrors rxe check_length (IBA 9.7.5.1.4, C9-92..C9-94):
// FIRST and MIDDLE carry exactly a PMTU, LAST 1..PMTU, ONLY 0..PMTU; a RETH
// DMA length is at most 2^31.
func (r *Responder) checkLength() State {
	if !lengthFits(r.pkt, r.payloadLen(), r.mtu) {
		return StateErrLength
	}
	return StateCheckRKey
}

// lengthFits applies rxe check_length's rules (RC and UC) to request p
// carrying n payload bytes on a path MTU of mtu bytes: FIRST and MIDDLE
// carry exactly a PMTU, LAST 1 to a PMTU, ONLY up to a PMTU, and a RETH's
// DMA length is at most maxDMALen.
func lengthFits(p packet.Packet, n, mtu int) bool {
	if m := p.Mask(); m&packet.MaskPayload != 0 {
		start, end := m&packet.MaskStart != 0, m&packet.MaskEnd != 0
		switch {
		case start && end:
			if n > mtu {
				return false
			}
		case !end:
			if n != mtu {
				return false
			}
		default:
			if n == 0 || n > mtu {
				return false
			}
		}
	}
	reth := p.RETH()
	return reth == nil || reth.DMALen() <= maxDMALen
}

// checkRKey mirrors rxe check_rkey: it resolves the R_Key of an RDMA or
// atomic request to memory, with the range and rights the operation needs,
// and checks that a WRITE's packets add up to its DMA length.
func (r *Responder) checkRKey() State {
	switch r.kind {
	case kindWrite, kindAtomicWrite:
		return r.checkWriteRKey()
	case kindRead:
		reth := r.pkt.RETH()
		r.rd = readReq{psn: r.psn, va: reth.VA(), rkey: reth.RKey(), length: reth.DMALen()}
		if r.rd.length == 0 {
			// C9-88: a zero-length READ names no memory.
			r.rd.rkey = 0
			return StateExecute
		}
		if _, ok := r.env.Mem.Remote(r.rd.rkey, r.rd.va, r.rd.length, verbs.AccessRemoteRead); !ok {
			return StateErrRKeyViolation
		}
	case kindAtomic:
		a := r.pkt.AtomicETH()
		mem, ok := r.env.Mem.Remote(a.RKey(), a.VA(), 8, verbs.AccessRemoteAtomic)
		if !ok || len(mem) != 8 {
			return StateErrRKeyViolation
		}
		r.dst = mem
	case kindFlush:
		reth, feth := r.pkt.RETH(), r.pkt.FETH()
		if feth.SelectivityLevel() == flushLevelMR {
			// The whole region: its VA and DMA length name nothing,
			// so only key and rights are checked (rxe check_rkey
			// skips mr_check_range for IB_FLUSH_MR).
			if !r.env.Mem.RemoteRegion(reth.RKey(), flushAccess(feth)) {
				return StateErrRKeyViolation
			}
			break
		}
		if _, ok := r.env.Mem.Remote(reth.RKey(), reth.VA(), reth.DMALen(), flushAccess(feth)); !ok {
			return StateErrRKeyViolation
		}
	}
	return StateExecute
}

// checkWriteRKey is checkRKey for RDMA WRITE and ATOMIC_WRITE. The FIRST or
// ONLY packet's RETH starts the message; MIDDLE and LAST continue it and
// re-resolve the rest of the range, so that a region deregistered
// mid-message fails cleanly.
func (r *Responder) checkWriteRKey() State {
	if reth := r.pkt.RETH(); reth != nil {
		r.wva, r.wrkey = reth.VA(), reth.RKey()
		r.wresid, r.wlen = reth.DMALen(), reth.DMALen()
	}
	n := r.payloadLen()
	if r.kind == kindWrite && r.mask&packet.MaskStart != 0 && r.wlen == 0 {
		// C9-88: a zero-length WRITE names no memory. It must then carry
		// no payload either (rxe does not check; it would fault).
		if n != 0 {
			return StateErrLength
		}
		return StateExecute
	}
	mem, ok := r.env.Mem.Remote(r.wrkey, r.wva, r.wresid, verbs.AccessRemoteWrite)
	if !ok || len(mem) != int(r.wresid) {
		return StateErrRKeyViolation
	}
	if !writeFits(r.mtu, uint64(r.wresid), n, r.pkt.PadCnt(), r.mask&packet.MaskEnd != 0) {
		return StateErrLength
	}
	r.dst = mem[:n:n]
	return StateExecute
}

// writeFits reports whether a WRITE packet of n payload bytes and pad
// bytes of padding fits where rest bytes of its message remain, on a path
// MTU of mtu bytes (rxe check_rkey's resid test): a full PMTU without
// padding while more than a PMTU remains, else exactly the rest with the
// padding it needs. The last packet of the message (end) must bring it
// to its DMA length: the RETH's DMA length is the whole message's (IBA
// 9.4.3), and the completion of a WRITE with immediate reports it. Kernel
// rxe takes a full-PMTU LAST that ends the message short.
func writeFits(mtu int, rest uint64, n, pad int, end bool) bool {
	if rest > uint64(mtu) {
		return !end && n == mtu && pad == 0
	}
	return uint64(n) == rest && pad == packet.PadLen(n)
}
