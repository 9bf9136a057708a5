package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAcceptWithEndedContextLeavesRequestQueued: an Accept or AcceptWith
// whose context has already ended returns its error without taking a
// queued request, which the next call with a live context connects (the
// peer's Dial succeeds instead of getting a REJ).
func TestAcceptWithEndedContextLeavesRequestQueued(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	l, err := db.ListenCM(7495, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dialed := async(func() (*CMConn, error) {
		return Dial(ctx, da, db.Addr().Addr().String()+":7495", CMOptions{PD: client.pd, SendCQ: client.cq})
	})
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, 10*time.Second, time.Millisecond, "the request is queued")
	ended, end := context.WithCancel(context.Background())
	end()
	for range 20 { // select picks among ready cases at random
		_, err := l.Accept(ended)
		require.ErrorIs(t, err, context.Canceled)
		_, err = l.AcceptWith(ended, CMOptions{PD: server.pd, SendCQ: server.cq})
		require.ErrorIs(t, err, context.Canceled)
	}
	require.Zero(t, l.Counters(), "no request was taken")
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	defer sc.Close()
	r := <-dialed
	require.NoError(t, r.err)
	defer r.c.Close()
}

// TestDialWithEndedContextSendsNothing: a Dial whose context has already
// ended returns its error before a REQ goes out: the peer sees neither a
// REQ nor the REJ withdrawing it.
func TestDialWithEndedContextSendsNothing(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	l, err := db.ListenCM(7496, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	defer l.Close()
	ended, end := context.WithCancel(context.Background())
	end()
	_, err = Dial(ended, da, db.Addr().Addr().String()+":7496", CMOptions{PD: client.pd, SendCQ: client.cq})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, da.GSICounters().SentMADs, "no REQ (or REJ) went out")
}
