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

// TestLateTick: the exchange's silence watches, -R's (watchQuiet) and the
// TCP exchange's (silentPipe), time the silence from when they saw the
// packet count move, not from when the tick that woke them was due. A
// watch that runs late (a loaded host) reads a tick due long before; had
// it dated the packets it then saw to that tick, it would end the wait
// after less than the silence bound of actual silence
// (TestCMExchangeBoundsSilenceUD: a wait that ended after 566 ms of its
// peer's 600 ms of SENDs). Each still ends the wait once the count has
// not moved for the bound.
func TestLateTick(t *testing.T) {
	const silence = 250 * time.Millisecond
	for _, w := range []struct {
		name string
		// start runs the watch on tick and heard and returns whether it
		// has ended the wait.
		start func(t *testing.T, tick <-chan time.Time, heard func() uint64) (ended func() bool)
	}{
		{"watchQuiet", func(t *testing.T, tick <-chan time.Time, heard func() uint64) func() bool {
			p := &cmPipe{st: &cmState{silence: silence}, conn: &rxe.CMConn{}}
			ctx, cancel := context.WithCancelCause(context.Background())
			t.Cleanup(func() { cancel(nil) })
			go p.watchQuiet(ctx, cancel, tick, nil, heard, nil)
			return func() bool {
				err := context.Cause(ctx)
				require.True(t, err == nil || err == (errPeerSilent{silence}), "%v", err)
				return err != nil
			}
		}},
		{"silentPipe", func(t *testing.T, tick <-chan time.Time, heard func() uint64) func() bool {
			c1, c2 := net.Pipe()
			t.Cleanup(func() { c1.Close(); c2.Close() })
			p := &silentPipe{conn: c1, silence: silence}
			var ended atomic.Bool
			go func() { ended.Store(p.watch(nil, tick, heard)) }()
			return ended.Load
		}},
	} {
		t.Run(w.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tick := make(chan time.Time)
				var heard atomic.Uint64
				start := time.Now()
				ended := w.start(t, tick, heard.Load)
				synctest.Wait()

				// Packets came; the watch reads the tick due at 62.5 ms
				// only at 200 ms.
				time.Sleep(200 * time.Millisecond)
				heard.Add(1)
				tick <- start.Add(silence / 4)
				synctest.Wait()
				// At 320 ms nothing more came: 120 ms of silence since it
				// saw the packets, 257.5 ms since the late tick was due.
				time.Sleep(120 * time.Millisecond)
				tick <- time.Now()
				synctest.Wait()
				require.False(t, ended(), "120 ms of silence is less than the bound")

				// At 460 ms: 260 ms of silence.
				time.Sleep(140 * time.Millisecond)
				tick <- time.Now()
				synctest.Wait()
				require.True(t, ended(), "260 ms of silence")
			})
		})
	}
}
