package requester

import (
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Go-back-N READs repaired one hole at a time (docs/recovery.md, "READ
// responses lost under go-back-N").
//
// rxe's completer takes READ responses in PSN order only: on a gap in the
// oldest READ it asks again from the missing PSN and goes back N, asking
// again for every READ sent after it too, whose responses were on their
// way and were dropped as out of order. Nothing in the wire needs that: a
// READ request with an old PSN is a duplicate every IBA responder serves
// (IBA 9.7.5.1.1; rxe duplicate_request), and new requests may follow it
// with new PSNs. So while every WQE started from the oldest on is a READ,
// asked for whole or in parts (readAheadOK), this requester
//
//   - places the responses of the READs after the oldest one as they come,
//     in order within each READ (placeAhead), and, for a READ asked in
//     parts, also those after a hole in it (markAhead): the parts after
//     the hole's come as streams of their own and are kept;
//   - on a gap in any of those READs re-reads that READ's rest at once, at
//     the PSN of its first missing response and without moving its send
//     cursor (readAgain, buildRest), once until that READ's responses make
//     progress again: the responses of each READ come as one stream, so
//     the rest of the stream that overtook the hole is no news; and so
//     does a response of a later READ for every READ before it still
//     short (passedAhead), whose last responses, or only one, were lost;
//   - completes a READ whose responses all came ahead as soon as the ones
//     before it complete, and takes one that came partly ahead from where
//     its responses stopped (completeAhead).
//
// A responder that drops the stream it was sending when a duplicate
// arrives (older rxe) leaves a READ short without a gap to see: the next
// READ's responses show it (passedAhead), and if none comes, the recovery
// timer's probe re-reads its rest once it is the oldest. The oldest READ
// asked in parts keeps its own responses after a hole too (readparts.go);
// a later READ asked in parts is placed part by part, each part's stream
// starting with FIRST, and its responses placed past a hole are taken in
// order as the hole is repaired (takeMarksAhead). A SEND, WRITE or atomic
// among the READs, selective repeat and --recovery=off keep rxe's
// go-back-N, and so do a sequence error NAK, an ACK past a READ and a
// timeout: a responder that NAKed a lost request dropped every request
// after it.

// readAheadOK reports whether gaps in READ responses are repaired by
// re-reading the READs that have them: go-back-N with recovery on, and
// every WQE started from the oldest one on is a READ, asked for whole or
// in parts (all of them out, or some: the one at the send cursor;
// readparts.go for the oldest). The WQEs a go-back-N retry has rewound
// and the send cursor has not asked for again yet (posted, from the
// cursor on) are the cursor's: the oldest one is sent already, and a gap
// in a READ before them re-reads that READ alone, instead of a second
// go-back-N that asked again for the READs the cursor had just sent,
// whose responses were on their way.
func (r *Requester) readAheadOK() bool {
	if r.cfg.SelectiveRepeat || r.rec.cfg.Off || r.head == r.tail {
		return false
	}
	for i := r.head; i != r.tail; i++ {
		w := r.slot(i)
		if i != r.head && (!w.started || w.state == wqePosted && i >= r.cur) {
			break
		}
		if w.kind != kindRead || w.state == wqePosted {
			return false
		}
	}
	return true
}

// multiPart reports whether the READ w is asked for in more than one
// request part (readchunk.go).
func (r *Requester) multiPart(w *wqe) bool {
	return r.readInParts(w) && r.pkts(w.length) > w.parts
}

// readAgain asks for the rest of the READ w again, from its first missing
// response: NextPacket sends the request (nextReread). It is errorRetry's
// retry for a gap in the oldest READ when readAheadOK holds (one per
// episode, counted against retry_cnt as any retry), placeAhead's for a
// gap in a later one and advanceParts' for a hole found in the oldest.
//
// Such a repair re-reads one READ's (or part's) rest and resends nothing
// else, so it does not shrink the adaptive window, which bounds what a
// go-back-N costs (onResponse leaves readRepairs out of the losses it
// counts); it keeps long READs asked in parts for partsHold READs
// (readParts), so that the next hole costs the rest of a part.
func (r *Requester) readAgain(w *wqe) {
	w.rereadAsked, w.rereadDue = true, true
	r.rereadDue = true
	r.readRepairs++
	r.readsSinceRepair = 0
}

// partsHold is how many READs complete after a READ repair (readAgain)
// before long READs are asked for whole again, while the window is at its
// largest (readParts).
const partsHold = 16

// aheadWQE returns the READ after the oldest WQE whose response PSNs hold
// psn, or nil: one the send cursor has asked for in this round (a READ
// rewound and not asked for again answers nothing of this round).
func (r *Requester) aheadWQE(psn packet.PSN) *wqe {
	for i := r.head + 1; i != r.tail; i++ {
		v := r.slot(i)
		if !v.started || v.state == wqePosted || psn.Before(v.origFirst) {
			return nil
		}
		if !psn.After(v.lastPSN) {
			return v
		}
	}
	return nil
}

// placeAhead places the READ response p, past the oldest READ, into the
// READ after it that p answers, if p is that READ's next response (the
// caller has checked readAheadOK). A response after a missing one asks for
// that READ's rest again, once until its responses make progress; a
// response already placed (a replay) is ignored. Opcode, AETH and length
// are checked as doRead and checkAck check them (a re-read's stream may
// start with FIRST or ONLY at the re-read's PSN, and so may each part of
// a READ asked in parts); a response that fails them is dropped like one
// out of order.
func (r *Requester) placeAhead(p *packet.Packet) {
	v := r.aheadWQE(p.PSN())
	if v == nil {
		return
	}
	r.passedAhead(v)
	if v.aheadDone {
		return
	}
	d := uint64(p.PSN().Diff(v.origFirst)) * uint64(r.pmtu)
	switch {
	case d < uint64(v.rcvd):
		return // already placed
	case d > uint64(v.rcvd):
		if r.markAhead(v, p) {
			r.askRestAhead(v)
		} else {
			r.readGapAhead(v)
		}
		return
	}
	op := p.Opcode()
	n := uint32(len(p.Payload()))
	// A stream starts the READ, a re-read (at its first PSN) or, for a
	// READ asked in parts, a part.
	start := v.rcvd == 0 || p.PSN() == v.firstPSN || v.parts > 0 && v.rcvd/r.pmtu%v.parts == 0
	ok := false
	switch op {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseOnly:
		ok = start
	case packet.RCRDMAReadResponseMiddle, packet.RCRDMAReadResponseLast:
		ok = v.rcvd > 0
	}
	ok = ok && r.readLenOK(v, op, n)
	if ok && op != packet.RCRDMAReadResponseMiddle {
		ok = p.AETH().Syndrome().IsACK()
	}
	if !ok || !r.scatter(v, p.Payload()) {
		r.readGapAhead(v)
		return
	}
	v.rcvd += n
	v.rereadAsked = false
	r.c.ReadBytes += uint64(n)
	r.c.ReadResponsesAhead++
	r.takeMarksAhead(v)
	v.aheadDone = v.rcvd == v.length
}

// markAhead places the READ response p of the READ v (after the oldest)
// past a response of v still missing, when v is asked in parts, and
// reports whether it did. Each part's request is answered as a stream of
// its own (IBA 9.7.5.1.3; rxe's responder takes the next request once a
// READ's responses are all sent), so the parts after a hole arrive whole
// and in order while the hole's part is re-read; dropped, they had to be
// asked for again part by part. The response is placed at its offset
// (response PSN origFirst + k carries bytes k × PMTU on, IBA 9.7.5.1.4)
// and its PSN marked in the bitmap the oldest READ's parts use
// (readparts.go), if it is within what v has asked for and the tracked
// PSNs, not marked already (a replay passing the hole is a gap again),
// and of the right shape (srReadShape, and an ACK syndrome on all but
// MIDDLE). takeMarksAhead, and advanceParts once v is the oldest, take
// the marked responses in order.
func (r *Requester) markAhead(v *wqe, p *packet.Packet) bool {
	if !r.multiPart(v) {
		return false
	}
	psn := p.PSN()
	k := uint32(psn.Diff(v.origFirst))
	if k >= r.srRequested(v) || int(psn.Diff(r.compPSN)) >= srTrack || r.sr.srGot(psn) {
		return false
	}
	op := p.Opcode()
	data := p.Payload()
	off := k * r.pmtu
	if op != packet.RCRDMAReadResponseMiddle && !p.AETH().Syndrome().IsACK() ||
		!r.srReadShape(op, uint32(len(data)), v.length-off) || !r.srPlace(v, off, data) {
		return false
	}
	r.sr.setGot(psn)
	r.c.ReadBytes += uint64(len(data))
	r.c.ReadResponsesAhead++
	return true
}

// takeMarksAhead runs after a response of the READ v (after the oldest)
// was placed in order: it moves v's bytes received over the responses
// markAhead placed that now follow them. If the next response is then
// missing while a later one of v has come, and the latest re-read of v
// did not start in that response's part, that response was lost from a
// stream that has passed it (a part whose first responses were lost, or
// one the re-read did not cover), and v's rest is asked for again.
func (r *Requester) takeMarksAhead(v *wqe) {
	if r.sr.ngot == 0 || !r.multiPart(v) {
		return
	}
	moved := false
	for v.rcvd < v.length {
		psn := v.origFirst.Add(int(v.rcvd / r.pmtu))
		if !r.sr.srGot(psn) {
			break
		}
		r.sr.clearGot(psn)
		v.rcvd = min(v.length, v.rcvd+r.pmtu)
		moved = true
	}
	if moved {
		v.place.Seek(v.sges, v.rcvd)
	}
	if v.rcvd < v.length && v.rereadPart != r.partOf(v, v.origFirst.Add(int(v.rcvd/r.pmtu)))+1 && r.markedAfter(v) {
		r.askRestAhead(v)
	}
}

// markedAfter reports whether a response of the READ v after the first
// one it lacks has been placed past it (markAhead).
func (r *Requester) markedAfter(v *wqe) bool {
	for k := v.rcvd/r.pmtu + 1; k < r.srRequested(v); k++ {
		psn := v.origFirst.Add(int(k))
		if int(psn.Diff(r.compPSN)) >= srTrack {
			break
		}
		if r.sr.srGot(psn) {
			return true
		}
	}
	return false
}

// passedAhead asks again for the rest of each READ between the oldest
// WQE and the READ v that a response of v has passed: the responder
// answers READs in the order it executes them, each as one stream (IBA
// 9.7.5.1.3; rxe's responder finishes a READ's responses before it takes
// the next request), so a READ before v still short of responses, its
// rest not asked for again since its responses last made progress, lost
// the responses it lacks, its last ones or its only one. No gap within
// that READ shows such a loss: without this its rest waited until it was
// the oldest and the recovery timer's probe asked for it. A READ asked in
// parts is left to its parts' own rules (readparts.go).
func (r *Requester) passedAhead(v *wqe) {
	for i := r.head + 1; i != r.tail; i++ {
		u := r.slot(i)
		if u == v {
			return
		}
		if !u.aheadDone && !r.multiPart(u) {
			r.askRestAhead(u)
		}
	}
}

// readGapAhead handles a response of the READ v (after the oldest) that
// did not follow the ones placed: the first since v's responses last made
// progress asks for v's rest again.
func (r *Requester) readGapAhead(v *wqe) {
	r.c.ResponsesDropped++
	r.askRestAhead(v)
}

// askRestAhead asks for the rest of the READ v (after the oldest) again,
// unless it was asked for since v's responses last made progress.
func (r *Requester) askRestAhead(v *wqe) {
	if !v.rereadAsked {
		r.c.ReadGaps++
		r.c.CompleterRetryErr++
		r.retryLog |= RetryReadAhead
		if r.multiPart(v) {
			// The re-read covers the rest of this part (readChunk);
			// takeMarksAhead and advanceParts ask for the next one.
			v.rereadPart = r.partOf(v, v.origFirst.Add(int(v.rcvd/r.pmtu))) + 1
		}
		r.readAgain(v)
	}
}

// completeAhead runs after each response under go-back-N: while the
// oldest WQE is a READ whose responses came ahead of the ones before it,
// it completes it if they all came, or else moves the oldest
// unacknowledged PSN past those that did, so that the rest (of its
// stream, or of a re-read of it) is taken in order.
func (r *Requester) completeAhead() {
	for r.head != r.tail && !r.stopped {
		w := r.slot(r.head)
		if w.kind != kindRead || !w.started || r.compPSN != w.origFirst || !w.aheadDone && w.rcvd == 0 {
			return
		}
		if w.aheadDone {
			r.compPSN, r.compOp = w.lastPSN.Next(), compOpNone
			r.finish(w, verbs.WCSuccess)
			continue
		}
		r.compPSN = w.origFirst.Add(int(w.rcvd / r.pmtu))
		r.compOp = uint8(packet.RCRDMAReadResponseMiddle)
		return
	}
}

// buildRest builds into buf the packet the started WQE i starts again
// with, without moving the send cursor: for a READ a request for the
// bytes not yet received, at the PSN of the first response missing (rxe
// req_retry's rule), which becomes the WQE's first PSN (the responses of
// the request start there); for the oldest SEND or WRITE the packet at the
// oldest unacknowledged PSN; for an ATOMIC_WRITE its 8 bytes again. It
// returns the length, 0 if there is nothing to send; the WQE's cursors,
// the send cursor and the AckReq count are left as they were.
func (r *Requester) buildRest(i uint64, buf []byte) int {
	w := r.slot(i)
	if !w.started || w.state == wqePosted || w.kind == kindRead && !r.rereadable(i, w) {
		return 0
	}
	psn := r.compPSN
	if w.kind == kindRead && i != r.head {
		psn = w.origFirst.Add(int(w.rcvd / r.pmtu))
	}
	saved := *w
	cur, next, noAck := r.cur, r.psn, r.noAck
	r.cur, r.psn = i, psn
	switch {
	case w.kind.segmented():
		r.seekPSN(w, psn)
	case w.kind == kindRead:
		w.off = w.rcvd
	case w.kind == kindAtomicWrite:
		w.off, w.snd = 0, sge.Cursor{}
	}
	n := r.build(w, buf)
	first := w.firstPSN
	*w = saved
	if w.kind == kindRead {
		w.firstPSN = first
	}
	r.cur, r.psn, r.noAck = cur, next, noAck
	return n
}

// rereadable reports whether the started READ w (WQE i) has responses
// missing that it asked for: it is not whole, and unless it is the oldest
// (whose rest buildRest asks for from the oldest unacknowledged PSN),
// some response of the requests it sent has not come. A READ whose
// responses all came (from two streams, after a re-read was asked for)
// would otherwise ask for 0 bytes at the PSN after its own, the next
// request's, which the responder then holds as an empty READ; and the
// parts of a READ asked in parts that the send cursor has not asked for
// yet are the cursor's to ask, at its own PSN: a re-read of them put the
// READ's data ahead of the cursor, which then asked for a part with the
// PSN of one and the offset of the next (readChunk).
func (r *Requester) rereadable(i uint64, w *wqe) bool {
	return w.rcvd < w.length && (i == r.head || w.rcvd < w.off)
}

// rereadPending reports whether a re-read readAgain asked for is still to
// be sent, and forgets those that no longer are.
func (r *Requester) rereadPending() bool {
	if !r.stopped && r.readAheadOK() {
		for i := r.head; i != r.tail; i++ {
			w := r.slot(i)
			if !w.started {
				break
			}
			if w.rereadDue {
				if w.kind == kindRead && !r.rereadable(i, w) {
					w.rereadDue = false
					continue
				}
				return true
			}
		}
	}
	r.rereadDue = false
	return false
}

// nextReread builds the oldest re-read readAgain asked for, or returns 0 if
// none is left to send (the READs completed, or a go-back-N retry rewound
// them).
func (r *Requester) nextReread(now time.Time, buf []byte) int {
	if r.readAheadOK() {
		for i := r.head; i != r.tail; i++ {
			w := r.slot(i)
			if !w.started {
				break
			}
			if !w.rereadDue {
				continue
			}
			w.rereadDue = false
			high := r.highPSN
			if n := r.buildRest(i, buf); n > 0 {
				if i == r.head {
					r.forgetOldStream(w)
				}
				r.c.ReadHoleRereads++
				r.onSent(now, w.firstPSN, true, high)
				return n
			}
		}
	}
	r.rereadDue = false
	return 0
}
