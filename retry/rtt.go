package retry

import "time"

// Parameters of the RTT estimator (RFC 6298, section 2).
const (
	// rttAlpha and rttBeta are the gains 1/8 and 1/4 of RFC 6298 2.3, as
	// shifts.
	rttAlphaShift = 3
	rttBetaShift  = 2

	// RTTGranularity is G, the clock granularity of RFC 6298 2.2: the
	// variance term of the recovery timeout is never less than this. The
	// monotonic clock Go reads resolves nanoseconds, but a timer set for
	// less than a few microseconds fires late on every kernel, so the
	// granularity that matters is the timer's.
	RTTGranularity = 10 * time.Microsecond

	// maxRTTSample bounds one sample, so that a clock jump or a process
	// stopped in a debugger cannot overflow the running sums.
	maxRTTSample = time.Hour
)

// RTT is a round-trip time estimator after RFC 6298: a smoothed round-trip
// time (SRTT) and its mean deviation (RTTVAR), updated from samples.
//
// Karn's rule (RFC 6298 section 3) is the caller's to keep and the
// estimator's to count: a sample taken from a packet that was sent more
// than once cannot tell which transmission the answer belongs to, so the
// caller passes retransmitted = true and the sample is discarded
// (Stats.Discarded). The requester takes samples only from first
// transmissions that ask for an acknowledgement (AckReq), when the
// cumulative acknowledgement, READ response or atomic ACK first covers
// them.
//
// The zero value has no samples; it is ready to use. RTT is a small value
// meant to live inside QP state; it is not safe for concurrent use and
// never allocates.
type RTT struct {
	srtt, rttvar time.Duration
	latest, min  time.Duration
	samples      uint64
	discarded    uint64
}

// RTTStats is a snapshot of an RTT estimator.
type RTTStats struct {
	SRTT, RTTVar time.Duration // smoothed RTT and its mean deviation; 0 before the first sample
	Latest, Min  time.Duration // the last sample taken and the smallest
	Samples      uint64        // samples taken
	Discarded    uint64        // samples refused by Karn's rule
}

// Sample feeds one round-trip measurement. With retransmitted set it is
// discarded (Karn's rule) and only counted. Negative samples (the clock
// went backwards) count as zero; samples above an hour are clamped.
//
// The first sample sets SRTT = R and RTTVAR = R/2 (RFC 6298 2.2); later
// ones set RTTVAR = 3/4·RTTVAR + 1/4·|SRTT − R| and then
// SRTT = 7/8·SRTT + 1/8·R (2.3), in that order.
func (r *RTT) Sample(d time.Duration, retransmitted bool) {
	if retransmitted {
		r.discarded++
		return
	}
	d = min(max(d, 0), maxRTTSample)
	r.latest = d
	if r.samples == 0 {
		r.srtt, r.rttvar, r.min = d, d/2, d
		r.samples = 1
		return
	}
	r.samples++
	r.min = min(r.min, d)
	dev := r.srtt - d
	if dev < 0 {
		dev = -dev
	}
	r.rttvar += (dev - r.rttvar) >> rttBetaShift
	r.srtt += (d - r.srtt) >> rttAlphaShift
}

// Valid reports whether at least one sample has been taken.
func (r RTT) Valid() bool { return r.samples > 0 }

// SRTT returns the smoothed round-trip time, 0 before the first sample.
func (r RTT) SRTT() time.Duration { return r.srtt }

// RTTVar returns the round-trip time variation, 0 before the first sample.
func (r RTT) RTTVar() time.Duration { return r.rttvar }

// RTO returns the retransmission timeout of RFC 6298 2.3,
// SRTT + max(G, 4·RTTVAR), before any floor or ceiling; 0 before the
// first sample.
func (r RTT) RTO() time.Duration {
	if r.samples == 0 {
		return 0
	}
	return r.srtt + max(RTTGranularity, 4*r.rttvar)
}

// Stats returns a snapshot of the estimator.
func (r RTT) Stats() RTTStats {
	return RTTStats{SRTT: r.srtt, RTTVar: r.rttvar, Latest: r.latest, Min: r.min,
		Samples: r.samples, Discarded: r.discarded}
}

// Reset forgets every sample, as when the QP is reset or its path changes.
func (r *RTT) Reset() { *r = RTT{} }
