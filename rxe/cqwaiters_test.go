package rxe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestCQTwoWaiters: two goroutines sleep in CQ.Wait on one CQ, each
// asking for one completion, and two completions arrive (the flush
// completions of two send WRs posted on a QP in ERR, outside any receive
// batch): each Wait returns one.
func TestCQTwoWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, _ := netdev.NewPipe()
		d, err := Open(ca, Options{Name: "waiters", OwnConn: true, CompVectors: 1})
		require.NoError(t, err)
		defer d.Close()
		pd, err := d.AllocPD()
		require.NoError(t, err)
		cq, err := d.CreateCQ(16, -1)
		require.NoError(t, err)
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
		require.NoError(t, qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := make(chan error, 2)
		for range 2 {
			go func() {
				wcs := make([]WC, 1)
				_, err := cq.Wait(ctx, wcs)
				got <- err
			}()
		}
		synctest.Wait() // both waiters sleep in Wait
		n, err := qp.PostSend(SendWR{ID: 1, Opcode: WRSend}, SendWR{ID: 2, Opcode: WRSend})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for i := range 2 {
			require.NoError(t, <-got, "waiter %d (CQ holds %d completions)", i, cq.Len())
		}
	})
}

// TestCQTwoWaitersOneBatch: as TestCQWakeOncePerBatch, two SENDs reach
// the responder's device in one receive batch, and two goroutines sleep in
// CQ.Wait on its receive CQ, each asking for one completion: each Wait
// returns one. The batch's one wake-up reached one waiter, which took one
// completion and returned, and the other slept on with a completion
// queued; a Wait that leaves completions now hands the wake-up on.
func TestCQTwoWaitersOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const msgs = 2
		a, b := burstPair(t, msgs)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := make(chan error, msgs)
		for range msgs {
			go func() {
				wcs := make([]WC, 1)
				_, err := b.cq.Wait(ctx, wcs)
				got <- err
			}()
		}
		synctest.Wait() // both waiters sleep in Wait
		for i := range msgs {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{a.mr.SGE(i*64, 64)}})
			require.NoError(t, err)
		}
		for i := range msgs {
			require.NoError(t, <-got, "waiter %d (the CQ holds %d completions)", i, b.cq.Len())
		}
	})
}
