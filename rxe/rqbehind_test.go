package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRQBehind checks that a QP's own receive queue running low sets
// Device.behind as an SRQ's does (TestSRQBehindYields): a take (the
// responder's Pop) during a batch that leaves the queue with fewer than
// half its max_recv_wr WQEs sets it, so that endBatch yields to the
// consumer, whose receive CQ may be sized for several QPs and so be far
// from half full. At or above half, or outside a batch, nothing is set.
// The rule is the same for every QP type.
func TestRQBehind(t *testing.T) {
	const maxWR = 8
	cases := []struct {
		name  string
		left  int  // WQEs left after the takes
		batch bool // the takes happen during a batch
		want  bool
	}{
		{"below half in a batch", maxWR/2 - 1, true, true},
		{"empty in a batch", 0, true, true},
		{"at half in a batch", maxWR / 2, true, false},
		{"above half in a batch", maxWR/2 + 1, true, false},
		{"below half outside a batch", 0, false, false},
	}
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
		for _, c := range cases {
			t.Run(typ.String()+"/"+c.name, func(t *testing.T) {
				d, cq := pipeCQ(t, "rqbehind", 64)
				pd, err := d.AllocPD()
				require.NoError(t, err)
				qp, err := pd.CreateQP(QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: maxWR}})
				require.NoError(t, err)
				for i := range maxWR {
					n, err := qp.rq.post([]RecvWR{{ID: uint64(i), SGList: []SGE{{Addr: uint64(i), Length: 64, LKey: 1}}}})
					require.NoError(t, err)
					require.Equal(t, 1, n)
				}
				qp.mu.Lock()
				rq := qp.recvSource()
				qp.mu.Unlock()
				if c.batch {
					d.batches.Add(1)
				}
				for range maxWR - c.left {
					_, ok := rq.Peek()
					require.True(t, ok)
					rq.Pop()
				}
				require.Equal(t, c.left, rq.Len())
				require.Equal(t, c.want, d.behind.Load())
				if c.batch {
					var scratch []*CQ
					d.endBatch(&scratch, false)
					require.False(t, d.behind.Load(), "endBatch clears behind")
				}
			})
		}
	}
}
