package faults_test

import (
	"math"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
)

// discard is a Conn that takes every datagram and counts them.
type discard struct{ sent int }

func (d *discard) ReadBatch([]netdev.Message) (int, error) { select {} }
func (d *discard) WriteBatch(m []netdev.Message) (int, error) {
	d.sent += len(m)
	return len(m), nil
}
func (d *discard) BatchSize() int            { return 64 }
func (d *discard) LocalAddr() netip.AddrPort { return netdev.DefaultPipeAddrA }
func (d *discard) Close() error              { return nil }

// TestProbabilities checks that probabilistic rules fire as often as they
// claim: the count over n datagrams is within 5 standard deviations of
// the binomial mean (a fixed seed makes the outcome fixed; the bound says
// a correct generator passes for almost every seed). Rules of a direction
// draw independently and the first that fires wins, and an opcode filter
// restricts both the draws and the firing.
func TestProbabilities(t *testing.T) {
	const n = 200000
	pkts := alternating(t, 2) // RC_SEND_MIDDLE, RC_RDMA_READ_RESPONSE_MIDDLE
	type want struct {
		action faults.Action
		p      float64 // per datagram sent
	}
	for _, tc := range []struct {
		specs []string
		want  []want
	}{
		{[]string{"drop=0.001"}, []want{{faults.Drop, 0.001}}},
		{[]string{"drop=1%"}, []want{{faults.Drop, 0.01}}},
		{[]string{"corrupt=0.3"}, []want{{faults.Corrupt, 0.3}}},
		{[]string{"dup=0.999"}, []want{{faults.Duplicate, 0.999}}},
		{[]string{"drop=0.5", "dup=0.5"}, []want{{faults.Drop, 0.5}, {faults.Duplicate, 0.25}}},
		{[]string{"drop=0.2,op=RC_SEND_MIDDLE", "corrupt=0.5"}, []want{{faults.Drop, 0.1}, {faults.Corrupt, 0.45}}},
	} {
		for _, seed := range []uint64{1, 2, 99} {
			var specs []string
			for _, s := range tc.specs {
				specs = append(specs, s+",dir=send")
			}
			d := &discard{}
			fc := faults.Wrap(d, faults.Config{Seed: seed, Rules: mustRules(t, specs...)})
			msgs := make([]netdev.Message, 64)
			for sent := 0; sent < n; {
				k := min(len(msgs), n-sent)
				for i := range msgs[:k] {
					msgs[i] = message(pkts[(sent+i)%2])
				}
				w, err := fc.WriteBatch(msgs[:k])
				require.NoError(t, err)
				sent += w
			}
			st := fc.Stats().Send
			for _, w := range tc.want {
				got := float64(statOf(st, w.action))
				mean, sd := n*w.p, math.Sqrt(n*w.p*(1-w.p))
				require.InDelta(t, mean, got, 5*sd, "%v seed %d: %v", tc.specs, seed, w.action)
			}
			require.Equal(t, int(n-st.Dropped+st.Duplicated), d.sent, "counters add up")
		}
	}
}
