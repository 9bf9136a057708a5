package faults

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProbabilityThreshold: a rule by probability fires when its draw is
// below the threshold (Prob × 2^64), not when it equals it, so that it
// fires with probability Prob exactly.
func TestProbabilityThreshold(t *testing.T) {
	tests := []struct {
		name  string
		delta int64 // threshold minus the next draw
		fires bool
	}{
		{"threshold one above the draw", 1, true},
		{"threshold equal to the draw", 0, false},
		{"threshold one below the draw", -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := compile(&Config{Seed: 7, Rules: []Rule{{Action: Drop, Prob: 0.5}}}, Send)
			require.Len(t, e.rules, 1)
			r := &e.rules[0]
			peek := r.pcg // a copy: the next draw without advancing the rule's generator
			r.thresh = uint64(int64(peek.Uint64()) + tc.delta)
			d := e.decide([]byte("datagram"))
			require.Equal(t, tc.fires, d.rule != nil)
		})
	}
}

// TestQueueFreeListBounded: the free list of datagram copies keeps at most
// max of them (Config.MaxQueue), so a burst does not pin its memory.
func TestQueueFreeListBounded(t *testing.T) {
	q := queue{max: 2}
	for range 5 {
		q.put(new(dgram))
	}
	require.Len(t, q.free, 2)
}
