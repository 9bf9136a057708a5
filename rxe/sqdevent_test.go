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

// TestSQDrainNotifyPerTransition: the SQ_DRAINED request (QPAttr.
// SQDrainNotify with QPAttrEnSQDAsyncNotify) is a modifier of the one
// RTS→SQD transition it comes with (IBA 10.3.1, 11.6.3.2), not an attribute
// that stays: a later RTS→SQD without it raises nothing, one with it raises
// the event again, and one with it false raises nothing.
func TestSQDrainNotifyPerTransition(t *testing.T) {
	cases := []struct {
		name   string
		attr   QPAttr
		mask   QPAttrMask
		raised bool
	}{
		{"without-the-bit", QPAttr{State: QPSSQD}, QPAttrState, false},
		{"with-the-bit-false", QPAttr{State: QPSSQD}, QPAttrState | QPAttrEnSQDAsyncNotify, false},
		{"with-the-bit-true", QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState | QPAttrEnSQDAsyncNotify, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
			toSQD(t, a.qp) // a first drain, notified
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
			require.NoError(t, a.qp.Modify(&c.attr, c.mask))
			var types []AsyncEventType
			if c.raised {
				waitEvent(t, a.qp.dev, EventSQDrained)
			} else {
				types = eventTypes(drainEvents(a.qp.dev, 100*time.Millisecond))
			}
			require.NotContains(t, types, EventSQDrained, "SQ_DRAINED without the transition's request")
			require.Equal(t, c.raised, a.qp.Query().SQDrainNotify, "Query reports the drain's request")
		})
	}
}
