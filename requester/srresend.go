package requester

import (
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
)

// srHole takes a hole report (packet.NAKSelectiveRepeat): the responder
// misses the PSNs [BTH PSN, AETH MSN) and holds the one after. It
// acknowledges nothing. The PSNs of the hole still unacknowledged are put
// on the resend list, each at most once per interval (srMark). A report
// of PSNs never sent, or of none still outstanding, is ignored and
// counted; a report can thus ask for no more than the unacknowledged
// window. A report whose two PSNs are equal is a progress report: the
// responder has received the PSNs before it (srProgress).
func (r *Requester) srHole(now time.Time, p *packet.Packet) {
	a := p.PSN()
	b := packet.PSN(p.AETH().MSN() & packet.PSNMask)
	if a == b {
		// A progress report: no hole, the responder has received the
		// PSNs before b.
		if b.After(r.highPSN) {
			r.c.SRHolesIgnored++
			return
		}
		r.c.SRProgressReceived++
		r.srProgress(b)
		return
	}
	r.c.SRHolesReceived++
	lo := a
	for _, m := range [...]packet.PSN{r.compPSN, r.sr.done} {
		if lo.Before(m) {
			lo = m
		}
	}
	if !a.Before(b) || b.After(r.highPSN) || !lo.Before(b) {
		r.c.SRHolesIgnored++
		return
	}
	r.srProgress(b.Next())
	r.retryLog |= RetryHoleReport
	r.srMarkHeld(now, lo, b)
}

// srMarkHeld puts [a, b) on the resend list (srMarkRange) and, if the list
// was empty, holds it back until the hole is known to be a loss, not a
// reordering: a cumulative ACK that arrives meanwhile (the hole filled by
// a request merely overtaken, or the ACK of a drain right behind the ACK
// of the request that filled it) takes the PSNs it covers off the list.
// The hole is a loss once the responder reports received the request
// packet srHoldPackets request packets past the one at its start (RACK's rule
// in packets, srThreshold; srHeldBack), so when packets were sent after
// the hole and that far, the hold waits for that report, with an interval
// as the fallback. Otherwise (a hole at the tail) it waits for the
// reorder window of time.
func (r *Requester) srMarkHeld(now time.Time, a, b packet.PSN) {
	s := &r.sr
	empty := s.ndue == 0
	if r.srMarkRange(now, a, b, srNamed) == 0 || !empty {
		return
	}
	s.holdFor = r.srThreshold(a)
	past := b // evidence comes from packets sent after the hole
	atLeast(&past, s.holdFor)
	switch {
	case s.held.After(s.holdFor):
		// Reported already: a loss.
	case r.psn.After(past):
		s.holdByPackets = true
		s.hold.Arm(now.Add(r.srInterval(now)))
	default:
		if d := r.srReorderWindow(now); d > 0 {
			s.holdByPackets = false
			s.hold.Arm(now.Add(d))
		}
	}
}

// srThreshold returns the first PSN of the request packet srHoldPackets
// request packets after the one holding psn: RFC 8985's reordering
// threshold counts packets sent after the lost one. A SEND, WRITE or
// atomic request packet is one PSN; a READ request stands for as many
// PSNs as the responses it asks for (the READ, or its part when READs go
// in parts, readChunk), so a READ request overtaken by the next one,
// which leaves a hole as long as its READ at the responder, is not past
// the threshold at once. Past the started WQEs each PSN counts as a
// packet.
func (r *Requester) srThreshold(psn packet.PSN) packet.PSN {
	for range srHoldPackets {
		psn = r.srNextRequest(psn)
	}
	return psn
}

// srNextRequest returns the first PSN of the request packet after the one
// holding psn (srThreshold).
func (r *Requester) srNextRequest(psn packet.PSN) packet.PSN {
	i, ok := r.srFind(psn)
	if !ok {
		return psn.Next()
	}
	w := r.slot(i)
	if w.kind != kindRead {
		return psn.Next()
	}
	first, end := r.srSpan(w)
	if m := r.cfg.MaxReadPkts; m > 0 {
		k := int(psn.Diff(first))
		if next := first.Add(k/m*m + m); next.Before(end) {
			return next
		}
	}
	return end
}

