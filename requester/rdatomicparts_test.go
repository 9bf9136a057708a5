package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestMaxRdAtomicCountsReadParts: max_rd_atomic bounds the READ requests
// outstanding at the responder (IBA 9.4.4, 11.2.4.2: the initiator depth
// is the responder's READ/atomic resources), and a READ asked for in
// parts (Config.MaxReadPkts) sends one READ request per part: its parts
// in flight count one each, with the READs and atomics of other WQEs.
func TestMaxRdAtomicCountsReadParts(t *testing.T) {
	const pmtu = 256
	for _, tc := range []struct {
		name      string
		rdAtomic  int
		wqes      int
		wantFirst int // READ requests before any response
	}{
		{"one-wqe-depth-1", 1, 1, 1},
		{"one-wqe-depth-3", 3, 1, 3},
		{"two-wqes-depth-3", 3, 2, 3},
		{"three-wqes-depth-16", 16, 3, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, 0)
			cfg.MaxRdAtomic = tc.rdAtomic
			cfg.MaxReadPkts = 2
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			for i := range tc.wqes {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i)*16*pmtu, Length: 16 * pmtu, LKey: lkeyA}}})
			}
			require.Equal(t, tc.wantFirst, len(h.drain()), "READ requests outstanding")
			// The first part's two responses free its resource: one more
			// request goes, the next part.
			for _, b := range readResp(pmtu, 0, make([]byte, 2*pmtu), 0, false) {
				h.recv(b)
			}
			more := h.drain()
			require.Len(t, more, 1)
			require.Equal(t, packet.RCRDMAReadRequest, parse(t, more[0]).Opcode())
			require.Equal(t, packet.PSN(2*tc.wantFirst), parse(t, more[0]).PSN())
		})
	}
}

// TestReadPartsWithinMaxRdAtomicComplete: READs asked for in parts under
// a small max_rd_atomic still all complete, in order, with their data.
func TestReadPartsWithinMaxRdAtomicComplete(t *testing.T) {
	const pmtu, n = 256, 4
	for _, depth := range []int{1, 2, 5} {
		cfg := baseConfig(pmtu, 0x10)
		cfg.MaxRdAtomic = depth
		cfg.MaxReadPkts = 3
		h, f, remote := withResponder(t, cfg, n*16*pmtu, verbs.AccessRemoteRead, 7)
		for i := range n {
			h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				RemoteAddr: rbase + uint64(i*16*pmtu), RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA + uint64(i*16*pmtu), Length: 16 * pmtu, LKey: lkeyA}}})
		}
		pumpLink(h, f)
		require.Equal(t, []uint64{1, 2, 3, 4}, h.cq.ids(), "max_rd_atomic %d", depth)
		require.Equal(t, remote.buf, h.mem[lkeyA].buf)
	}
}
