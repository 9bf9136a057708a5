package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCQOverflowAgainRaisesCQErr: a CQ that overflowed, was polled and
// overflows again raises CQ_ERR again (rxe_cq_post raises IB_EVENT_CQ_ERR
// at every completion that finds the queue full): the QP failed by the
// second overflow is not left without an event. Completions that find the
// CQ still full after an overflow, before it is polled, raise no more.
func TestCQOverflowAgainRaisesCQErr(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQ(1, -1)
	require.NoError(t, err)
	wc := WC{ID: 1, Status: WCSuccess, Opcode: WCRDMAWrite}
	overflow := func() {
		require.True(t, cq.push(&wc, false))
		require.False(t, cq.push(&wc, false))
		require.False(t, cq.push(&wc, false), "still full: no second event")
	}
	overflow()
	ev, others := waitEvent(t, d, EventCQErr)
	require.Same(t, cq, ev.CQ)
	require.Empty(t, others)
	require.Empty(t, drainEvents(d, 5*time.Millisecond), "one CQ_ERR for the overflow")

	wcs := make([]WC, 2)
	require.Equal(t, 1, cq.Poll(wcs))
	overflow()
	ev, others = waitEvent(t, d, EventCQErr)
	require.Same(t, cq, ev.CQ)
	require.Empty(t, others)
	require.Empty(t, drainEvents(d, 5*time.Millisecond))
}
