package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestTimerFiredBeforeStalePass: a QP's wake-up fires while the QP is
// already on the run queue (its schedule is then a no-op), and the pass
// that takes the QP started before the deadline. A pass that read the
// clock once, before the deadline, would neither run the requester's
// timeout nor file a new wake-up, and the RNR wait would never end; the
// step reads the clock after taking the QP off the run queue. The test
// plays the transmit goroutine (holding txMu, white box: the QP's vector's
// run queue and the QP's step) and requires that the expiry is seen and the
// SEND retried.
func TestTimerFiredBeforeStalePass(t *testing.T) {
	o := qpOpts{minRNRTimer: 18} // 5.12 ms RNR wait
	a, b := smallPair(t, "pipe", o, o)
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	d := a.qp.vec
	var stale, due time.Time
	// The test must take txMu while an RNR wait runs. On a loaded host
	// the wait can end first (the SEND is then retried and draws another
	// RNR NAK, every 5 ms): that attempt proves nothing, and the test
	// takes the next wait.
	for try, naks := 0, uint64(0); ; try++ {
		require.Less(t, try, 50, "the test never took the transmit path during an RNR wait")
		require.Eventually(t, func() bool { return a.qp.Counters().Requester.RcvdRNRErr > naks },
			testutil.Bound(), time.Millisecond, "the SEND draws an RNR NAK")
		d.txMu.Lock()
		stale = time.Now()
		a.qp.mu.Lock()
		due = a.qp.req.Deadline()
		naks = a.qp.req.Counters().RcvdRNRErr
		a.qp.mu.Unlock()
		if stale.Before(due) {
			break // the RNR wait is still running
		}
		d.txMu.Unlock()
	}
	held := true // a failed require below frees txMu, or the cleanup's Close would wait for it
	defer func() {
		if held {
			d.txMu.Unlock()
		}
	}()
	time.Sleep(time.Until(due) + 2*time.Millisecond) // the timer fires: the QP is queued
	require.Eventually(t, d.runnable, testutil.Bound(), time.Millisecond)
	require.Same(t, a.qp, d.nextRunnable())
	a.qp.step(d.txMsgs, d.txOwners, 0) // reads the clock after dequeuing: the expiry is seen
	held = false
	d.txMu.Unlock()

	_, err = b.qp.PostRecv(RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(0, 64)}})
	require.NoError(t, err)
	wc := waitWCs(t, a.cq, 1)
	require.Equal(t, WCSuccess, wc[0].Status, "the SEND is retried after the RNR wait")
}
