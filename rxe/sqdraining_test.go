package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestSQDStateChangeWhileDraining: while an SQD QP's send queue is still
// draining (a started WQE is unacknowledged), kernel rxe_qp_chk_attr
// refuses a Modify with IB_QP_STATE to any state but ERR (EINVAL); only
// once SQ_DRAINED is reached may the QP return to RTS (IBA 10.3.1: SQD→RTS
// is allowed only after the drain).
func TestSQDStateChangeWhileDraining(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   QPState
		ok   bool
	}{
		{"SQD to RTS", QPSRTS, false},
		{"SQD to SQD", QPSSQD, false},
		{"SQD to RESET", QPSReset, false},
		{"SQD to ERR", QPSErr, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// timeout 20 (4.3 s): the silent peer's WRITE stays unacknowledged
			// for the whole test.
			a, b := smallPair(t, "pipe", qpOpts{timeout: 20}, qpOpts{})
			require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return a.qp.Counters().Requester.PacketsSent > 0 },
				testutil.Bound(), time.Millisecond, "the WRITE is started")
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify))
			err = a.qp.Modify(&QPAttr{State: tc.to}, QPAttrState)
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, tc.to, a.qp.State())
				return
			}
			require.ErrorIs(t, err, ErrInvalidState)
			require.Equal(t, QPSSQD, a.qp.State(), "a refused Modify changes nothing")
			// Attributes alone (no state bit) may still be changed.
			require.NoError(t, a.qp.Modify(&QPAttr{RetryCnt: 2}, QPAttrRetryCnt))
		})
	}
}
