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

	// RetryFloor is the shortest recovery timeout during a go-back-N retry
	// (RecoveryTimer.RetryTimeout): a few loopback round trips, and above
	// the wake-up latency of a timer that fires on time.
	RetryFloor = 250 * time.Microsecond

	// ceilingShare makes the floor at least 1/64 of the IB timeout: a
	// user who sets a long local ACK timeout says the path (or the
	// machine) can hold an answer that long, and probes a hundred times
	// earlier would mostly be spurious.
	ceilingShare = 64

	// maxRecoveryBackoff bounds the count of doublings of the recovery
	// timeout, so that it cannot wrap: 63 take any timeout of 1 ns or
	// more past every Ceiling a Duration holds, so the timeout always
	// reaches Ceiling (RFC 6298 5.5 doubles it, 2.5 allows a maximum).
	// timeout stops doubling at Ceiling, so a large count costs nothing;
	// RetryTimeout, which starts from RetryFloor, needs more than 16 to
	// reach the IB timeout of a QP timeout of 22 or more.
	maxRecoveryBackoff = 63

	// lateShare: an expiry handled more than a quarter of the timeout
	// after it was due counts as late (OnExpiry): this end was not
	// running for that long, and a timer on time fires within tens of
	// microseconds.
	lateShare = 4

	// spuriousShare caps the learned delay (Spurious) at a quarter of the
	// IB timeout, so the recovery timer stays well below it.
	spuriousShare = 4

	// SpuriousHalfLife is how fast the learned delay decays (Decay): it
	// halves for every SpuriousHalfLife without a spurious expiry, so a
	// machine that stops stalling gets its fast recovery back within a
	// second or two, while one that stalls every few tens of
	// milliseconds keeps it up.
	SpuriousHalfLife = 250 * time.Millisecond
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

	backoff   uint8
	deferred  bool          // a late expiry was deferred since the last progress
	learned   time.Duration // the longest recent spurious silence (Spurious)
	learnedAt time.Time     // when learned was last learned (Learn, Spurious) or halved
	expiries  uint64
	defers    uint64
	spurious  uint64
}

// Timeout returns the recovery timeout for the estimator rtt: 0 if the
// timer is off (Ceiling 0), Ceiling before the first sample, else
// max(rtt.RTO(), 2·SRTT) doubled once per expiry since the last progress,
// clamped to [Floor, Ceiling].
func (t *RecoveryTimer) Timeout(rtt *RTT) time.Duration {
	floor := t.Floor
	if floor <= 0 {
		floor = DefaultRecoveryFloor
	}
	return t.timeout(rtt, max(floor, t.Ceiling/ceilingShare))
}

// timeout is Timeout and RetryTimeout with the floor given: 0 if the
// timer is off, Ceiling before the first sample, else max(rtt.RTO(),
// 2·SRTT, floor, the learned delay) doubled once per expiry since the
// last progress, at most Ceiling.
func (t *RecoveryTimer) timeout(rtt *RTT, floor time.Duration) time.Duration {
	if t.Ceiling <= 0 {
		return 0
	}
	if !rtt.Valid() {
		return t.Ceiling
	}
	d := max(rtt.RTO(), 2*rtt.SRTT(), floor, t.learned)
	for range t.backoff {
		// Doubling (RFC 6298 5.5) stops at Ceiling, the maximum of RFC
		// 6298 2.5; d ≥ Ceiling−d is d*2 ≥ Ceiling without computing d*2,
		// which overflows to a negative timeout (the timer never armed)
		// for a Ceiling above half the largest Duration.
		if d >= t.Ceiling-d {
			return t.Ceiling
		}
		d *= 2
	}
	return min(d, t.Ceiling)
}

// RetryTimeout is Timeout during a go-back-N retry, when a sequence error
// NAK (or a gap in READ responses) has just shown the peer alive and
// answering within a round trip: max(rtt.RTO(), 2·SRTT, RetryFloor,
// Floor if set, the learned delay), doubled once per expiry since the
// last progress, at most Ceiling. An IB responder that has NAKed a gap drops every later
// packet silently until the missing PSN arrives (IBA 9.7.5.1.2; rxe
// check_psn), so a resend of that PSN lost again leaves nothing to hear
// but this timer; the longer floor of Timeout (for a peer that may hold
// its answers, and the 1/64 of the IB timeout) would idle the QP for
// milliseconds per lost resend. A probe sent early costs one packet: the
// responder answers it as a duplicate. 0 if the timer is off.
func (t *RecoveryTimer) RetryTimeout(rtt *RTT) time.Duration {
	return t.timeout(rtt, max(RetryFloor, t.Floor))
}

// OnExpiry decides what the recovery timer's expiry, due at due and
// handled at now, means. It returns true if the caller should treat it
// as the peer's silence (call Expired and probe), false if the expiry is
// deferred: the caller re-arms the timer a Timeout from now and sends
// nothing.
//
// The timer measures silence on the wall clock, but an answer counts as
// heard only once this end has run to read it. An expiry handled more
// than a quarter of the timeout late shows that this end itself was not
// running (its process descheduled, its goroutines waiting for a CPU)
// for a good part of the timeout: answers that came in meanwhile wait
// unread in its socket, and a peer in the same situation (the same
// process on loopback, or the same starved machine) has not had its
// turn to answer either. Such an expiry is no evidence of loss, so the
// silence is timed again from now, once per episode without progress:
// a second late expiry in the same episode is taken as silence, so a
// persistently late timer still probes, at most one timeout later.
// Deferrals never consume the IB failure budget and are not expiries.
//
// Lateness is judged against Timeout(rtt); a timer armed with another
// timeout (RetryTimeout) is judged with OnExpiryAfter.
func (t *RecoveryTimer) OnExpiry(rtt *RTT, due, now time.Time) bool {
	return t.OnExpiryAfter(t.Timeout(rtt), due, now)
}

