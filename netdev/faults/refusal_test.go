package faults_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// sendThrough sends pkts through a faults.Conn with rules over a pipe whose
// queue holds queue datagrams and whose batch size is batch (the faults
// Conn hands the pipe at most that many at a time), in batches of 7,
// reading the pipe's other end after every batch and sending again what a
// local drop refused. It returns the PSNs in the order they arrived and
// how many batches were refused in part, and the send side's statistics.
func sendThrough(t *testing.T, queue, batch int, seed uint64, rules []faults.Rule, pkts [][]byte) (got []int, refused int, st faults.DirStats) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: queue, BatchSize: batch})
		fa := faults.Wrap(a, faults.Config{Seed: seed, Rules: rules})
		defer fa.Close()
		msgs := make([]netdev.Message, len(pkts))
		for i, p := range pkts {
			msgs[i] = message(p)
		}
		in := make([]netdev.Message, 8)
		for i := range in {
			in[i].Buf = make([]byte, 256)
		}
		drain := func() {
			for len(got) < int(a.Stats().PacketsSent) {
				n, err := b.ReadBatch(in)
				require.NoError(t, err)
				for _, m := range in[:n] {
					got = append(got, int(packet.BTH(m.Buf).PSN()))
				}
			}
		}
		for len(msgs) > 0 {
			k, err := fa.WriteBatch(msgs[:min(7, len(msgs))])
			if err != nil {
				require.ErrorIs(t, err, netdev.ErrLocalDrop)
				refused++
			}
			msgs = msgs[k:]
			drain()
		}
		// Held datagrams that were released, then refused, go out with
		// the next batch, even an empty one.
		for sent := -1; sent != len(got); {
			sent = len(got)
			_, err := fa.WriteBatch(nil)
			require.NoError(t, err)
			drain()
		}
		st = fa.Stats().Send
	})
	return got, refused, st
}

// TestInnerRefusalKeepsReorderDepth sends through a pipe whose queue takes
// a few datagrams at a time, so that the inner Conn refuses datagrams
// after a hold and they are sent again: the held datagrams are overtaken
// by as many datagrams as when nothing is refused, whether they were
// released within a refused batch, by a refused datagram, or just before
// one.
func TestInnerRefusalKeepsReorderDepth(t *testing.T) {
	const n = 14
	for _, tc := range []struct {
		rules []string
		count int
		want  []int // nil: as with a queue that refuses nothing
	}{
		{[]string{"reorder=#1,by=5,dir=send"}, n, append(append(seq(n)[1:6:6], 0), seq(n)[6:]...)},
		{[]string{"reorder=#1,by=10,dir=send"}, n, append(append(seq(n)[1:11:11], 0), seq(n)[11:]...)},
		{[]string{"reorder=0.2,by=3,max=1h,dir=send", "drop=0.05,dir=send", "corrupt=0.05,dir=send"}, 300, nil},
		{[]string{"reorder=0.3,by=2,max=1h,dir=send", "reorder=0.1,by=9,max=1h,dir=send", "drop=0.1,dir=send"}, 300, nil},
	} {
		rules := mustRules(t, tc.rules...)
		pkts := alternating(t, tc.count)
		for seed := range uint64(3) {
			want := tc.want
			if want == nil {
				var refused int
				want, refused, _ = sendThrough(t, 4*tc.count, 0, seed, rules, pkts)
				require.Zero(t, refused)
			}
			for _, queue := range []int{2, 3, 5} {
				for _, batch := range []int{4, 64} {
					t.Run(fmt.Sprintf("%v/seed=%d/queue=%d/batch=%d", tc.rules, seed, queue, batch), func(t *testing.T) {
						got, refused, _ := sendThrough(t, queue, batch, seed, rules, pkts)
						require.Positive(t, refused)
						require.Equal(t, want, got)
					})
				}
			}
		}
	}
}