// srMarkRange puts the PSNs of [a, b) on the resend list: the request
// packets of SEND, WRITE and atomic WQEs, and the READ response PSNs asked
// for and not received (a READ request is resent, or re-read, as the
// range of them), for the reason why (srMark). It returns how many PSNs
// it put on the list.
func (r *Requester) srMarkRange(now time.Time, a, b packet.PSN, why srWhy) int {
	if lim := r.compPSN.Add(srTrack); lim.Before(b) {
		b = lim
	}
	n := 0
	for x := a; x.Before(b); x = x.Next() {
		i, ok := r.srFind(x)
		if !ok {
			break
		}
		w := r.slot(i)
		if r.sr.srGot(x) {
			continue
		}
		if w.kind == kindRead {
			if k := uint32(x.Diff(w.origFirst)); k >= r.srRequested(w) {
				_, end := r.srSpan(w)
				x = end.Add(-1) // not asked for yet: the rest of the READ is skipped
				continue
			}
		} else if !x.Before(r.highPSN) {
			break
		}
		if r.srMark(now, x, why) {
			n++
		}
	}
	return n
}

// srDetect looks for lost READ responses and atomic acknowledgements
// (srLost: responses for srReorder later PSNs have arrived, RACK's idea),
// and puts each on the resend list with the PSNs missing after it up to
// the next one received: a re-read of the range, or the atomic again,
// which the responder replays. New PSNs are looked at as responses arrive;
// all of them again once per interval, for lost re-reads. The lost
// responses of re-reads answered as extra streams are put on the list
// first, as soon as their evidence arrives (srStreamsLost).
func (r *Requester) srDetect(now time.Time) {
	r.srStreamsLost(now)
	s := &r.sr
	limit := s.high.Add(-1 - srReorder) // PSNs before it have srReorder later ones answered
	if !limit.After(r.compPSN) {
		return
	}
	from := s.scanned
	if nano := s.stamp(now); nano >= s.rescan {
		from = r.compPSN
		s.rescan = nano + int64(r.srInterval(now))
	}
	if int(limit.Diff(r.compPSN)) > srTrack {
		limit = r.compPSN.Add(srTrack)
	}
	x := from
	due := s.ndue
	for x.Before(limit) {
		if s.srGot(x) {
			x = x.Next()
			continue
		}
		i, ok := r.srFind(x)
		if !ok {
			break
		}
		w := r.slot(i)
		_, end := r.srSpan(w)
		switch {
		case w.kind.segmented():
			// Executed (a later response proves it) or reported by the
			// responder: not for this requester to find.
			x = end
		case w.kind == kindRead && uint32(x.Diff(w.origFirst)) >= r.srRequested(w):
			x = end
		case w.kind == kindRead:
			x = r.srMarkRun(now, w, x)
		default:
			if r.srLost(x) && r.srMark(now, x, srFound) {
				r.noteLost(x, false)
			}
			x = x.Next()
		}
	}
	if x.After(s.scanned) {
		s.scanned = x
	}
	if s.ndue > due {
		// Responses found lost are known lost, not reordered: a reorder
		// hold that a request hole armed (srMarkHeld) ends, and the list
		// goes.
		s.hold.Stop()
	}
}

// srMarkRun puts the READ response PSNs missing from x on, if x is lost,
// on the resend list, up to the next one received, the end of x's READ
// part, or the first not known lost: as first asked for, those before the
// highest answered are (they were sent before it); asked for again, per
// srLost. It returns the PSN to look at next.
func (r *Requester) srMarkRun(now time.Time, w *wqe, x packet.PSN) packet.PSN {
	s := &r.sr
	if !r.srLost(x) {
		return x.Next()
	}
	k := uint32(x.Diff(w.origFirst))
	end := r.srPartEnd(w, k)
	if req := w.origFirst.Add(int(r.srRequested(w))); req.Before(end) {
		end = req
	}
	if lim := r.compPSN.Add(srTrack); lim.Before(end) {
		end = lim
	}
	for ; x.Before(end) && !s.srGot(x); x = x.Next() {
		if at := s.resentAt(x); at == 0 && !x.Before(s.high) || at != 0 && !r.srLost(x) {
			break
		}
		if r.srMark(now, x, srFound) {
			r.noteLost(x, true)
		}
	}
	return x
}

// srNextDue returns the lowest PSN on the resend list. Marks left before
// the oldest unacknowledged PSN are dropped on the way.
func (r *Requester) srNextDue() (packet.PSN, bool) {
	s := &r.sr
	x := s.dueLo
	if x.Before(r.compPSN) {
		x = r.compPSN
	}
	for ; x.Before(r.highPSN) && int(x.Diff(r.compPSN)) < srTrack; x = x.Next() {
		if s.isDue(x) {
			s.dueLo = x
			return x, true
		}
	}
	s.clearAllDue()
	return 0, false
}

