package retry

import "time"

// Bounds of the recovery timer.
const (
	// DefaultRecoveryFloor is the shortest recovery timeout when
	// RecoveryTimer.Floor is zero: twice DefaultBackoffMax, so that a peer
	// holding its answers for one local-drop back-off (Backoff) is not
	// taken for a loss, and well above the wake-up latency of a Go timer
	// on a loaded machine.
	DefaultRecoveryFloor = 2 * DefaultBackoffMax

	// ceilingShare makes the floor at least 1/64 of the IB timeout: a
	// user who sets a long local ACK timeout says the path (or the
	// machine) can hold an answer that long, and probes a hundred times
	// earlier would mostly be spurious.
	ceilingShare = 64

	// maxRecoveryBackoff bounds the doublings of the recovery timeout
	// (2^16 × the floor is above every ceiling that matters).
	maxRecoveryBackoff = 16
)

// RecoveryTimer derives the requester's recovery timeout from the measured
// round-trip time: how long to wait for an answer before probing for a lost
// tail or a lost NAK, instead of the IB local ACK timeout.
//
// The timeout is max(RFC 6298 RTO, 2·SRTT) — the RTO of RFC 6298 2.3 and
// the probe timeout of RFC 8985 7.2, whichever is longer — doubled after
// each expiry without progress (RFC 6298 5.5), never below Floor (nor
// below 1/64 of Ceiling) and never above Ceiling, the QP's IB local ACK timeout (4.096 µs × 2^timeout):
// the recovery timer only ever fires earlier than the IB timer. Before the
// first RTT sample it is Ceiling, so a QP behaves as it did without it.
// A zero Ceiling (timeout 0: no retransmit timer, IBTA 9.7.6.1.3) turns
// the recovery timer off too.
//
// The IB timer and retry_cnt stay the failure budget (RetryBudget):
// recovery timer expiries never consume it.
//
// RecoveryTimer is a small value; the zero value has no ceiling and is
// therefore off until Ceiling is set. It never allocates and is not safe
// for concurrent use.
type RecoveryTimer struct {
	// Floor is the shortest timeout; 0 means DefaultRecoveryFloor. It is
	// itself capped at Ceiling.
	Floor time.Duration
	// Ceiling is the longest timeout, the QP's IB local ACK timeout
	// (AckTimeout(timeout)); 0 turns the recovery timer off.
	Ceiling time.Duration

	backoff  uint8
	expiries uint64
}

// Timeout returns the recovery timeout for the estimator rtt: 0 if the
// timer is off (Ceiling 0), Ceiling before the first sample, else
// max(rtt.RTO(), 2·SRTT) doubled once per expiry since the last progress,
// clamped to [Floor, Ceiling].
func (t *RecoveryTimer) Timeout(rtt *RTT) time.Duration {
	if t.Ceiling <= 0 {
		return 0
	}
	if !rtt.Valid() {
		return t.Ceiling
	}
	floor := t.Floor
	if floor <= 0 {
		floor = DefaultRecoveryFloor
	}
	floor = max(floor, t.Ceiling/ceilingShare)
	d := max(rtt.RTO(), 2*rtt.SRTT(), floor)
	for range t.backoff {
		if d >= t.Ceiling {
			break
		}
		d *= 2
	}
	return min(d, t.Ceiling)
}

// Expired records that the recovery timer fired without progress: the
// next Timeout is twice as long (up to Ceiling).
func (t *RecoveryTimer) Expired() {
	t.expiries++
	if t.backoff < maxRecoveryBackoff {
		t.backoff++
	}
}

// Progress records that the peer acknowledged new PSNs: the back-off
// ends (RFC 6298 5.7 keeps the backed-off value until a new sample; a
// sample comes with nearly every acknowledgement here, so progress is the
// simpler and equivalent trigger).
func (t *RecoveryTimer) Progress() { t.backoff = 0 }

// Backoff returns the number of doublings in effect.
func (t *RecoveryTimer) Backoff() int { return int(t.backoff) }

// Expiries returns how many times Expired was called.
func (t *RecoveryTimer) Expiries() uint64 { return t.expiries }
