package retry

import "time"

// AckTimeoutUnit is the base of the local ACK timeout: the QP attribute
// value t stands for AckTimeoutUnit × 2^t (IBTA 9.7.6.1.3).
const AckTimeoutUnit = 4096 * time.Nanosecond

// AckTimeout returns the local ACK timeout (transport timer) for the 5-bit QP
// attribute value t: 4.096 µs × 2^t (IBTA 9.7.6.1.3; kernel rxe computes the
// same 4096 << t nanoseconds into qp->qp_timeout_jiffies in rxe_qp.c).
//
// t = 0 means the timer is infinite: AckTimeout returns 0 and the caller must
// not arm a retransmit timer at all. Only the low 5 bits of t are used, as the
// attribute is a 5-bit field; the verbs layer should reject larger values
// before they get here. The largest value, t = 31, is about 8796 s.
func AckTimeout(t uint8) time.Duration {
	t &= 0x1F
	if t == 0 {
		return 0
	}
	return AckTimeoutUnit << t
}
