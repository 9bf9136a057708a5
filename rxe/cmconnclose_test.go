package rxe

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/rxe/cm"
	"github.com/stretchr/testify/require"
)

// hasWaiter reports whether d's GSI still hands connection id's events to
// a waiter.
func hasWaiter(d *Device, id cm.ID) bool {
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters[id] != nil
}

// TestCMConnCloseEndsWithoutWaiting: Close ends a connection at once, as
// rdma_destroy_id does, even when the peer will never answer its DREQ:
// the QP is in ERR, Done is closed and the connection's waiter forgotten,
// while the DREQ, which reaches the peer and ends its side, is resent in
// the background. There was no way to end a connection without waiting
// for a DREP or a context: one whose QP was destroyed without Disconnect
// stayed established in both CMs until a device closed.
func TestCMConnCloseEndsWithoutWaiting(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, sc := cmPair(ctx, t, da, db, 40)

	mb.mute.Store(true) // the server's DREP never comes
	res := make(chan error, 1)
	go func() { res <- cc.Close() }()
	// The DREQ's first retry would come after about 4.3 s (the CM response
	// timeout 20): Close must not wait for it.
	require.NoError(t, returnsWithin(t, res, "Close"))
	closedWithin(t, cc.Done(), "the closed connection")
	require.Equal(t, QPSErr, cc.QP.State())
	require.False(t, hasWaiter(da, cc.id), "Close forgets the connection's waiter")
	require.Equal(t, cm.StateDREQSent, cmAgentState(da, cc.id), "the DREQ is resent in the background")
	closedWithin(t, sc.Done(), "the peer's connection (it got the DREQ)")
	require.Equal(t, QPSErr, sc.QP.State())

	require.NoError(t, cc.Close(), "Close is idempotent")
	require.ErrorIs(t, cc.Disconnect(ctx), ErrClosed, "Disconnect after Close")
	require.NoError(t, cc.QP.Destroy(), "the QP stays the caller's")
}

// TestCMConnCloseAfterEnd: Close of a connection that has already ended
// sends nothing and keeps the reason it ended with, whoever ended it.
func TestCMConnCloseAfterEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, ctx context.Context, da, db *Device, cc, sc *CMConn)
		want error // what Disconnect reports after the Close
	}{
		{"peer disconnected", func(t *testing.T, ctx context.Context, _, _ *Device, cc, sc *CMConn) {
			require.NoError(t, sc.Disconnect(ctx))
			closedWithin(t, cc.Done(), "the client's connection")
		}, nil},
		{"Disconnect", func(t *testing.T, ctx context.Context, _, _ *Device, cc, _ *CMConn) {
			require.NoError(t, cc.Disconnect(ctx))
		}, nil},
		{"device closed", func(t *testing.T, _ context.Context, da, _ *Device, cc, _ *CMConn) {
			require.NoError(t, da.Close())
			closedWithin(t, cc.Done(), "the client's connection")
		}, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := cmDevices(t, "pipe")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cc, sc := cmPair(ctx, t, da, db, 41)
			tc.end(t, ctx, da, db, cc, sc)
			sent := da.GSICounters().SentMADs
			require.NoError(t, cc.Close())
			require.Equal(t, sent, da.GSICounters().SentMADs, "Close of an ended connection sends nothing")
			require.Equal(t, tc.want, cc.Disconnect(ctx))
			require.Equal(t, QPSErr, cc.QP.State())
		})
	}
}

// TestCMConnCloseRacesDisconnect: a Close while a Disconnect waits for
// its DREP (the peer went silent) ends that wait with ErrClosed at once;
// Closes and Disconnects racing from several goroutines, and the device's
// Close, end the connection once (run with -race).
func TestCMConnCloseRacesDisconnect(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, _ := cmPair(ctx, t, da, db, 42)
	res := unansweredDisconnect(context.Background(), t, da, mb, cc)
	require.NoError(t, cc.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Disconnect"), ErrClosed)

	mb.mute.Store(false)
	cc, _ = cmPair(ctx, t, da, db, 43)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				cc.Close()
			} else {
				cc.Disconnect(ctx)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		da.Close()
	}()
	wg.Wait()
	closedWithin(t, cc.Done(), "the connection")
	require.Equal(t, QPSErr, cc.QP.State())
}

