package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModifyMasksPSNs: a PSN is 24 bits (IBA 9.3.1); Modify keeps the low
// 24 bits of RQ_PSN and SQ_PSN, as kernel rxe_qp_from_attr does
// (attr->rq_psn & BTH_PSN_MASK), rather than failing a program that draws
// its initial PSN from a 32-bit random number.
func TestModifyMasksPSNs(t *testing.T) {
	r := newModifyRig(t)
	qp := r.qpIn(QPSInit)
	a := r.attr(QPSInit)
	a.State, a.RQPSN = QPSRTR, 0xFF123456
	require.NoError(t, qp.Modify(&a, QPAttrState|wantTransitions[[2]QPState{QPSInit, QPSRTR}].req))
	require.Equal(t, uint32(0x123456), qp.Query().RQPSN)

	a = r.attr(QPSRTR)
	a.State, a.SQPSN = QPSRTS, 0x80ABCDEF
	require.NoError(t, qp.Modify(&a, QPAttrState|wantTransitions[[2]QPState{QPSRTR, QPSRTS}].req))
	q := qp.Query()
	require.Equal(t, uint32(0xABCDEF), q.SQPSN)
	require.Equal(t, uint32(0x123456), q.RQPSN)
}
