package faults_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// TestRefusedDuplicateNotLost: when the inner Conn refuses the original of
// a duplicated datagram, the decision is taken back (the caller sends the
// datagram again and it is duplicated then), so its copy, which was not
// tried either, is not a lost datagram. Counters must add up: what the
// peer receives = sent − dropped + duplicated − lost.
func TestRefusedDuplicateNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string
		want []int
		dups uint64
	}{
		{"scripted", "dup=#3", []int{0, 1, 2, 2}, 1},
		{"always", "dup=1", []int{0, 0, 1, 1, 2, 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 2})
				fa := faults.Wrap(a, faults.Config{Seed: 1, Rules: mustRules(t, tc.rule+",dir=send")})
				defer fa.Close()
				in := make([]netdev.Message, 8)
				for i := range in {
					in[i].Buf = make([]byte, 256)
				}
				var got []int
				drain := func() {
					for len(got) < int(a.Stats().PacketsSent) {
						n, err := b.ReadBatch(in)
						require.NoError(t, err)
						for _, m := range in[:n] {
							got = append(got, int(packet.BTH(m.Buf).PSN()))
						}
					}
				}
				pkts := alternating(t, 3)
				msgs := make([]netdev.Message, len(pkts))
				for i, p := range pkts {
					msgs[i] = message(p)
				}
				for len(msgs) > 0 {
					n, err := fa.WriteBatch(msgs)
					if err != nil {
						require.ErrorIs(t, err, netdev.ErrLocalDrop)
					}
					msgs = msgs[n:]
					drain()
				}
				require.Equal(t, tc.want, got)
				st := fa.Stats().Send
				require.Equal(t, tc.dups, st.Duplicated)
				require.Zero(t, st.Lost, "no datagram was lost")
				require.Equal(t, uint64(len(got)), 3+st.Duplicated-st.Dropped-st.Lost)
			})
		})
	}
}
