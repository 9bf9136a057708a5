package requester

import (
	"time"

	"github.com/gorxe/gorxe/packet"
)

// A lost READ request leaves no trace at the responder that the requester
// could hear of: no response follows it, and when the window is full of
// its response PSNs (which count as in flight until answered) nothing is
// sent after it that would make the responder report it missing. Only the
// recovery timer would find it, at its floor (retry.DefaultRecoveryFloor)
// or later. But the responder answers requests in PSN order, streaming a
// READ's responses right after those of the request before it: once every
// request before a READ part has been answered and an interval passes
// (srInterval: the RTO without its floor, longer than the READ's own
// round trip) with none of the part's responses, the part's request is
// taken as lost and the part is re-read (srWatchRead). The responder
// sends the extra stream of a re-read ahead of the trains it has queued,
// so while responses of earlier PSNs still come, the part's train may be
// queued behind them: the interval then counts from the latest of them
// (srWatchExpired). Only the newest
// request sent is watched, and only while the requester has nothing to
// send after it: a request sent after a lost one makes the responder
// report the lost one's PSNs missing (a hole report), and a timer armed
// for every READ of a pipelined stream re-armed the device's timer for
// every READ (a loss-free READ 64 KiB stream lost a fifth of its rate to
// that, READ with capped buffers, asked in parts, more). If the request only
// waited at the responder, the re-read finds the part's stream still
// queued there and is dropped (responder coveredRead), so a mistaken
// re-read costs one request packet. The watch runs under selective repeat
// only; go-back-N has the recovery timer's probe.

// srWatchRead arms or stops the lost-READ-request watch after a response
// or a new READ request at now: it watches the READ part that starts at
// the oldest PSN not answered as first sent (sr.high) when that part was
// asked for, none of its responses has come and nothing was sent after it.
func (r *Requester) srWatchRead(now time.Time) {
	s := &r.sr
	x := s.high
	if _, ok := r.srNewestReadPart(x); !ok || !r.rec.rtt.Valid() || r.srWillSend() {
		// Before the first RTT sample there is no interval to wait (the
		// recovery timer, at the IB timeout then, covers it); and a
		// request about to be sent after the part makes the responder
		// report the part missing if its request was lost.
		s.watch.Stop()
		return
	}
	if s.watch.Armed() && s.watchPSN == x {
		return
	}
	s.watchPSN, s.watchDeferred, s.watchAhead = x, false, 0
	s.watch.Arm(now.Add(r.srWatchInterval(now)))
}

// srWillSend reports whether the requester has a new request to send now
// (the checks of sendable that depend on the window, READ parts and
// max_rd_atomic; a fence or a credit wait is taken as no obstacle).
func (r *Requester) srWillSend() bool {
	// srAdvance may have completed WQEs past a send cursor that an RNR
	// NAK rewound: move it up first, as Receive does after srReceive.
	r.catchUp()
	if r.stopped || r.cur == r.tail || r.windowFull() {
		return false
	}
	w := r.slot(r.cur)
	return r.readFits(w) && r.rdAtomicOK(w)
}

// srWatchHasHead reports whether the watch is armed for the READ part at
// the oldest unacknowledged PSN: none of its responses has come, and
// the watch re-reads it whole after its interval, then after twice that
// (srWatchExpired). The recovery timer then sends no probe
// (onRecoveryTimeout): its timeout (at least retry.DefaultRecoveryFloor)
// may fall between one interval and two after the watch's re-read, and
// its probe, a whole re-read that ignores the once-per-interval rule,
// would go before the watch's second one. If the part's request had
// arrived and this end only took its train late, the responder, which
// drops the first whole duplicate after the train left and serves the
// next (responder firstWholeDuplicate), would then send the whole part
// again.
func (r *Requester) srWatchHasHead() bool {
	s := &r.sr
	if !r.cfg.SelectiveRepeat || !s.watch.Armed() || s.watchPSN != r.compPSN || r.head == r.tail {
		return false
	}
	return r.slot(r.head).kind == kindRead
}

// srWatchAsked reports whether the watch has the oldest READ part
// (srWatchHasHead), the part was asked for again (by the watch or any
// other re-read) and the watch still waits at now: its deadline, set with
// the interval as it stood when the watch armed or last re-read the part
// (srWatchRead, srWatchExpired), is after now, and at that deadline the
// watch takes the part up again and re-reads it if it is still unanswered
// (srWatchExpired). The deadline itself
// is the measure: a wait computed again at now would differ from the
// watch's once the learned delay in the interval has decayed
// (retry.RecoveryTimer.Decay), and the part would be re-read while the
// watch still waits. It changes no state. An IB ACK timeout (IBA
// 9.7.6.1.3) then sends no probe: a whole re-read before the watch's next
// one would be served after the responder dropped the previous one as the
// first whole duplicate (responder firstWholeDuplicate), and the whole
// READ would come twice. The timeout still spends retry_cnt (errorRetry).
func (r *Requester) srWatchAsked(now time.Time) bool {
	s := &r.sr
	return r.srWatchHasHead() && s.resentAt(s.watchPSN) != 0 && s.watch.When().After(now)
}