// TestDisconnectWaitsForAnotherDREQ: a Disconnect that finds the DREQ
// already sent by another Disconnect waits for the same end (here, until
// its own ctx ends) instead of returning nil at once as if the peer had
// answered.
func TestDisconnectWaitsForAnotherDREQ(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, _ := cmPair(ctx, t, da, db, 44)
	res := unansweredDisconnect(ctx, t, da, mb, cc)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, cc.Disconnect(short), context.DeadlineExceeded)
	closedWithin(t, cc.Done(), "the connection")
	require.NoError(t, returnsWithin(t, res, "the first Disconnect"))
}

// TestDisconnectCancelledContext: Disconnect with a context already ended
// still disconnects — the DREQ goes out, the peer's side ends, the QP is
// in ERR — and returns the context's error without waiting for the DREP:
// ctx bounds the wait, not the disconnect.
func TestDisconnectCancelledContext(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, sc := cmPair(ctx, t, da, db, 45)
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	require.ErrorIs(t, cc.Disconnect(ended), context.Canceled)
	closedWithin(t, cc.Done(), "the connection")
	require.Equal(t, QPSErr, cc.QP.State())
	closedWithin(t, sc.Done(), "the peer's connection (it got the DREQ)")
}

// TestDestroyCMQPEndsConnection: destroying a connection's QP without
// Close or Disconnect ends the connection on both sides (the peer gets a
// DREQ), and flushes nothing to the destroyed QP's CQ. Before, such a
// connection stayed established in both CMs until a device closed.
func TestDestroyCMQPEndsConnection(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			da, db := cmDevices(t, "pipe")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cc, sc := cmPair(ctx, t, da, db, 42)
			gone, peer := cc, sc
			if side == "server" {
				gone, peer = sc, cc
			}
			_, err := gone.QP.PostRecv(RecvWR{ID: 1})
			require.NoError(t, err)
			require.NoError(t, gone.QP.Destroy())
			closedWithin(t, gone.Done(), "the destroyed QP's connection")
			closedWithin(t, peer.Done(), "the peer's connection (it got the DREQ)")
			require.Equal(t, QPSErr, peer.QP.State())
			var wc [4]WC
			require.Zero(t, gone.QP.recvCQ.Poll(wc[:]), "Destroy flushes nothing")
			require.ErrorIs(t, gone.Disconnect(ctx), ErrClosed)
		})
	}
}

// TestCloseWhileDREPReturns: the DREP that answers Close's DREQ may come
// back before Close has ended the connection (here Close is held until
// the DREP has moved the CM to time-wait). The connection still ends as
// closed: a later Disconnect returns ErrClosed, not nil as for a
// connection the peer ended.
func TestCloseWhileDREPReturns(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, sc := cmPair(ctx, t, da, db, 46)
	g := da.gsiOf()
	cc.closeGap = func() {
		require.Eventually(t, func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.agent.State(cc.id) == cm.StateTimeWait
		}, 5*time.Second, time.Millisecond, "the DREP did not come")
		// The DREP's event, if it still had a waiter, is on its way to
		// watch, which would end the connection: give it a second.
		select {
		case <-cc.Done():
		case <-time.After(time.Second):
		}
	}
	require.NoError(t, cc.Close())
	closedWithin(t, cc.Done(), "the connection")
	closedWithin(t, sc.Done(), "the peer's connection (it got the DREQ)")
	require.ErrorIs(t, cc.Disconnect(ctx), ErrClosed)
}
