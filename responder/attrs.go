package responder

import (
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// The setters below change the QP attributes that a Modify QP may change
// after INIT→RTR (IBA 10.3.1: RTR→RTS, RTS→RTS, SQD→RTS and SQD→SQD). The
// owner calls them between engine calls, as kernel rxe's rxe_qp_from_attr
// updates qp->attr, which the responder reads at its next packet.

// SetMinRNRTimer sets the 5-bit RNR timer code of the RNR NAKs sent from
// then on (min_rnr_timer).
func (r *Responder) SetMinRNRTimer(code uint8) { r.cfg.MinRNRTimer = code & 0x1F }

// SetAccess sets the QP's remote access flags (qp_access_flags), checked
// for every request from then on (CHK_OP_VALID).
func (r *Responder) SetAccess(a verbs.AccessFlags) { r.cfg.Access = a }

// SetPath sets the pseudo-header of the packets the responder sends, after
// a change of the primary path's address vector: every response built from
// then on, queued ones included, carries an ICRC computed for it. It
// returns packet.ErrPseudoHeader, changing nothing, for an invalid one.
func (r *Responder) SetPath(ph packet.PseudoHeader) error {
	if !ph.Valid() {
		return packet.ErrPseudoHeader
	}
	r.cfg.Pseudo = ph
	return nil
}

// SetMaxDestRdAtomic sets the number of responder resources
// (max_dest_rd_atomic), which an SQD→SQD Modify may change. Kernel rxe's
// rxe_qp_from_attr frees its resources and allocates n new ones; here the
// newest min(n, old) resources are kept, so that a duplicate of a recent
// READ or atomic is still answered from its resource, and the next new
// request recycles the oldest kept one. With n == 0 every later READ,
// atomic, FLUSH and ATOMIC_WRITE is refused (NAK invalid request,
// CHK_RESOURCE). The output queue's bound follows n (New's 4n+16) but never
// drops below the responses already queued.
func (r *Responder) SetMaxDestRdAtomic(n int) {
	n = max(n, 0)
	r.cfg.MaxDestRdAtomic = n
	if n != len(r.res) {
		old := len(r.res)
		res := make([]resource, n)
		// r.res[resHead] is the oldest (the next recycled): copy the
		// newest min(n, old), oldest first.
		k := 0
		for i := max(old-n, 0); i < old; i++ {
			res[k] = r.res[(r.resHead+i)%old]
			k++
		}
		r.res, r.resHead = res, 0
		if k < n {
			r.resHead = k
		}
	}
	r.q.SetMax(max(4*n+16, r.q.Len()))
}
