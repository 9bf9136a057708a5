package requester

import (
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
)

// The setters below change the QP attributes that a Modify QP may change
// after RTR→RTS (IBA 10.3.1: RTS→RTS and SQD→SQD). The owner calls them
// between engine calls, as kernel rxe's rxe_qp_from_attr updates qp->attr
// and the requester reads it at its next step. Each takes effect from the
// next packet built, timer armed or retry budget spent.

// SetTimeout sets the local ACK timeout exponent (the timeout attribute,
// 0..31; 0 disables the retransmit timer). A timer already armed keeps its
// deadline; it is armed with the new value from then on, and the credit
// probe wait follows it when Config.CreditProbe is 0.
func (r *Requester) SetTimeout(t uint8) {
	r.cfg.Timeout = t & 0x1F
	r.ack = retry.AckTimeout(r.cfg.Timeout)
	if r.ack == 0 {
		r.retrans.Stop()
	}
	// The recovery timer is capped by (and off without) the IB timeout.
	r.rec.timer.Ceiling = r.ack
	if r.ack == 0 {
		r.rec.due.Stop()
	}
	r.probeWait = r.cfg.CreditProbe
	if r.probeWait <= 0 {
		r.probeWait = r.ack
	}
	if r.probeWait <= 0 {
		r.probeWait = DefaultCreditProbe
	}
}

// SetRetry sets the retry_cnt and rnr_retry attributes (0..7) and refills
// both budgets with them (rxe_qp_from_attr sets comp.retry_cnt and
// comp.rnr_retry the same way).
func (r *Requester) SetRetry(retryCnt, rnrRetry uint8) {
	r.cfg.RetryCnt, r.cfg.RNRRetry = retryCnt, rnrRetry
	r.retryBudget = retry.NewRetryBudget(retryCnt)
	r.rnrBudget = retry.NewRNRBudget(rnrRetry)
}

// SetMaxRdAtomic sets max_rd_atomic: how many READ/atomic WQEs may be
// outstanding. WQEs already holding a slot keep it; with 0, Post refuses
// READ and atomic work requests.
func (r *Requester) SetMaxRdAtomic(n int) { r.cfg.MaxRdAtomic = max(n, 0) }

// SetPath sets the pseudo-header of the packets the requester sends, after
// a change of the primary path's address vector: every packet built from
// then on, retransmissions included, carries an ICRC computed for it. It
// returns packet.ErrPseudoHeader, changing nothing, for an invalid one.
func (r *Requester) SetPath(ph packet.PseudoHeader) error {
	if !ph.Valid() {
		return packet.ErrPseudoHeader
	}
	r.cfg.Pseudo = ph
	return nil
}
