package perftest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/rxe"
)

// TestWatchQuietLateTick: an -R exchange wait's watch (watchQuiet) times
// the silence from when it saw the packet count move, not from when the
// tick that woke it was due. A watch that runs late (a loaded host) reads
// a tick due long before; had it dated the packets it then saw to that
// tick, it would end the wait after less than the silence bound of
// actual silence (TestCMExchangeBoundsSilenceUD: a wait that ended after
// 566 ms of its peer's 600 ms of SENDs). It still ends the wait once the
// count has not moved for the bound.
func TestWatchQuietLateTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const silence = 250 * time.Millisecond
		p := &cmPipe{st: &cmState{silence: silence}, conn: &rxe.CMConn{}}
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		tick := make(chan time.Time)
		var heard atomic.Uint64
		start := time.Now()
		go p.watchQuiet(ctx, cancel, tick, nil, func() uint64 { return heard.Load() }, nil)
		synctest.Wait()

		// Packets came; the watch reads the tick due at 62.5 ms only at
		// 200 ms.
		time.Sleep(200 * time.Millisecond)
		heard.Add(1)
		tick <- start.Add(silence / 4)
		synctest.Wait()
		// At 320 ms nothing more came: 120 ms of silence since it saw
		// the packets, 257.5 ms since the late tick was due.
		time.Sleep(120 * time.Millisecond)
		tick <- time.Now()
		synctest.Wait()
		require.NoError(t, context.Cause(ctx), "120 ms of silence is less than the bound")

		// At 460 ms: 260 ms of silence.
		time.Sleep(140 * time.Millisecond)
		tick <- time.Now()
		synctest.Wait()
		require.Equal(t, errPeerSilent{silence}, context.Cause(ctx))
	})
}

// TestSilentPipeLateTick: the TCP exchange's silence watch (silentPipe)
// times the silence from when it saw the test QPs' packet count move, not
// from when the tick that woke it was due, as watchQuiet does; and it
// still ends the Recv under way once the count has not moved for the
// bound.
func TestSilentPipeLateTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const silence = 250 * time.Millisecond
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		p := &silentPipe{conn: c1, silence: silence}
		tick := make(chan time.Time)
		ended := make(chan bool, 1)
		var heard atomic.Uint64
		start := time.Now()
		go func() { ended <- p.watch(nil, tick, func() uint64 { return heard.Load() }) }()
		synctest.Wait()

		// Packets came; the watch reads the tick due at 62.5 ms only at
		// 200 ms.
		time.Sleep(200 * time.Millisecond)
		heard.Add(1)
		tick <- start.Add(silence / 4)
		synctest.Wait()
		// At 320 ms: 120 ms of silence since it saw the packets, 257.5
		// ms since the late tick was due.
		time.Sleep(120 * time.Millisecond)
		tick <- time.Now()
		synctest.Wait()
		require.Empty(t, ended, "120 ms of silence is less than the bound")

		// At 460 ms: 260 ms of silence; the Recv under way ends.
		time.Sleep(140 * time.Millisecond)
		tick <- time.Now()
		synctest.Wait()
		require.True(t, <-ended)
	})
}
