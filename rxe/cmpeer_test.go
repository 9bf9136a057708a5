package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDisconnectUnansweredIsTimeout: a Disconnect whose DREQ the peer
// never answers (it went silent) ends once the DREQ's retries run out,
// with ErrCMTimeout, the connection ended all the same (Done closed, the
// QP in ERR), as kernel rdma_cm reports a DREQ that timed out
// (RDMA_CM_EVENT_DISCONNECTED with -ETIMEDOUT). It used to return nil,
// as if the peer had answered.
func TestDisconnectUnansweredIsTimeout(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// 4.096 µs · 2^8 ≈ 1 ms plus twice the packet life time, twice.
	cc, sc := cmPairWith(ctx, t, da, db, 27, CMOptions{CMResponseTimeout: 8, MaxCMRetries: 1})

	mb.mute.Store(true) // the server's DREP never comes
	start := time.Now()
	require.ErrorIs(t, cc.Disconnect(ctx), ErrCMTimeout)
	require.Less(t, time.Since(start), 5*time.Second)
	closedWithin(t, cc.Done(), "the client's connection")
	require.Equal(t, QPSErr, cc.QP.State())
	closedWithin(t, sc.Done(), "the server's connection (it got the DREQ)")
}

// TestCMOptionsOutOfRange: Dial and ListenCM refuse options wider than the
// REQ's or the QP's fields, before anything goes out. Dial used to send a
// REQ with them cut to their bits (a MaxCMRetries of 16 said 0 at the
// peer, while this side retried 16 times; a retry count of 8 said 0), or
// fail after the REQ with the QP's Modify, or blame missing resources.
func TestCMOptionsOutOfRange(t *testing.T) {
	da, _ := cmDevices(t, "pipe")
	a := newCMEnd(t, da)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for name, mut := range map[string]func(*CMOptions){
		"Timeout 32":            func(o *CMOptions) { o.Timeout = 32 },
		"CMResponseTimeout 32":  func(o *CMOptions) { o.CMResponseTimeout = 32 },
		"MaxCMRetries 16":       func(o *CMOptions) { o.MaxCMRetries = 16 },
		"RetryCnt 8":            func(o *CMOptions) { o.RetryCnt = 8 },
		"RNRRetry 8":            func(o *CMOptions) { o.RNRRetry = 8 },
		"ResponderResources -1": func(o *CMOptions) { o.ResponderResources = -1 },
		"InitiatorDepth -1":     func(o *CMOptions) { o.InitiatorDepth = -1 },
	} {
		o := CMOptions{PD: a.pd, SendCQ: a.cq}
		mut(&o)
		_, err := Dial(ctx, da, "127.0.0.2:9", o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = da.ListenCM(9, o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	require.Zero(t, da.GSICounters().SentMADs, "no REQ went out")
}

// TestDisconnectRacingClose: a Disconnect that finds the device open and
// then its connection manager shut down (Device.Close ran in between: it
// sets closed, then shuts the CM down, which forgets every connection)
// returns ErrClosed, as it does when the device is closed before it; it
// used to take the forgotten connection for one the peer had ended and
// return nil.
func TestDisconnectRacingClose(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, _ := cmPair(ctx, t, da, db, 28)
	// The part of Close that Disconnect can meet after its check of
	// closed: the CM is shut down.
	da.gsiOf().shutdown()
	require.ErrorIs(t, cc.Disconnect(ctx), ErrClosed)
	closedWithin(t, cc.Done(), "the connection")
}
