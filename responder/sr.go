package responder

import (
	"math"
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// SRReReport is the number of further out-of-order arrivals after which
// the responder reports the hole at the expected PSN again while it
// persists (Config.SelectiveRepeat): a lost resend then costs about this
// many packets, not a timer.
const SRReReport = 16

// SRProgressEvery is the number of out-of-order arrivals after which the
// responder tells the requester how far it has received, with a progress
// report (a hole report naming no hole, queueProgress): the requester
// then counts the packets held here as arrived and keeps a window of new
// packets in flight while a hole is repaired.
const SRProgressEvery = 8

// SRReorderPackets is the number of requests received past the hole at
// the expected PSN (counting the one that opened it, and those that
// opened later holes) at which the responder sends a progress report,
// once per hole: the requester takes a hole as a loss,
// not a reordering, once the request packet four request packets past it
// is reported received (RFC 8985's reordering threshold counts packets;
// requester srHoldPackets), and without this report it would learn that
// only at the next of every SRProgressEvery arrivals. A request
// overtaken by up to three later ones fills its hole before. A READ
// request is one packet for as many PSNs as its responses, so the PSNs a
// hole report names received say nothing about how many packets
// followed the hole.
const SRReorderPackets = 4

// receiveOOO handles a request whose PSN is after the expected PSN under
// selective repeat, in place of IBA 9.7.5.1.1's PSN Sequence Error NAK
// (rxe check_psn): the packet is copied into the out-of-order buffer to be
// executed once the hole before it is filled, and a packet that opens a
// new hole (a PSN past everything held) draws one hole report for it. None
// of the request's other checks run now; they run when it executes.
func (r *Responder) receiveOOO() State {
	o := &r.ooo
	r.ctrs.OOODropped += uint64(o.purge(r.epsn))
	if o.sinceAt != r.epsn {
		o.since, o.sinceAt, o.reorderSent = 0, r.epsn, false
	}
	o.since++
	prev := r.epsn // the first PSN not received before this one
	if o.n > 0 && o.next.After(prev) {
		prev = o.next
	}
	var res holdResult
	if n := r.placeAhead(); n > 0 {
		// Held without the payload: the headers, then the pad and ICRC.
		b := r.pkt.Bytes()
		tail := len(b) - packet.ICRCSize - r.pkt.PadCnt()
		res = o.holdParts(b[:tail-n], b[tail:], n, r.psn, r.epsn, r.span())
		if res == holdKept {
			r.ctrs.OOOPlaced++
		}
	} else {
		res = o.hold(r.pkt.Bytes(), r.psn, r.epsn, r.span())
	}
	switch res {
	case holdKept:
		r.ctrs.OOOHeld++
		r.ctrs.OOOPeak = max(r.ctrs.OOOPeak, uint64(o.n))
		r.ctrs.OOOBytesPeak = max(r.ctrs.OOOBytesPeak, uint64(o.bytes))
		if r.psn.After(prev) {
			r.ctrs.SRHolePSNs += uint64(r.psn.Diff(prev))
			r.queueHole(prev, r.psn)
			if prev == r.epsn {
				o.since, o.reorderSent = 0, false // this is the report of the hole at ePSN
			}
		}
		// The hole at ePSN has SRReorderPackets requests past it (the
		// one that opened it and o.since more): one progress report
		// says so, tried again at each arrival until it is queued.
		due := o.since >= SRReorderPackets-1 && !o.reorderSent
		if o.sinceProgress++; o.sinceProgress >= SRProgressEvery || due {
			if r.queueProgress() && due {
				o.reorderSent = true
			}
		}
	case holdDuplicate:
		r.ctrs.OOODuplicates++
	default:
		r.ctrs.OOODropped++
	}
	if o.since >= SRReReport {
		r.reReport()
	}
	return StateCleanup
}

// placeAhead places the payload of an out-of-order request straight into
// memory, when the request continues the message in progress at ePSN and
// its offset in that message is known, and returns the payload length
// placed (0: nothing placed; the request is then held whole). Held
// without its payload, the request costs one copy, as one executed on
// arrival does, instead of a copy into the buffer and a second, from a
// slot gone cold, when the hole fills. The request's own checks still run
// when it executes in PSN order (drainOOO), with payloadLen in place of
// the missing payload.
//
// Only the message in progress is placed ahead: its packets cover
// disjoint bytes, while a later message may overlap an earlier one, whose
// bytes must land first (IBA 9.5, transaction ordering: messages execute
// in order). The exception is the SEND after a SEND in progress, which
// goes to the next receive WQE, whose buffers no earlier message writes
// (placeNext).
//   - A WRITE MIDDLE or LAST: the RETH of the message's FIRST, executed,
//     left the bytes still to come (wresid) at wva for ePSN, so the
//     packet d PSNs later belongs to the message if d PMTUs fall within
//     them, and its bytes are at wva + d×PMTU. The R_Key and rights are
//     checked for that range as checkWriteRKey checks them.
//   - A SEND MIDDLE or LAST: a SEND carries no length, so the packet
//     belongs to the message only if every PSN from ePSN to the one
//     before it is known to be a MIDDLE of it (sendRun): held as a SEND
//     MIDDLE, or missing but followed by a SEND MIDDLE or LAST, held or
//     this packet, which a message's last packet cannot be. Its bytes go
//     to the receive WQE in use at placed + d×PMTU. The packet after a
//     held LAST is not of the message: placed there, its bytes would
//     land past the message's end in a WQE that completes with success.
//
// The packet's opcode and length must be those its place demands (a
// MIDDLE a full PMTU, a LAST the rest); IETH (SEND with invalidate) and
// packets that consume a receive WQE (WRITE LAST with immediate) are held
// whole. Whatever the peer sends, placeAhead writes only where the
// message may write: the WRITE's R_Key range, while the QP grants remote
// write, or the receive WQE's SGEs.
func (r *Responder) placeAhead() int {
	const plain = packet.MaskIETH | packet.MaskRWR
	if r.noPlaceAhead || r.mask&packet.MaskStart != 0 || r.mask&plain != 0 || r.ooo.lookup(r.psn) >= 0 {
		return 0 // a copy of a held PSN is dropped unread (holdDuplicate)
	}
	d := uint64(r.psn.Diff(r.epsn)) // ≥ 1: receiveOOO runs after ePSN only
	mtu := uint64(r.mtu)
	middle := r.mask&packet.MaskMiddle != 0
	n := r.pkt.PayloadLen()
	switch {
	case r.inMsg == msgWrite && r.kind == kindWrite:
		if r.cfg.Access&verbs.AccessRemoteWrite == 0 {
			// checkOpValid runs on every packet (rxe check_op_valid):
			// access taken away since the FIRST refuses this one too.
			return 0
		}
		off := d * mtu
		if off >= uint64(r.wresid) {
			return 0
		}
		rest := uint64(r.wresid) - off
		if middle != (rest > mtu) || !writeFits(r.mtu, rest, n, r.pkt.PadCnt(), !middle) {
			return 0 // a MIDDLE where the LAST belongs, or the reverse, or a misfit length
		}
		mem, ok := r.env.Mem.Remote(r.wrkey, r.wva+off, uint32(n), verbs.AccessRemoteWrite)
		if !ok || len(mem) != n {
			return 0
		}
		sge.Copy(mem, r.pkt.Payload())
		return n
	case r.inMsg == msgSend && r.kind == kindSend && r.wqe.valid:
		if middle && n != r.mtu || !middle && (n == 0 || n > r.mtu) {
			return 0
		}
		w := &r.wqe
		if run := r.sendRun(); r.psn.Diff(run) > 1 || r.psn.Diff(run) == 1 && r.ooo.lookup(run) >= 0 {
			// Some PSN before the one before it is not known to be a
			// MIDDLE, or the one before it is held and is no SEND
			// MIDDLE (a LAST ends the message there): this packet
			// may be of a later message.
			return r.placeNext(run)
		}
		// The packet at ePSN and those after it are full MIDDLEs.
		return r.scatterAhead(w.sges, w.total, w.placed+d*mtu)
	}
	return 0
}

// placeNext places a SEND MIDDLE or LAST (not IETH; placeAhead has
// checked its opcode and length) of the SEND after the SEND in progress,
// whose run of known MIDDLEs ends at run (sendRun), into the receive WQE
// that SEND will take, and returns the payload length placed, or 0. That
// WQE is the oldest posted: the WQE of the SEND in progress left the
// queue when that SEND started, and on a receive queue of its own the
// responder alone takes WQEs, from the queue's head, one for each
// message that needs one, in message order (checkResource; rxe
// check_resource). With an SRQ another QP may take the head first, so
// nothing is placed.
//
// The packet's message must be known:
//   - run is held as the LAST of the SEND in progress (with immediate or
//     invalidate too: the IETH matters only when it executes), so that
//     every PSN from ePSN to it belongs to that SEND and the next
//     message starts after it;
//   - that next PSN is held as a SEND FIRST carrying a full PMTU, as a
//     FIRST must (IBA 9.7.5.1.4, checkLength); after an ONLY there is
//     nothing of its message to place;
//   - every PSN from the one after that FIRST to the one before the
//     packet is known to be a MIDDLE of that SEND, as sendRun knows it
//     for the SEND in progress (nextRun);
//
// and the WQE's buffers share no byte with those of the WQE in use
// (sge.Apart). The packet j PSNs after the FIRST then lands at j×PMTU in
// the WQE, within its SGEs (scatterAhead). When the SEND executes in
// order its FIRST takes this WQE, and each packet placed here runs
// every check of a packet executed in order with its copy skipped
// (scatter: the opcode sequence, its length against what the WQE has
// left, its SGEs still resolving) and counts its bytes then, once. A
// message that fails instead (a length or opcode error when it
// executes, the QP failing or flushed before it runs) completes the WQE
// in error or flushes it with bytes placed in its buffers: of a
// completion in error only the WR ID, status and QP number are valid
// (ibv_poll_cq(3); see hold), so those bytes say nothing.
//
// Nothing is placed for a WRITE after the SEND, nor for a SEND after a
// WRITE: a WRITE's bytes may overlap a later message's (IBA 9.5), and
// the SEND's offset in its WQE is known only after a SEND.
func (r *Responder) placeNext(run packet.PSN) int {
	o := &r.ooo
	if r.cfg.SRQ || r.env.RQ == nil {
		return 0
	}
	if s := o.lookup(run); s < 0 || !o.isSendLast(s) {
		return 0
	}
	first := run.Next()
	next, ok := o.nextRun(first, r.epsn, r.mtu)
	if !ok {
		return 0
	}
	// j ≥ 1: placeAhead sends only packets after run here, and the one
	// right after it, first, is held (the packet is not).
	j := r.psn.Diff(first)
	if r.psn.Diff(next) > 1 || r.psn.Diff(next) == 1 && o.lookup(next) >= 0 {
		return 0 // a packet that may be of a later message
	}
	if o.nextRunChecked && !o.nextRunApart {
		return 0 // known to overlap: no need to look at the queue again
	}
	wr, ok := r.env.RQ.Peek()
	if !ok {
		return 0 // no WQE: the FIRST meets an RNR NAK when it executes
	}
	if !o.nextRunChecked {
		// The same WQEs for as long as ePSN and this FIRST stay.
		o.nextRunChecked, o.nextRunApart = true, sge.Apart(r.lmem, r.wqe.sges, wr.SGList)
	}
	if !o.nextRunApart {
		return 0
	}
	return r.scatterAhead(wr.SGList, wr.Length(), uint64(j)*uint64(r.mtu))
}

// scatterAhead writes the current packet's payload at byte off of the
// message that the SGE list sges, of total bytes, receives, and returns
// its length; 0 if it does not fit there or its SGEs do not resolve
// with local write access.
func (r *Responder) scatterAhead(sges []verbs.SGE, total, off uint64) int {
	n := r.pkt.PayloadLen()
	if off > total || uint64(n) > total-off || off+uint64(n) > math.MaxUint32 {
		return 0 // past the WQE, or past what sge.Cursor.Seek addresses
	}
	var c sge.Cursor
	c.Seek(sges, uint32(off))
	if !c.Scatter(r.lmem, sges, r.pkt.Payload()) {
		return 0
	}
	return n
}

// span returns the number of PSNs the current request uses: a READ as many
// as its responses (IBA 9.7.1), at most the out-of-order window; any other
// request one.
func (r *Responder) span() int {
	if r.kind != kindRead {
		return 1
	}
	return min(r.readPSNs(r.pkt.RETH().DMALen()), r.ooo.window)
}

// reReport reports the hole at the expected PSN again: from ePSN to the
// first PSN held after it. There is none to report when the buffer holds
// nothing after ePSN, or when ePSN itself is held (a drain waiting for room
// in the output queue).
func (r *Responder) reReport() {
	o := &r.ooo
	if o.lookup(r.epsn) >= 0 || r.q.Free() < 1 {
		return
	}
	past, ok := o.firstHeldAfter(r.epsn)
	if !ok {
		return
	}
	r.queueHole(r.epsn, past)
	o.since = 0
}

// queueHole queues a hole report (docs/sr-responder.md): an ACKNOWLEDGE
// with NAK code packet.NAKSelectiveRepeat, the BTH PSN the first missing PSN
// and the AETH MSN field the first PSN held after the hole. It acknowledges
// nothing, so it goes out ahead of everything but the hole reports and
// extra READ streams queued before it (jumpQueue), READ response trains
// included: the requester learns of the loss without waiting for them. The caller has
// checked that the output queue has room.
func (r *Responder) queueHole(first, past packet.PSN) {
	it := r.q.push()
	it.kind, it.syn, it.psn = outNAK, packet.NAKSyndrome(packet.NAKSelectiveRepeat), first
	it.msn = uint32(past)
	r.jumpQueue()
}

// queueProgress queues a progress report (docs/sr-responder.md): a hole
// report whose BTH PSN and AETH MSN field are both the PSN just past the
// span of the highest request held. If the newest urgent item queued is a
// progress report it is brought up to date instead, so that reports keep
// the order they were made in (the requester infers a lost resend from a
// hole report that follows a progress report) and no two wait in a row.
// With no room in the output queue nothing is queued, and it reports
// false; the next out-of-order arrival tries again.
func (r *Responder) queueProgress() bool {
	o := &r.ooo
	last := -1
	for i := range r.q.Len() {
		if !r.q.At(i).urgent {
			break
		}
		last = i
	}
	if last >= 0 {
		if it := r.q.At(last); it.kind == outNAK && it.psn == packet.PSN(it.msn) {
			it.psn, it.msn = o.next, uint32(o.next)
			o.sinceProgress = 0
			return true
		}
	}
	if r.q.Free() < 1 {
		return false
	}
	it := r.q.push()
	it.kind, it.syn, it.psn = outNAK, packet.NAKSyndrome(packet.NAKSelectiveRepeat), o.next
	it.msn = uint32(o.next)
	r.jumpQueue()
	o.sinceProgress = 0
	return true
}

// withdrawFilled removes the hole reports still queued whose hole has
// filled: every PSN before ePSN has executed, so a report for a hole that
// ends at or before ePSN would only make the requester resend what the
// responder has (packets merely reordered within one receive batch). The
// hole reports are at the head of the queue (jumpQueue), behind at most an
// extra READ stream.
func (r *Responder) withdrawFilled() {
	w := 0
	for i := range r.q.Len() {
		it := r.q.At(i)
		if !it.urgent {
			if w == i {
				return // nothing withdrawn: the rest stays where it is
			}
		} else if it.kind == outNAK && !packet.PSN(it.msn).After(r.epsn) {
			if it.psn != packet.PSN(it.msn) {
				r.ctrs.SRHolesFilled++
			}
			continue
		}
		if w != i {
			*r.q.At(w) = *it
		}
		w++
	}
	r.q.truncate(w)
}

// jumpQueue marks the newest queued item urgent and moves it ahead of
// every item that is not, behind the urgent ones queued before it, keeping
// the order of the others.
func (r *Responder) jumpQueue() {
	r.q.Back().urgent = true
	for i := r.q.Len() - 1; i > 0 && !r.q.At(i-1).urgent; i-- {
		a, b := r.q.At(i-1), r.q.At(i)
		*a, *b = *b, *a
	}
}

// drainOOO executes the buffered requests that have become in order, in PSN
// order, through Receive, the same state machine as a request that arrives
// in order (every check applies now), and then queues a standard ACK for the
// new ePSN−1. It stops at the next hole, when the responder fails, when a
// request does not advance ePSN (an RNR NAK, which also empties the
// buffer), or when the output queue has no room for a request's response
// and the final ACK; NextPacket resumes it then.
func (r *Responder) drainOOO(now time.Time) {
	o := &r.ooo
	start := r.epsn
	r.draining = true
	for o.n > 0 && !r.failed && !r.flushed && r.q.Free() >= 2 {
		r.ctrs.OOODropped += uint64(o.purge(r.epsn))
		s := o.lookup(r.epsn)
		if s < 0 {
			break
		}
		b, placed := o.take(s)
		p, err := packet.Parse(b)
		before := r.epsn
		if err == nil {
			r.nextPlaced = placed
			r.Receive(now, p)
		} else {
			// Unreachable: the bytes parsed when they arrived.
			r.ctrs.OOODropped++
		}
		o.release(s)
		if r.epsn == before {
			break
		}
	}
	r.draining = false
	if r.epsn != start && !r.failed && !r.flushed {
		r.withdrawFilled()
		r.ackDrained()
	}
}

// sendRun returns the first PSN not known to be a MIDDLE of the SEND in
// progress at ePSN: every PSN from ePSN up to it is held as a SEND MIDDLE,
// or is missing and followed by a held SEND MIDDLE or LAST (so it did not
// end the message, and since the PSN before it did not either, it is a
// MIDDLE). It extends what it found for the same ePSN as packets arrive,
// and starts again at ePSN when ePSN has moved; each PSN is looked at
// about once per ePSN.
func (r *Responder) sendRun() packet.PSN {
	o := &r.ooo
	if !o.sendRunOn || o.sendRunBase != r.epsn {
		o.sendRunOn, o.sendRunBase, o.sendRunNext = true, r.epsn, r.epsn
	}
	o.sendRunNext = o.middleRun(o.sendRunNext, r.epsn)
	return o.sendRunNext
}

// ackDrained queues a standard ACK for ePSN−1 after a drain, unless the
// newest queued response already acknowledges that PSN (an ACK, which
// queueACK updates anyway, an ATOMIC ACKNOWLEDGE, the last response of a
// READ, or the RNR NAK at ePSN the drain stopped on). drainOOO leaves room
// for it.
func (r *Responder) ackDrained() {
	last := r.epsn.Add(-1)
	if r.q.Len() > 0 {
		switch b := r.q.Back(); b.kind {
		case outAtomicACK:
			if b.psn == last {
				return
			}
		case outRead:
			if b.psn.Add(r.readPSNs(b.resid)-1) == last {
				return
			}
		case outNAK:
			// The drain stopped on an RNR NAK at ePSN: it acknowledges
			// the PSNs before it, and the requester waits on it.
			if b.syn.Type() == packet.SyndromeTypeRNR && b.psn == r.epsn {
				return
			}
		}
	}
	r.queueACK(last)
}

// oooReady reports whether a buffered request waits only for room in the
// output queue.
func (r *Responder) oooReady() bool {
	return r.ooo.n > 0 && !r.failed && !r.flushed && r.q.Free() >= 2 && r.ooo.lookup(r.epsn) >= 0
}

// queueReadFront queues the response stream of a duplicate READ under
// selective repeat ahead of everything but the hole reports and extra
// streams queued before it (jumpQueue): it goes out next, ahead of the
// rest of the train being sent, which then continues where
// it was, neither rewound nor stopped. The caller has checked that the
// queue has room.
func (r *Responder) queueReadFront(rd readReq, msn uint32) {
	r.queueRead(rd, msn)
	r.jumpQueue()
}

// firstWholeDuplicate reports whether the duplicate READ r.rd asks for
// the whole READ of res, a READ of more than one response, for the first
// time since its train left (the caller has found no queued stream
// covering it), and records that it did. Such a duplicate comes from a
// requester that heard none of the READ's responses within its watch
// interval (requester srWatchRead) or probed for them: every response was
// sent, and that all of them were lost is far less likely than that they
// are still on their way, waiting in a socket of a requester that was not
// running. Serving it would send the whole READ twice, so the first one is
// dropped; the requester asks again after twice its interval if the
// responses were in fact lost, and that duplicate is served. A
// single-response READ's duplicate is always served: its one response
// lost is as likely as late (a requester finds it lost from the answers
// to the READs after it, requester srStreamsLost), and serving it costs
// one packet (TestSRDuplicateWholeSinglePacketRead).
func (r *Responder) firstWholeDuplicate(res *resource) bool {
	if res.npsn <= 1 || r.rd.psn != res.first || r.readPSNs(r.rd.length) != res.npsn || res.wholeDup {
		return false
	}
	res.wholeDup = true
	return true
}

// clipToStream shortens the duplicate READ r.rd under selective repeat
// (which coveredRead did not find covered) when a queued stream of res
// (the train, or an earlier re-read's extra stream) has its next PSN
// inside the duplicate's range and goes on to the range's end: that
// stream sends those responses anyway, so the extra stream is cut where
// it takes over and asks only for the responses already sent. Served
// whole, every PSN from the stream's next one to the range's end would go
// out twice: a requester that heard nothing for a recovery timeout
// re-reads from its first missing response to the end of the READ part
// (requester srProbe) while the responder, its goroutines late, has
// most of the train still queued. The cut range holds whole PMTU
// packets only, since the stream's next PSN is before the range's last.
func (r *Responder) clipToStream(res *resource) {
	rdEnd := r.rd.psn.Add(r.readPSNs(r.rd.length))
	cut := rdEnd
	for i := range r.q.Len() {
		it := r.q.At(i)
		if !streamOf(it, res) || !r.rd.psn.Before(it.psn) || !it.psn.Before(cut) {
			continue
		}
		if it.psn.Add(r.readPSNs(it.resid)).Before(rdEnd) {
			continue // the stream ends before the duplicate's range does
		}
		cut = it.psn
	}
	if cut == rdEnd {
		return
	}
	r.rd.length = uint32(cut.Diff(r.rd.psn)) * uint32(r.mtu)
	r.ctrs.ReadsClipped++
}

// coveredRead reports whether the duplicate READ r.rd asks only for
// responses of res that a queued stream (the train, or the extra stream
// of an earlier duplicate) has still to send, so that the stream answers
// it (selective repeat; restartTrain's first case). A stream covers the
// PSNs from its next one to its end, not beyond: an extra stream of a
// re-read ends where the range it was asked for ends.
//
// A duplicate of the whole READ while its own train is being sent is
// covered too: a selective-repeat requester asks for a whole READ again
// only when none of its responses had come (it took the request for
// lost, requester srWatchRead, or probed it), so the train's responses
// already sent were on their way and the rest follows; serving it again
// would send each of them twice. A response of them that was lost is
// found from the later ones and re-read alone.
func (r *Responder) coveredRead(res *resource) bool {
	end := res.first.Add(res.npsn)
	rdEnd := r.rd.psn.Add(r.readPSNs(r.rd.length))
	whole := r.rd.psn == res.first && rdEnd == end
	for i := range r.q.Len() {
		it := r.q.At(i)
		if !streamOf(it, res) {
			continue
		}
		if !r.rd.psn.Before(it.psn) && !it.psn.Add(r.readPSNs(it.resid)).Before(rdEnd) {
			return true
		}
		if whole && !it.urgent && !it.psn.Add(r.readPSNs(it.resid)).Before(end) {
			return true // the train itself, from its next PSN to the end
		}
	}
	return false
}
