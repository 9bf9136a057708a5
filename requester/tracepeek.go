package requester

import (
	"strings"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Timer is a set of the requester's timers (Deadline is the earliest of
// them), as Expired reports them.
type Timer uint8

// The requester's timers.
const (
	TimerRetransmit Timer = 1 << iota // the local ACK timeout (rxe retrans_timer): the completer runs
	TimerRNR                          // the end of an RNR wait (rxe rnr_nak_timer)
	TimerCredit                       // the credit probe wait (IBA 9.7.7.2.5)
	TimerRecovery                     // the recovery timer (onRecoveryTimeout)
	TimerSRHold                       // selective repeat: the hold of a hole's resends (srMarkHeld)
	TimerSRRecheck                    // selective repeat: the recheck of resends (srRecheck)
	TimerSRWatch                      // selective repeat: the watch of READ requests (srWatchExpired)
)

var timerNames = [...]string{"retransmit", "rnr_wait", "credit_probe", "recovery", "sr_hold", "sr_recheck", "sr_watch"}

// String returns the timers' names joined by "+", e.g. "rnr_wait+recovery";
// "" for none.
func (t Timer) String() string {
	var b strings.Builder
	for i, n := range timerNames {
		if t&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('+')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// Expired returns the timers that OnTimeout(now) acts on: those whose
// deadline has come, the recovery timer only when the retransmit timer's
// has not (OnTimeout handles one or the other); none once the requester
// stopped. It reads the deadlines in OnTimeout's order without acting on
// them; the two change together.
func (r *Requester) Expired(now time.Time) Timer {
	if r.stopped {
		return 0
	}
	var t Timer
	if r.rnrWait.Expired(now) {
		t |= TimerRNR
	}
	if r.probe.Expired(now) {
		t |= TimerCredit
	}
	if r.sr.hold.Expired(now) {
		t |= TimerSRHold
	}
	if r.sr.recheck.Expired(now) {
		t |= TimerSRRecheck
	}
	if r.sr.watch.Expired(now) {
		t |= TimerSRWatch
	}
	if r.retrans.Expired(now) {
		t |= TimerRetransmit
	} else if r.rec.due.Expired(now) {
		t |= TimerRecovery
	}
	return t
}

// Resend says what kind of resend a request packet is, or is about to be
// (NextResend).
type Resend uint8

// Kinds of resend.
const (
	ResendNone      Resend = iota
	ResendGoBackN          // go-back-N from the oldest unacknowledged PSN (rxe req_retry)
	ResendRNR              // go-back-N of an RNR NAK's retry, after its wait (IBA 9.7.5.2.8)
	ResendProbe            // the tail-loss probe: the oldest unacknowledged packet (buildProbe, srProbe)
	ResendDouble           // the second copy of a go-back-N retry's first packet (doubleResend)
	ResendReread           // a READ request for a READ's missing responses (nextReread, srResend)
	ResendSelective        // selective repeat: a PSN reported missing or found lost (srResend)
)

var resendNames = [...]string{"", "go_back_n", "rnr", "tail_probe", "double", "reread", "selective_repeat"}

// String returns the kind's name as a trace writes it, "" for none.
func (k Resend) String() string {
	if int(k) < len(resendNames) {
		return resendNames[k]
	}
	return "resend"
}

// NextResend returns the resend NextPacket(now) would build first, in its
// order (a due tail-loss probe, the second copy of a retry's first
// packet, a re-read, the selective-repeat resend list, the send cursor
// behind the highest PSN sent after a rewind), and its PSN; ResendNone if
// the next packet is no resend or none may go. It is for tracing: like
// Pending, it drops re-reads and resend marks that are no longer due.
func (r *Requester) NextResend(now time.Time) (Resend, packet.PSN) {
	if r.stopped || r.rnrWait.Armed() && !r.rnrWait.Expired(now) || r.head == r.tail {
		return ResendNone, 0
	}
	if r.rec.probeDue && r.highPSN.After(r.compPSN) {
		return ResendProbe, r.compPSN
	}
	if r.doubleReady() {
		return ResendDouble, r.compPSN
	}
	if r.rereadDue && r.rereadPending() {
		for i := r.head; i != r.tail; i++ {
			if w := r.slot(i); w.rereadDue {
				if i == r.head {
					return ResendReread, r.compPSN
				}
				return ResendReread, w.origFirst.Add(int(w.rcvd / r.pmtu))
			}
		}
	}
	if r.srReady(now) {
		if x, ok := r.srNextDue(); ok {
			return ResendSelective, x
		}
	}
	if r.psn.Before(r.highPSN) && r.sendable() != nil {
		if r.rnrRewound {
			return ResendRNR, r.psn
		}
		return ResendGoBackN, r.psn
	}
	return ResendNone, 0
}

// RetryKind is a set of the paths that start a retry (the go-back-N and
// re-read paths, each counted in Counters.CompleterRetryErr,
// completer_retry_err) and of the selective-repeat events that put PSNs on
// the resend list (a hole report taken, losses srDetect found), which
// start no retry episode.
type RetryKind uint8

// Paths that start a retry.
const (
	// RetryRewind: errorRetry's go-back-N from the oldest unacknowledged
	// PSN after a timeout, a sequence NAK or an implied NAK (rxe
	// COMPST_ERROR_RETRY, req_retry).
	RetryRewind RetryKind = 1 << iota
	// RetryRereadOldest: errorRetry's re-read of the rest of the oldest
	// READ after a gap in its responses (readahead.go, rereadOldest).
	RetryRereadOldest
	// RetryReadAhead: readGapAhead's re-read of the rest of a READ after
	// the oldest, whose responses came with a gap (placeAhead).
	RetryReadAhead
	// RetryPartsHole: advanceParts' re-read of the oldest READ, asked for
	// in parts, from a hole its responses placed ahead left.
	RetryPartsHole
	// RetryProbeAnswered: probeAnswered's go-back-N, when the answer to a
	// tail-loss probe acknowledges exactly the probed PSN.
	RetryProbeAnswered
	// RetryHoleReport: srHole took a selective-repeat hole report and put
	// the hole's PSNs on the resend list (counted in SRHolesReceived, not
	// in completer_retry_err: no retry episode starts).
	RetryHoleReport
	// RetryLostDetected: srDetect found READ responses or an atomic
	// acknowledgement lost (srReorder later PSNs answered, RACK's idea,
	// RFC 8985) and put them on the resend list (their resends are
	// counted in SRPacketsResent, not in completer_retry_err: no retry
	// episode starts). LostDetected names the first such PSN.
	RetryLostDetected
)

// TakeRetryKinds returns the kinds of the retries started since the last
// call, and forgets them. It is for tracing: the requester only records
// them (one OR where a retry starts).
func (r *Requester) TakeRetryKinds() RetryKind {
	k := r.retryLog
	r.retryLog = 0
	return k
}

// LostDetected returns the first PSN srDetect put on the resend list
// since the retry kinds were last taken, and whether it belongs to a READ
// (resent as a re-read); it means something only while the kinds taken
// hold RetryLostDetected.
func (r *Requester) LostDetected() (psn packet.PSN, read bool) {
	return r.lostPSN, r.lostRead
}

// noteLost records that srDetect put x, of a READ or not, on the resend
// list (RetryLostDetected): the first since the kinds were taken.
func (r *Requester) noteLost(x packet.PSN, read bool) {
	if r.retryLog&RetryLostDetected == 0 {
		r.retryLog |= RetryLostDetected
		r.lostPSN, r.lostRead = x, read
	}
}

// OldestPSN returns the oldest unacknowledged PSN (rxe comp.psn): where a
// re-read of the oldest READ starts.
func (r *Requester) OldestPSN() packet.PSN { return r.compPSN }
