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