// OnExpiryAfter is OnExpiry for a timer that was armed timeout before due:
// the expiry is late if handled more than a quarter of that timeout after
// due. During a go-back-N retry the timer runs with RetryTimeout, often a
// fraction of Timeout (which has the 2 ms and 1/64-of-Ceiling floors):
// judged against a quarter of Timeout, an expiry handled far more than a
// quarter of RetryTimeout late (up to Timeout/4, which can exceed the
// whole RetryTimeout) was taken for the peer's silence and probed
// (docs/recovery.md, "Stalls are not losses").
func (t *RecoveryTimer) OnExpiryAfter(timeout time.Duration, due, now time.Time) bool {
	if t.deferred || due.IsZero() {
		return true
	}
	if late := now.Sub(due); late <= timeout/lateShare {
		return true
	}
	t.deferred = true
	t.defers++
	return false
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
func (t *RecoveryTimer) Progress() { t.backoff, t.deferred = 0, false }

// Spurious records, at now, that an expiry proved spurious: the first
// answer after the probe acknowledged packets sent before it and came
// sooner after the probe than any round trip (so it was not the answer
// to the probe, as it is when only an acknowledgement was lost): the peer
// had them and was only slow to answer (its process not running, a
// machine with more busy threads than cores). silence is how long
// nothing was heard before that answer. The RTT samples (one timed packet
// per round trip, RFC 6298) rarely catch such stalls, which are rare per
// packet but frequent per second on a loaded machine; this is RFC 4015's
// (Eifel) response: the timeout becomes at least the silence just seen,
// up to a quarter of Ceiling, so the same stall does not fire the timer
// again. The learned delay decays (Decay) and halves at each real loss a
// probe finds (LossFound).
func (t *RecoveryTimer) Spurious(now time.Time, silence time.Duration) {
	t.spurious++
	t.backoff = 0
	t.Learn(now, silence)
}

// Learn records, at now, a silence that proved to be no loss without an
// expiry of this timer behind it (a requester's own loss detection that
// answered too soon, such as selective repeat's lost-READ-request watch):
// the learned delay becomes at least silence, up to a quarter of Ceiling,
// as in Spurious, which counts an expiry besides.
func (t *RecoveryTimer) Learn(now time.Time, silence time.Duration) {
	if t.Ceiling <= 0 {
		return
	}
	t.Decay(now)
	if silence = min(silence, t.Ceiling/spuriousShare); silence > t.learned {
		t.learned = silence
	}
	t.learnedAt = now
}

// LossFound records, at now, that a probe found a real loss: its answer
// acknowledged new PSNs and was not taken for a spurious expiry's. That
// loss waited for the learned delay, which exists for silences that are
// not losses; the delay halves (and is forgotten below half the default
// floor, as in Decay), so on a path that loses packets one stall does not
// make every lost tail wait as long as the stall for the next second or
// two (docs/recovery.md, "The learned delay").
func (t *RecoveryTimer) LossFound(now time.Time) {
	t.Decay(now)
	if t.learned <= 0 {
		return
	}
	t.learnedAt = now
	t.setLearned(t.learned / 2)
}

// Decay halves the learned delay for every SpuriousHalfLife since it was
// last learned (Learn, Spurious: any stall seen, even one shorter than the
// delay) or halved, and forgets it once it is below half the default
// floor, where it no longer counts.
func (t *RecoveryTimer) Decay(now time.Time) {
	if t.learned <= 0 {
		return
	}
	n := now.Sub(t.learnedAt) / SpuriousHalfLife
	if n <= 0 {
		return
	}
	t.learnedAt = t.learnedAt.Add(n * SpuriousHalfLife)
	t.setLearned(t.learned >> n) // n > 0; 63 or more halvings leave 0
}

// setLearned sets the learned delay to d, or forgets it if d is below half
// the default floor, where it no longer counts.
func (t *RecoveryTimer) setLearned(d time.Duration) {
	if d < DefaultRecoveryFloor/2 {
		d = 0
	}
	t.learned = d
}

// Learned returns the delay learned from spurious expiries (0 if none).
func (t *RecoveryTimer) Learned() time.Duration { return t.learned }

// SpuriousExpiries returns how many times Spurious was called.
func (t *RecoveryTimer) SpuriousExpiries() uint64 { return t.spurious }

// Backoff returns the number of doublings in effect.
func (t *RecoveryTimer) Backoff() int { return int(t.backoff) }

// Expiries returns how many times Expired was called.
func (t *RecoveryTimer) Expiries() uint64 { return t.expiries }

// Deferrals returns how many late expiries OnExpiry deferred.
func (t *RecoveryTimer) Deferrals() uint64 { return t.defers }