// srResend builds the next packet of the resend list into buf and returns
// its length, or 0 if the list is empty: a SEND, WRITE or atomic request
// packet as it was first sent, or for READ response PSNs a READ request
// for the range of them (from the first, up to the next response received
// or the end of the READ part): the original request if none of its
// responses came. The last packet of the list asks for an ACK. The send
// cursor and the WQE are left as they were.
func (r *Requester) srResend(now time.Time, buf []byte) int {
	for r.sr.ndue > 0 && !r.stopped {
		x, ok := r.srNextDue()
		if !ok {
			return 0
		}
		r.sr.clearDue(x)
		i, ok := r.srFind(x)
		if !ok {
			continue
		}
		w := r.slot(i)
		npkts := uint32(1)
		extra := false
		if w.kind == kindRead {
			if r.sr.srGot(x) {
				continue
			}
			extra = r.srExtraStream(w, x)
			npkts = r.srRereadRange(now, w, x)
			r.c.ReadHoleRereads++
		}
		r.srSent(now, x)
		if extra {
			r.srStreamSent(x, npkts)
		}
		if n := r.srBuild(now, buf, i, x, npkts); n > 0 {
			if w.kind.segmented() {
				r.srArmRecheck(now)
			}
			r.c.SRPacketsResent++
			if wc := r.rec.win.Config(); wc.Min < wc.Max {
				r.lossSeen(now) // a window above 128 halves, once per round trip
			}
			return n
		}
		return 0
	}
	return 0
}

// srRereadRange takes the due PSNs after x that continue the READ w's
// missing range off the list and returns the packets of the range: up to
// the next response received, the end of the READ part, or a PSN not due.
// A range that starts at the part's first PSN while no response of the
// part has come is the whole part: that request has the PSN of the part's
// original request, and a responder that has not received the original
// (lost, or only overtaken by this one) executes it as the original (IBA
// 9.7.5.1.1: a new request at the expected PSN), so the READ's PSNs there
// would end where this request ends, and every later request of the QP
// would be out of order for it, for good (a RETRY_EXC_ERR in read-bw -s
// 4194304 with 2 % loss and reordering, where the responder took an
// 818-packet re-read for the 1024-packet READ).
func (r *Requester) srRereadRange(now time.Time, w *wqe, x packet.PSN) uint32 {
	k := uint32(x.Diff(w.origFirst))
	end := r.srPartEnd(w, k)
	start := r.srPartStart(w, k)
	whole := x == start && !r.srPartAnswered(start, end)
	n := uint32(1)
	for y := x.Next(); y.Before(end); y = y.Next() {
		due := r.sr.isDue(y)
		if !whole && (!due || r.sr.srGot(y)) {
			break
		}
		if due {
			r.sr.clearDue(y)
		}
		if !r.sr.srGot(y) {
			r.srSent(now, y)
		}
		n++
	}
	return n
}

// srPartAnswered reports whether a response of the READ part [start, end)
// has arrived: the oldest unacknowledged PSN is past its start, or a
// response of it was placed out of order. The responder then executed the
// part's request, so a re-read of any of its PSNs is a duplicate READ.
func (r *Requester) srPartAnswered(start, end packet.PSN) bool {
	if r.compPSN.After(start) {
		return true
	}
	for y := start; y.Before(end) && int(y.Diff(r.compPSN)) < srTrack; y = y.Next() {
		if r.sr.srGot(y) {
			return true
		}
	}
	return false
}

// srBuild builds, into buf, the packet with PSN x of WQE i (npkts: the
// response packets a READ request asks for) without moving the send
// cursor, and returns its length. The last resend asks for an ACK.
func (r *Requester) srBuild(now time.Time, buf []byte, i uint64, x packet.PSN, npkts uint32) int {
	w := r.slot(i)
	saved := *w
	cur, next, noAck, high := r.cur, r.psn, r.noAck, r.highPSN
	r.cur, r.psn = i, x
	switch {
	case w.kind.segmented():
		r.seekPSN(w, x)
	case w.kind == kindRead:
		w.off = uint32(x.Diff(w.origFirst)) * r.pmtu
		r.sr.rereadPkts = npkts
	default:
		w.off, w.snd = 0, sge.Cursor{} // an ATOMIC_WRITE's 8 bytes again
	}
	last := r.sr.ndue == 0
	r.sr.forceAck = last
	n := r.build(w, buf)
	r.sr.forceAck, r.sr.rereadPkts = false, 0
	if n == 0 {
		return 0 // a local error failed the WQE and the requester
	}
	*w = saved
	r.cur, r.psn, r.noAck = cur, next, noAck
	r.onSent(now, x, r.hdr.BTH.AckReq, high)
	if r.ack > 0 {
		r.retrans.ArmIfStopped(now.Add(r.ack))
	}
	return n
}

