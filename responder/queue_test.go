package responder

import (
	"fmt"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestOutQueueGrows fills the output queue, with its start at an offset,
// up to its bound, so that it grows (from nothing) and wraps under queued
// items, and checks that they come out in order.
func TestOutQueueGrows(t *testing.T) {
	for _, bound := range []int{1, 5, 80} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			var q outQueue
			q.init(bound)
			require.Empty(t, q.items)
			next, want := 0, 0
			for range 3 {
				for range (bound + 1) / 2 {
					q.push().psn = packet.PSN(next)
					next++
				}
				for range q.n / 2 {
					require.Equal(t, packet.PSN(want), q.head().psn)
					q.pop()
					want++
				}
				for q.free() > 0 {
					q.push().psn = packet.PSN(next)
					next++
				}
				require.Len(t, q.items, bound)
				require.Equal(t, packet.PSN(next-1), q.tail().psn)
				for q.n > 0 {
					require.Equal(t, packet.PSN(want), q.head().psn)
					q.pop()
					want++
				}
			}
			require.Equal(t, next, want)
		})
	}
}
