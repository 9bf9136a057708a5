package retry

import "time"

// Deadline is a point in time at which something is due, or nothing: the
// sans-IO form of a one-shot timer. A state machine keeps one Deadline per
// timer it would otherwise own (the retransmit timer and RNR timer of rxe's
// rxe_comp.c, the read-reply back-off), reports Earliest of them, and handles
// Expired ones when its task runs; the task owns the single real timer
// (quic-go's maybeResetTimer pattern).
//
// The zero value is stopped. Deadline is a plain value; it is not safe for
// concurrent use.
type Deadline struct {
	at time.Time
}

// Arm sets the deadline to at, replacing any earlier setting (mod_timer). A
// zero at stops the deadline.
func (d *Deadline) Arm(at time.Time) { d.at = at }

// ArmIfStopped arms the deadline at at only if it is not armed already, and
// reports whether it did. This is rxe's rule for the retransmit timer: each
// transmission arms it if it is not already pending, so a busy sender does
// not keep pushing the timeout back (rxe_req.c, update_state). The
// completer, by contrast, re-arms unconditionally with Arm while PSNs are
// outstanding (rxe_comp.c, end of rxe_completer).
func (d *Deadline) ArmIfStopped(at time.Time) bool {
	if !d.at.IsZero() {
		return false
	}
	d.at = at
	return !at.IsZero()
}

// Stop disarms the deadline.
func (d *Deadline) Stop() { d.at = time.Time{} }

// Armed reports whether the deadline is set.
func (d Deadline) Armed() bool { return !d.at.IsZero() }

// When returns the time the deadline is set for, or the zero time if it is
// stopped; the result can be passed to Earliest as is.
func (d Deadline) When() time.Time { return d.at }

// Expired reports whether the deadline is armed and now is at or after it. It
// does not disarm the deadline; the caller calls Stop (or Arm) when it handles
// the expiry.
func (d Deadline) Expired(now time.Time) bool {
	return !d.at.IsZero() && !now.Before(d.at)
}

// Earliest returns the earliest of ts, ignoring zero times (stopped
// deadlines). It returns the zero time if every t is zero or ts is empty,
// meaning "no timer needed".
func Earliest(ts ...time.Time) time.Time {
	var e time.Time
	for _, t := range ts {
		if t.IsZero() {
			continue
		}
		if e.IsZero() || t.Before(e) {
			e = t
		}
	}
	return e
}
