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

// SetRetryCnt sets the retry_cnt attribute (0..7) and refills the retry
// budget with it; the RNR budget stays as it is (rxe_qp_from_attr sets
// comp.retry_cnt under IB_QP_RETRY_CNT alone).
func (r *Requester) SetRetryCnt(n uint8) {
	r.cfg.RetryCnt = n
	r.retryBudget = retry.NewRetryBudget(n)
}

// SetRNRRetry sets the rnr_retry attribute (0..7, 7 infinite) and refills
// the RNR budget with it; the retry budget stays as it is
// (rxe_qp_from_attr sets comp.rnr_retry under IB_QP_RNR_RETRY alone).
func (r *Requester) SetRNRRetry(n uint8) {
	r.cfg.RNRRetry = n
	r.rnrBudget = retry.NewRNRBudget(n)
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
