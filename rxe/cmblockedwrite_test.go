package rxe

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// writeWatch is a netdev.Conn that counts the WriteBatch calls under way,
// so that a test knows when one is blocked.
type writeWatch struct {
	netdev.Conn
	writing atomic.Int32
}

func (w *writeWatch) WriteBatch(msgs []netdev.Message) (int, error) {
	w.writing.Add(1)
	defer w.writing.Add(-1)
	return w.Conn.WriteBatch(msgs)
}

// TestCMWhileMADWriteBlocked: a CM MAD whose write blocks (a netdev that
// waits for room, here a pipe holding one datagram that nobody reads)
// holds up no other CM call: the device's QP1 counters, a Dial whose
// context ends and Device.Close all return within a bound, and the Dials
// waiting for an answer then return ErrClosed. The MADs were written under
// the CM's lock, which each of those calls takes, so they waited for the
// write, and Close, whose closing of the netdev is what ends such a write,
// never returned.
func TestCMWhileMADWriteBlocked(t *testing.T) {
	checkGoroutines(t)
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
	w := &writeWatch{Conn: ca}
	d, err := Open(w, Options{Name: "cm-blocked", LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	t.Cleanup(func() { cb.Close() }) // first: ends a write still blocked if the test fails
	client := newCMEnd(t, d)
	opts := CMOptions{PD: client.pd, SendCQ: client.cq}
	peer := cb.LocalAddr().Addr().String() + ":7500"

	dials := make(chan error, 2)
	for range 2 { // the first REQ fills the pipe, the second one's write blocks
		go func() {
			_, err := Dial(context.Background(), d, peer, opts)
			dials <- err
		}()
	}
	require.Eventually(t, func() bool { return w.writing.Load() == 1 }, 5*time.Second, time.Millisecond,
		"a REQ's write is blocked")

	within := func(what string, f func() error) error {
		t.Helper()
		res := make(chan error, 1)
		go func() { res <- f() }()
		select {
		case err := <-res:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked behind a MAD's write", what)
			return nil
		}
	}
	require.NoError(t, within("GSICounters", func() error {
		d.GSICounters()
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, within("a Dial whose context ends", func() error {
		_, err := Dial(ctx, d, peer, opts)
		return err
	}), context.DeadlineExceeded)
	require.NoError(t, within("Device.Close", d.Close))
	for i := range 2 {
		require.ErrorIs(t, within("a waiting Dial after Close", func() error { return <-dials }), ErrClosed, "Dial %d", i)
	}
}
