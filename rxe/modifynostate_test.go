package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModifyEmptyMaskInResetAndErr: a Modify without the state bit keeps
// the state (IBA 11.2.1.2), and RESET→RESET and ERR→ERR take no attribute
// (kernel ib_modify_qp_is_ok: the transition is valid, with no required or
// optional attribute), so an empty mask succeeds in RESET and ERR as in
// any other state, and any attribute is refused.
func TestModifyEmptyMaskInResetAndErr(t *testing.T) {
	r := newModifyRig(t)
	for _, s := range []QPState{QPSReset, QPSErr} {
		t.Run(s.String(), func(t *testing.T) {
			r.t = t
			qp := r.qpIn(s)
			a := r.attr(s)
			require.NoError(t, qp.Modify(&a, 0))
			require.Equal(t, s, qp.State())
			require.ErrorIs(t, qp.Modify(&a, QPAttrPort), ErrInvalidArgument, "%v to %v takes no attribute", s, s)
			require.Equal(t, s, qp.State())
		})
	}
}
