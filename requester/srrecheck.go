package requester

import (
	"time"

	"github.com/gorxe/gorxe/packet"
)

// A resent request packet can be lost again. The responder re-reports the
// hole at its ePSN only after SRReReport further out-of-order arrivals, and
// when the window is blocked behind that hole nothing further arrives: the
// lost resend would wait for the recovery timer (or the IB timeout). So
// the requester watches its oldest resent request packet not known
// executed (RACK's idea, RFC 8985 6.2): the responder's ePSN is there, so
// the resend, once it arrives, is executed and acknowledged at once (with
// whatever the responder held after it). Packets before it never resent
// were not reported missing: the responder has them (or the report of
// their hole was lost, and the recovery timer's probe finds them). If it is still unacknowledged an
// interval after it went (srInterval, the RTO without floor, doubled after
// its second resend as in srMark), it is taken as lost and resent again: a
// lost resend costs about a round trip. Later resent PSNs are not watched,
// as the responder may hold them behind the oldest hole; each is watched
// once it is the oldest. Each time a PSN's resend is found lost the wait
// for the next doubles (up to srRecheckBackoff times), so a dead or
// stalled peer gets a few packets until the IB timeout ends the QP. READ
// re-reads and atomics are watched by srDetect (and a re-read answered as
// an extra stream by srStreamsLost, srstreams.go).

// srRecheckBackoff is how many times srRecheck doubles a PSN's wait.
const srRecheckBackoff = 6

// srRecheckWait returns how long after its last resend the PSN of sl is
// taken as lost.
func (r *Requester) srRecheckWait(now time.Time, sl *srSlot) time.Duration {
	return r.srInterval(now) << (sl.tries - 1) << min(sl.lost, srRecheckBackoff)
}

// srSent records the resend of psn at now.
func (r *Requester) srSent(now time.Time, psn packet.PSN) {
	s := &r.sr
	sl := s.slot(psn)
	if sl.at == 0 {
		s.nresent++
		if s.nresent == 1 || psn.Before(s.resentLo) {
			s.resentLo = psn
		}
	}
	sl.sent(s.stamp(now))
	sl.next = r.psn
	sl.stream = 0 // srStreamSent numbers an extra-stream re-read's PSNs
}

// srResendLost reports whether the last resend of a request packet (sl),
// which a hole report names missing again, was lost (RACK's idea, RFC
// 8985 6.2, counted in packets): the responder has reported received a
// packet sent more than srReorder packets after that resend. Reports
// leave the responder in the order it made them, so that report was made
// after those packets arrived, and the resend, sent before them on the
// same path, would have arrived first.
func (r *Requester) srResendLost(sl *srSlot) bool {
	return sl.at != 0 && r.sr.held.After(sl.next.Add(srReorder))
}

// srOldestResent returns the resend slot and PSN of the oldest resent
// packet not known executed, if it is a SEND or WRITE packet not due
// again. The responder holds nothing before it but what it never
// reported missing: its ePSN is there unless a hole report was lost.
func (r *Requester) srOldestResent() (*srSlot, packet.PSN, bool) {
	s := &r.sr
	if s.nresent <= 0 {
		return nil, 0, false
	}
	lo := r.compPSN
	atLeast(&lo, s.done)
	x := s.resentLo
	if x.Before(lo) {
		// The oldest went: find the next (once per resent PSN).
		x = lo
		for x.Before(r.highPSN) && int(x.Diff(r.compPSN)) < srTrack {
			if sl := &s.slots[srIndex(x)]; sl.psn == x && sl.at != 0 {
				break
			}
			x = x.Next()
		}
		s.resentLo = x
	}
	if !x.Before(r.highPSN) || int(x.Diff(r.compPSN)) >= srTrack {
		return nil, 0, false
	}
	sl := &s.slots[srIndex(x)]
	if sl.psn != x || sl.at == 0 || sl.due {
		return nil, 0, false
	}
	if i, ok := r.srFind(x); !ok || !r.slot(i).kind.segmented() {
		return nil, 0, false
	}
	return sl, x, true
}

// srArmRecheck arms the resend check for the oldest packet not known
// executed if it was resent, and stops it otherwise.
func (r *Requester) srArmRecheck(now time.Time) {
	sl, _, ok := r.srOldestResent()
	if !ok {
		r.sr.recheck.Stop()
		return
	}
	r.sr.recheck.Arm(r.sr.timeAt(sl.at).Add(r.srRecheckWait(now, sl)))
}

// srRecheck runs when the resend check expires at now: the oldest packet
// not known executed, resent an interval ago and still unacknowledged,
// goes back on the resend list (its resend arms the check again).
func (r *Requester) srRecheck(now time.Time) {
	r.sr.recheck.Stop()
	if r.stopped {
		return
	}
	sl, x, ok := r.srOldestResent()
	if !ok {
		return
	}
	if at := r.sr.timeAt(sl.at).Add(r.srRecheckWait(now, sl)); now.Before(at) {
		r.sr.recheck.Arm(at)
		return
	}
	if r.srMark(now, x, srFound) {
		sl.lost = min(sl.lost+1, srRecheckBackoff)
		r.c.SRResendsLost++
	}
}
