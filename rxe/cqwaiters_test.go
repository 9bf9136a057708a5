package rxe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// waited is what one CQ.Wait returned.
type waited struct {
	n   int
	wc  WC
	err error
}

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
		require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		require.NoError(t, qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := make(chan waited, 2)
		for range 2 {
			go func() {
				wcs := make([]WC, 1)
				n, err := cq.Wait(ctx, wcs)
				got <- waited{n, wcs[0], err}
			}()
		}
		synctest.Wait() // both waiters sleep in Wait
		n, err := qp.PostSend(SendWR{ID: 1, Opcode: WRSend}, SendWR{ID: 2, Opcode: WRSend})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		var ids []uint64
		for i := range 2 {
			w := <-got
			require.NoError(t, w.err, "waiter %d (CQ holds %d completions)", i, cq.Len())
			require.Equal(t, 1, w.n, "waiter %d", i)
			require.Equal(t, WCWRFlushErr, w.wc.Status, "waiter %d", i)
			ids = append(ids, w.wc.ID)
		}
		require.ElementsMatch(t, []uint64{1, 2}, ids, "each waiter took one of the two completions")
		require.Zero(t, cq.Len())
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
		got := make(chan waited, msgs)
		for range msgs {
			go func() {
				wcs := make([]WC, 1)
				n, err := b.cq.Wait(ctx, wcs)
				got <- waited{n, wcs[0], err}
			}()
		}
		synctest.Wait() // both waiters sleep in Wait
		for i := range msgs {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{a.mr.SGE(i*64, 64)}})
			require.NoError(t, err)
		}
		var ids []uint64
		for i := range msgs {
			w := <-got
			require.NoError(t, w.err, "waiter %d (the CQ holds %d completions)", i, b.cq.Len())
			require.Equal(t, 1, w.n, "waiter %d", i)
			require.Equal(t, WCSuccess, w.wc.Status, "waiter %d", i)
			require.Equal(t, WCRecv, w.wc.Opcode, "waiter %d", i)
			require.Equal(t, uint32(64), w.wc.ByteLen, "waiter %d", i)
			ids = append(ids, w.wc.ID)
		}
		require.ElementsMatch(t, []uint64{0, 1}, ids, "each waiter took one receive")
		require.Zero(t, b.cq.Len())
	})
}
