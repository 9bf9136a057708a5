package rxe

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestRunQueueHoldsQPOnce: a QP scheduled again before a transmit pass
// has taken it is on its vector's run queue once, as an rxe task
// scheduled while it is already scheduled runs once.
func TestRunQueueHoldsQPOnce(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	e := smallEnd(t, da, nil, qpOpts{})
	v := e.qp.vec
	v.txMu.Lock() // no transmit pass takes the QP meanwhile
	defer v.txMu.Unlock()
	for range 3 {
		v.schedule(e.qp)
	}
	v.runMu.Lock()
	n := v.runq.Len()
	v.runMu.Unlock()
	require.Equal(t, 1, n, "entries on the run queue")
}

// TestHeldDatagramsOverManyPasses: held datagrams that do not fit one
// transmit pass go out over several, the QP queued again after each pass
// that left some (stepHeld), and DropRetries, the times a QP sends its
// held datagrams again after its back-off (QPCounters), counts one
// however many passes that takes.
func TestHeldDatagramsOverManyPasses(t *testing.T) {
	const held, room = 64, 24
	da, _ := newDevices(t, "pipe")
	qp := initQP(t, da)
	v := qp.vec
	v.txMu.Lock() // the test is the vector's transmit pass
	defer v.txMu.Unlock()
	msgs := make([]netdev.Message, held)
	owners := make([]*QP, held)
	gens := make([]uint32, held)
	for i := range msgs {
		msgs[i] = netdev.Message{Buf: make([]byte, maxPacket), N: 64}
		owners[i] = qp
	}
	qp.takeBack(msgs, owners, gens) // the whole batch refused
	qp.mu.Lock()
	qp.localDrop.until = time.Time{} // the back-off is over
	passes, notQueued := 0, 0
	for qp.localDrop.holding() && passes < held {
		for q := v.nextRunnable(); q != nil; q = v.nextRunnable() {
			q.queued.Store(false) // as a step of the QP would
		}
		qp.stepHeld(time.Now(), msgs[:room], owners, 0)
		passes++
		if qp.localDrop.holding() && !qp.queued.Load() {
			notQueued++
		}
	}
	qp.mu.Unlock()
	require.Zero(t, notQueued, "passes that left held datagrams and did not queue the QP again")
	require.Equal(t, 3, passes, "passes to send the held datagrams")
	require.Equal(t, uint64(1), qp.Counters().DropRetries)
}
