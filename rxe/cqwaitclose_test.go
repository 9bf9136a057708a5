package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCQWaitTakesCompletionsAtClose: a Wait that sleeps when the device
// closes returns the completions queued by then before ErrClosed (CQ.Wait),
// even one whose wake-up was still deferred to the end of a batch.
func TestCQWaitTakesCompletionsAtClose(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQ(4, -1)
	require.NoError(t, err)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		wcs := make([]WC, 4)
		n, err := cq.Wait(context.Background(), wcs)
		done <- result{n, err}
	}()
	time.Sleep(2 * time.Millisecond) // let Wait sleep (if not, it polls the completion first)
	// A completion whose wake-up a batch under way holds back (wakeWaiter).
	cq.wakePending.Store(true)
	require.True(t, cq.push(&WC{ID: 7, Status: WCSuccess, Opcode: WCRecv}, false))
	require.NoError(t, d.Close())
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n)
	case <-time.After(testutil.Bound()):
		t.Fatal("Wait did not return after Close")
	}
	n, err := cq.Wait(context.Background(), make([]WC, 1))
	require.ErrorIs(t, err, ErrClosed)
	require.Zero(t, n)
}
