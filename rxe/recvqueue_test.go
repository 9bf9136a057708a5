package rxe

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecvQueueGrows fills a receive queue whose head is at an offset, so
// that its slots grow (from none) and wrap under posted WQEs, and checks
// that the WQEs come out in order with their own SGE lists, and that the
// queue refuses a WQE beyond max_recv_wr.
func TestRecvQueueGrows(t *testing.T) {
	for _, maxWR := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(maxWR), func(t *testing.T) {
			q := newRecvQueue(&Device{}, maxWR, 3)
			require.Zero(t, q.wqes.Slots(), "no slot before the first post")
			wr := func(id int) RecvWR {
				sges := make([]SGE, 1+id%3)
				for i := range sges {
					sges[i] = SGE{Addr: uint64(id*100 + i), Length: uint32(id + i), LKey: uint32(id)}
				}
				return RecvWR{ID: uint64(id), SGList: sges}
			}
			next, want := 0, 0
			for round := range 3 {
				// Post some, take half of them, then fill the queue.
				for range (maxWR + 1) / 2 {
					n, err := q.post([]RecvWR{wr(next)})
					require.NoError(t, err)
					require.Equal(t, 1, n)
					next++
				}
				for range q.Len() / 2 {
					got, ok := q.Peek()
					require.True(t, ok)
					require.Equal(t, wr(want), *got)
					q.Pop()
					want++
				}
				for q.Len() < maxWR {
					_, err := q.post([]RecvWR{wr(next)})
					require.NoError(t, err, "round %d", round)
					next++
				}
				n, err := q.post([]RecvWR{wr(next)})
				require.ErrorIs(t, err, ErrNoResources)
				require.Zero(t, n)
				require.Equal(t, maxWR, q.wqes.Slots())
				for q.Len() > 0 {
					got, ok := q.Peek()
					require.True(t, ok)
					require.Equal(t, wr(want), *got)
					q.Pop()
					want++
				}
			}
			require.Equal(t, next, want)
		})
	}
}