// srWatchInterval is how long the watch waits: an interval (srInterval),
// at least the recovery floor when one is configured (RecoveryConfig.Floor:
// a user who raised it says answers may take that long) and the delay
// learned from mistaken re-reads (srWatchAnswered).
func (r *Requester) srWatchInterval(now time.Time) time.Duration {
	r.rec.timer.Decay(now)
	return max(r.srInterval(now), r.rec.cfg.Floor, r.rec.timer.Learned())
}

// srWatchAnswered runs when a READ response with PSN psn arrives at now.
// If it belongs to the part the watch last re-read and came sooner after
// that re-read than the fastest round trip measured, it answers the
// original request, not the re-read: the request was only slow (the
// responder held its answers, in a local-drop back-off, or was not
// running). The silence before it is learned (retry.RecoveryTimer.Learn),
// so the watch waits that long from then on, and the mistake is counted
// (SRReadRequestsSlow). The first response of the part ends the check.
func (r *Requester) srWatchAnswered(now time.Time, psn packet.PSN) {
	s := &r.sr
	if !s.watchCheck || psn.Before(s.watchPSN) || !psn.Before(s.watchEnd) {
		return
	}
	s.watchCheck = false
	at := s.resentAt(s.watchPSN)
	if at == 0 {
		// The re-read has not left yet: it is not needed.
		for x := s.watchPSN; x.Before(s.watchEnd); x = x.Next() {
			s.clearDue(x)
		}
		return
	}
	if !r.rec.rtt.Valid() || s.stamp(now)-at >= int64(r.rec.rtt.Stats().Min) {
		return
	}
	r.c.SRReadRequestsSlow++
	if !r.rec.heard.IsZero() {
		r.rec.timer.Learn(now, now.Sub(r.rec.heard))
	}
}

// srNewestReadPart reports whether x is the first PSN of a READ part that
// was asked for (and not already due for a re-read), none of whose
// responses has arrived, and after which nothing was sent; it returns
// one past the part's last PSN.
func (r *Requester) srNewestReadPart(x packet.PSN) (packet.PSN, bool) {
	s := &r.sr
	if !x.Before(r.highPSN) || int(x.Diff(r.compPSN)) >= srTrack || s.srGot(x) || s.isDue(x) {
		return x, false
	}
	i, ok := r.srFind(x)
	if !ok {
		return x, false
	}
	w := r.slot(i)
	if w.kind != kindRead {
		return x, false
	}
	k := uint32(x.Diff(w.origFirst))
	if k >= r.srRequested(w) {
		return x, false
	}
	if m := uint32(r.cfg.MaxReadPkts); k != 0 && (m == 0 || k%m != 0) {
		return x, false
	}
	end := r.srPartEnd(w, k)
	return end, end == r.highPSN
}

// srWatchExpired runs when the watch expires at now. If the watched part
// is still unanswered, nothing after it was (sr.high has not moved) and
// it is still the newest request sent,
// its PSNs go on the resend list: a re-read of the whole part, watched in
// turn for the interval doubled per re-read sent, since nothing else
// would find it lost. If a response of an earlier PSN came less than an
// interval ago (sr.watchAhead), the part's train is queued behind that
// stream at the responder, and the watch waits an interval from that
// response instead. An expiry
// handled more than a quarter of its interval late is timed again from
// now, once: this end was not running, and the responses may be waiting
// unread in its socket (retry.RecoveryTimer.OnExpiry's rule).
func (r *Requester) srWatchExpired(now time.Time) {
	s := &r.sr
	due := s.watch.When()
	s.watch.Stop()
	if r.stopped || s.high != s.watchPSN {
		return
	}
	x := s.watchPSN
	end, ok := r.srNewestReadPart(x)
	if !ok {
		return
	}
	d := r.srWatchInterval(now)
	if s.watchAhead != 0 {
		if next := s.timeAt(s.watchAhead).Add(d); next.After(now) {
			// Responses of earlier PSNs came within the interval: the
			// responder sends the part's train after the stream queued
			// ahead of it (a re-read's extra stream goes ahead of the
			// queued trains, responder/sr.go), so the part is queued,
			// not lost, until an interval passes after that stream.
			s.watch.Arm(next)
			return
		}
	}
	if late := now.Sub(due); late > d/4 && !s.watchDeferred {
		s.watchDeferred = true
		s.watch.Arm(now.Add(d))
		return
	}
	tries := s.tries(x)
	if r.srMarkRange(now, x, end, srFound) > 0 {
		r.c.SRReadRequestsLost++
		s.watchCheck, s.watchEnd = true, end
		tries++ // the re-read just put on the list
	}
	// The re-read may be lost too, and then nothing arrives to run
	// srWatchRead again: watch it for the interval doubled per re-read
	// sent, this one included. The original request may also have
	// arrived after all, its train only taken late by this end: the
	// responder drops the first whole duplicate after the train left and
	// serves the next (responder firstWholeDuplicate), so a next re-read
	// a single interval later would have the whole READ sent again.
	s.watch.Arm(now.Add(d << min(tries, srRecheckBackoff)))
}
