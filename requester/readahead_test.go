package requester

import (
	"slices"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestReadAheadAfterGap: under go-back-N, a response lost from one of
// three READs in flight costs a re-read of that READ's rest only, at the
// PSN of the missing response; the responses of the other READs are kept
// and the READs complete in order, byte-exact. With recovery off (rxe's
// completer) the same loss asks again for every READ from the gap on.
func TestReadAheadAfterGap(t *testing.T) {
	const pmtu, p0, npkts, nreads = 1024, 0x700, 8, 3
	const size = npkts * pmtu
	for _, tc := range []struct {
		name    string
		lost    []int // indexes of the lost responses among the 24
		off     bool
		rereads []int  // the responses the re-reads start at, in order
		ahead   uint64 // responses placed ahead
	}{
		{"oldest", []int{3}, false, []int{3}, 2 * npkts},
		{"last-of-oldest", []int{npkts - 1}, false, []int{npkts - 1}, 2 * npkts},
		{"two-holes", []int{3, npkts + 4}, false, []int{3, npkts + 4}, 4 + npkts},
		{"recovery-off", []int{3}, true, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.Recovery.Off = tc.off
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, nreads*size, verbs.AccessLocalWrite, 0)
			f := newResponder(t, pmtu, p0)
			src := f.mem.add(rkey, rbase, nreads*size, verbs.AccessRemoteRead, 5)
			for i := range nreads {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					RemoteAddr: rbase + uint64(i*size), RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
			}
			reqs := h.drain()
			require.Len(t, reqs, nreads)
			for _, b := range reqs {
				f.handle(b)
			}
			out := f.take()
			require.Len(t, out, nreads*npkts)
			for i, o := range out {
				if !slices.Contains(tc.lost, i) {
					h.recv(o)
				}
			}
			require.Empty(t, h.cq.ids(), "nothing completes past the hole")

			again := h.drain()
			if tc.off {
				require.Len(t, again, nreads, "go-back-N asks for every READ from the gap on")
			} else {
				require.Len(t, again, len(tc.rereads), "only the READs with a hole are asked for again")
				for j, i := range tc.rereads {
					p := parse(t, again[j])
					require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
					require.Equal(t, packet.PSN(p0+i), p.PSN(), "re-read %d", j)
					k := i % npkts
					require.Equal(t, rbase+uint64(i*pmtu), p.RETH().VA())
					require.Equal(t, uint32((npkts-k)*pmtu), p.RETH().DMALen())
				}
				c := h.r.Counters()
				require.Equal(t, tc.ahead, c.ReadResponsesAhead)
				require.Equal(t, uint64(len(tc.rereads)), c.ReadHoleRereads)
			}
			for _, b := range again {
				f.handle(b)
			}
			for _, o := range f.take() {
				h.recv(o)
			}
			pumpLink(h, f)
			require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
			for _, wc := range h.cq.wcs {
				require.Equal(t, verbs.WCSuccess, wc.Status)
			}
			require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
			_, failed := h.r.Failed()
			require.False(t, failed)
		})
	}
}