// srProbe builds the tail-loss probe under selective repeat: the oldest
// unacknowledged packet with AckReq (buildProbe), or, if the oldest WQE
// is a READ or atomic, a re-read of the range missing at the oldest PSN
// (or the atomic again). It remembers the next PSN to send, for the
// probe's answer (srProbeAnswered).
func (r *Requester) srProbe(now time.Time, buf []byte) int {
	r.sr.probeHigh = r.psn
	if r.head == r.tail || !r.highPSN.After(r.compPSN) {
		r.rec.probeDue = false
		return 0
	}
	w := r.slot(r.head)
	if !w.kind.rdAtomic() || !w.started || w.state == wqePosted {
		n := r.buildProbe(now, buf)
		if n > 0 && r.ack > 0 {
			r.retrans.ArmIfStopped(now.Add(r.ack))
		}
		return n
	}
	r.rec.probeDue = false
	end := r.compPSN.Next()
	if w.kind == kindRead {
		end = r.srPartEnd(w, uint32(r.compPSN.Diff(w.origFirst)))
	}
	// The range missing at the oldest PSN: up to the next response
	// received or the end of the READ part.
	y := r.compPSN
	for y.Before(end) && int(y.Diff(r.compPSN)) < srTrack && !r.sr.srGot(y) {
		y = y.Next()
	}
	if w.kind == kindRead && r.srPartAnswered(r.srPartStart(w, uint32(r.compPSN.Diff(w.origFirst))), end) &&
		int(y.Diff(r.compPSN)) > srReorder+1 {
		// The responder has the part's request: ask for the range's
		// last response only. A probe is mostly sent after a silence of
		// this end's own (the process or the VM not running) while the
		// rest of the stream was on its way, and a re-read of the whole
		// range then made the responder send it all twice (128 and 49
		// responses in two runs of rxectl read-bw -s 1048576 with 1 % of
		// the requests lost); RFC 8985's probe is one segment too. The
		// answer comes after the responses of the part before it (the
		// responder serves a duplicate READ after the train it belongs
		// to, or rewinds a train still being sent:
		// responder.restartTrain), so once it is in, those still missing
		// are lost (srResponded raises sr.high) and srDetect re-reads
		// them at once: a lost tail costs a round trip more than a probe
		// of the whole range.
		r.srMark(now, y.Add(-1), srForced)
		r.sr.tail, r.sr.tailOut = y.Add(-1), true
	} else {
		for x := r.compPSN; x != y; x = x.Next() {
			r.srMark(now, x, srForced)
		}
	}
	r.sr.probing = true
	n := r.srResend(now, buf)
	r.sr.probing = false
	if n > 0 {
		r.probeSent(now)
	}
	return n
}

// srProbeAnswered runs on the first response after a probe, oldComp
// being the oldest unacknowledged PSN before it (probeAnswered). If the
// answer acknowledges exactly the probe's PSN while PSNs sent before the
// probe are still unacknowledged, the responder had nothing after the
// probed packet (it would have acknowledged it with the rest): the oldest
// of those PSNs is missing too and is probed at once, so a lost tail costs
// a round trip per lost packet, not a recovery timeout each. An answer
// that acknowledges beyond the probe's PSN shows the responder had later
// packets: it was slow, and the rest is on its way or reported as holes
// (a chain of probes here resent one packet per ACK of a loaded stream).
// Unlike go-back-N (probeAnswered), nothing is sent beyond the oldest
// missing PSN: under selective repeat the responder may hold later PSNs,
// and the ACK of its drain may merely have been lost. READ and atomic
// responses have their own loss detection (srDetect). Nothing changes the
// window.
func (r *Requester) srProbeAnswered(oldComp packet.PSN) {
	if r.stopped || r.head == r.tail || !r.sr.probeHigh.After(r.compPSN) || r.slot(r.head).kind.rdAtomic() {
		return
	}
	if r.compPSN.After(oldComp) && r.compPSN == r.rec.probePSN.Next() && r.sr.ndue == 0 {
		r.rec.probeDue = true
	}
}
