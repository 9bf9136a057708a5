package requester

import (
	"fmt"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSendQueueGrows posts up to MaxWR work requests, with SGE lists and
// inline data, while a multi-packet message is half sent and the ring
// starts at an offset, so that the ring grows (and wraps) under
// outstanding WQEs; every message must still carry its own bytes.
func TestSendQueueGrows(t *testing.T) {
	for _, maxWR := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(maxWR), func(t *testing.T) {
			const pmtu = 256
			cfg := baseConfig(pmtu, 0)
			cfg.MaxWR, cfg.MaxSGE, cfg.MaxInline = maxWR, 3, 64
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.mem.add(lkeyB, baseB, 1<<16, verbs.AccessLocalWrite, 2)
			require.Zero(t, h.r.sq.Slots(), "nothing allocated before the first post")

			// Message i: a 3-packet WRITE from three SGEs, or an inline SEND.
			want := map[uint64][]byte{}
			post := func(id uint64) error {
				wr := verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey}
				if id%2 == 1 {
					wr.Opcode, wr.Flags = verbs.WRSend, verbs.SendSignaled|verbs.SendInline
					wr.InlineData = []byte(fmt.Sprintf("inline message %d", id))
					want[id] = append([]byte(nil), wr.InlineData...)
				} else {
					off := uint64(id) * 7
					wr.SGList = []verbs.SGE{{Addr: baseA + off, Length: 300, LKey: lkeyA},
						{Addr: baseB + off, Length: 200, LKey: lkeyB}, {Addr: baseA + 5000 + off, Length: 100, LKey: lkeyA}}
					want[id] = gatherSGEs(t, h.mem, wr.SGList)
				}
				return h.r.Post(&wr)
			}
			got := map[uint64][]byte{}
			var msg []byte
			var ids []uint64
			take := func(b []byte) {
				p := parse(t, b)
				msg = append(msg, p.Payload()...)
				if p.Mask()&packet.MaskEnd != 0 {
					got[ids[0]], ids, msg = msg, ids[1:], nil
				}
			}
			next := uint64(0)
			for round := range 3 {
				// Fill the queue; in the first round, half-send message 0
				// first, so the growth moves a WQE in progress.
				for h.r.Outstanding() < maxWR {
					require.NoError(t, post(next))
					ids = append(ids, next)
					next++
					if round == 0 && next == 1 {
						take(h.next())
					}
				}
				require.ErrorIs(t, post(next), ErrQueueFull)
				delete(want, next)
				require.Equal(t, maxWR, h.r.sq.Slots())
				for _, b := range h.drain() {
					take(b)
				}
				h.recv(ack(h.r.SQPSN().Add(-1)))
				require.Zero(t, h.r.Outstanding())
			}
			require.Len(t, got, int(next))
			for id, b := range want {
				require.Equal(t, b, got[id], "message %d", id)
			}
			require.Len(t, h.cq.wcs, int(next))
		})
	}
}
