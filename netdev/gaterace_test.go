package netdev

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGateTakeRacesUnlock runs a blocking reader's take of a held gate
// against the holder's Unlock, round after round, both released at once:
// whatever their interleaving, exactly one of them ends holding the gate
// (take returns true, or Unlock retakes it), so a datagram the reader
// left to the holder is read. The holder may unlock between take's first
// try and its record of the miss; take's second try is what catches that
// (without it both end without the gate once that interleaving comes up:
// within the rounds in every run under -race, in some runs without).
func TestGateTakeRacesUnlock(t *testing.T) {
	const rounds = 200000 // the unlock lands in take's window in some of them
	var g Gate
	var go1, done atomic.Int64 // the round the reader may start, and the round it finished
	var took atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for r := int64(1); ; r++ {
			for go1.Load() < r {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
			took.Store(g.take())
			done.Store(r)
		}
	}()
	for r := int64(1); r <= rounds; r++ {
		require.True(t, g.TryLock(), "round %d: the gate is free", r)
		go1.Store(r)
		retaken := g.Unlock()
		for done.Load() < r {
			runtime.Gosched()
		}
		require.NotEqual(t, took.Load(), retaken, "round %d: take %v, Unlock retook %v", r, took.Load(), retaken)
		g.mu.Unlock()
		g.missed.Store(false) // a miss recorded by the one that took the gate is stale
	}
}
