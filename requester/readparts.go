package requester

import (
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Go-back-N repair of the oldest READ when it is asked for in parts
// (readchunk.go: after a loss, a READ longer than the smallest window is
// asked for in parts of that many packets, each an ordinary READ request).
//
// rxe's completer takes responses in PSN order only. When a response of
// one part is lost while the next part's responses are on their way, it
// drops those and asks again from the hole; and since the next part's
// request was already sent, nothing asks for that part again until the
// retransmit timer rewinds the READ. Here, while readAheadOK holds,
//
//   - a response of the oldest READ that arrives after a missing one is
//     placed at its offset (response PSN origFirst + k carries bytes
//     k × PMTU on, IBA 9.7.5.1.4) and its PSN marked received, in the
//     selective-repeat bitmap, which go-back-N does not otherwise use
//     (placePart);
//   - the hole is asked for again from its first PSN to the end of its
//     part (errorRetry, rereadOldest: a duplicate READ request, IBA
//     9.7.5.1.1, which rxe and NICs serve from their copy of the part's
//     request; a re-read never reaches into the next part, readChunk);
//   - when the responses before the marked ones have come, the oldest
//     unacknowledged PSN moves over the marked ones (advanceParts); if a
//     later response has come while the PSN now oldest has not, and no
//     re-read of its part is on its way, that PSN was lost too and its
//     part is re-read at once.
//
// Responses to PSNs not yet asked for, ones already marked, and any
// beyond the tracked PSNs are dropped as before; a malformed one fails
// the READ as doRead would.

// partsAheadOK reports whether the READ response p, after a missing
// response of the oldest WQE w, is placed by placePart: w is a READ asked
// in parts (all of them, or some while the window lets the rest out;
// readFits keeps those within the largest window), readAheadOK holds, p
// is a READ response and p's PSN is within what w has asked for and the
// tracked PSNs.
func (r *Requester) partsAheadOK(w *wqe, p *packet.Packet) bool {
	if !r.multiPart(w) || w.state == wqePosted || !r.readAheadOK() {
		return false
	}
	switch p.Opcode() {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle,
		packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly:
	default:
		return false
	}
	psn := p.PSN()
	return uint32(psn.Diff(w.origFirst)) < r.srRequested(w) && int(psn.Diff(r.compPSN)) < srTrack
}

// placePart places the READ response p of the oldest WQE w past a hole
// (partsAheadOK holds) and returns the completer's next state: the gap
// retry, which asks for the hole once per episode, or an error for a
// malformed response or one that cannot be placed.
func (r *Requester) placePart(p *packet.Packet, w *wqe) CompState {
	psn := p.PSN()
	if r.sr.srGot(psn) {
		r.c.ResponsesDropped++
		return CompErrorRetry
	}
	op := p.Opcode()
	data := p.Payload()
	off := uint32(psn.Diff(w.origFirst)) * r.pmtu
	if op != packet.RCRDMAReadResponseMiddle && !p.AETH().Syndrome().IsACK() ||
		!r.srReadShape(op, uint32(len(data)), w.length-off) {
		return r.badResponse(w)
	}
	if !r.srPlace(w, off, data) {
		w.status = verbs.WCLocProtErr
		return CompError
	}
	r.sr.setGot(psn)
	r.c.ReadBytes += uint64(len(data))
	r.c.ReadResponsesAhead++
	return CompErrorRetry
}

// advanceParts runs after each response under go-back-N: while the
// response at the oldest unacknowledged PSN of the oldest WQE, a READ in
// parts, was placed ahead (placePart), it takes it as received in order;
// it completes the READ once all its responses are in, and re-reads the
// part of the PSN it stops at if that PSN was asked for, a later response
// has come and no re-read of that part is on its way, starting a retry
// episode (errorRetry asks for nothing more until the next progress).
func (r *Requester) advanceParts() {
	if r.sr.ngot == 0 || r.cfg.SelectiveRepeat || r.stopped || r.head == r.tail {
		return
	}
	w := r.slot(r.head)
	if w.kind != kindRead || !w.started || w.state == wqePosted || !r.multiPart(w) {
		return
	}
	moved := false
	for r.sr.srGot(r.compPSN) {
		k := uint32(r.compPSN.Diff(w.origFirst))
		r.sr.clearGot(r.compPSN)
		w.rcvd = min(w.length, (k+1)*r.pmtu)
		r.compPSN = r.compPSN.Next()
		moved = true
	}
	if moved {
		w.place.Seek(w.sges, w.rcvd)
		// The next response may continue a part (MIDDLE, LAST) or start
		// one (FIRST, ONLY: checkAck's restart for READs in parts).
		r.compOp = uint8(packet.RCRDMAReadResponseMiddle)
		if w.rcvd == w.length && w.sentAll {
			r.compOp = compOpNone
			r.finish(w, verbs.WCSuccess)
			return
		}
	}
	// A PSN not yet asked for (after a rewind) is left to the send cursor.
	if r.sr.ngot > 0 && w.rereadPart != r.partOf(w, r.compPSN)+1 &&
		uint32(r.compPSN.Diff(w.origFirst)) < r.srRequested(w) {
		r.c.ReadGaps++
		r.c.CompleterRetryErr++
		r.retryLog |= RetryPartsHole
		// A retry episode, as errorRetry's re-read of a hole starts one:
		// responses still on their way that passed the hole before this
		// re-read left (the rest of a later request's stream) start no
		// second re-read of it; the next in-order response ends it.
		r.startedRetry, r.nakRetry = true, true
		r.rereadOldest(w)
	}
}

// partOf returns the index of the part of the READ w (asked for in parts)
// that response PSN psn belongs to.
func (r *Requester) partOf(w *wqe, psn packet.PSN) uint32 {
	return uint32(psn.Diff(w.origFirst)) / w.parts
}

// rereadOldest asks for the rest of the oldest READ w again from the
// oldest unacknowledged PSN (readAgain), noting which part that re-read
// covers when w is asked for in parts.
func (r *Requester) rereadOldest(w *wqe) {
	if r.multiPart(w) {
		w.rereadPart = r.partOf(w, r.compPSN) + 1
	}
	r.readAgain(w)
}

// forgetParts clears the marks of every response placed ahead.
func (r *Requester) forgetParts() {
	r.sr.got, r.sr.ngot = [srTrack / 64]uint64{}, 0
}

// forgetMarks clears the marks of the responses of w placed ahead
// (placePart, markAhead) when w completes, fails, is flushed or is reset
// by a go-back-N rewind with some of them still set, so that they cannot
// be taken for responses of PSNs sent later; the marks of the READs after
// it stay. For a WQE that is no started READ, or a READ of srTrack
// responses or more (whose PSNs cover every mark), it clears them all.
func (r *Requester) forgetMarks(w *wqe) {
	n := int(r.pkts(w.length))
	if w.kind != kindRead || !w.started || n >= srTrack {
		r.forgetParts()
		return
	}
	for k := 0; k < n && r.sr.ngot > 0; k++ {
		r.sr.clearGot(w.origFirst.Add(k))
	}
}
