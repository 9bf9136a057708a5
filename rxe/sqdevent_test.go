package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSQDrainedOncePerDrain: SQ_DRAINED marks the one move of the send
// queue from draining to drained after RTS→SQD (IBA 11.6.3.2; kernel rxe
// raises it when its requester reaches QP_STATE_DRAINED, once). A Modify
// that keeps the QP in SQD, with the state bit (SQD→SQD) or without it,
// starts no new drain and raises no second event.
func TestSQDrainedOncePerDrain(t *testing.T) {
	for _, c := range []struct {
		name string
		mask QPAttrMask
	}{
		{"sqd-to-sqd", QPAttrState | QPAttrTimeout},
		{"no-state-bit", QPAttrTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
			toSQD(t, a.qp)
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSSQD, Timeout: 12}, c.mask))
			// A post schedules the QP: a step runs after the Modify.
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
			for _, e := range drainEvents(a.qp.dev, 100*time.Millisecond) {
				require.NotEqual(t, EventSQDrained, e.Type, "a second SQ_DRAINED without a new drain")
			}
			require.Equal(t, QPSSQD, a.qp.State())
		})
	}
}
