package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestReadChunks: with MaxReadPkts, a 40-packet READ goes as READ requests
// of at most 16 packets, each sent once the window has room for its
// responses, and the data arrives whole.
func TestReadChunks(t *testing.T) {
	const pmtu, p0, size = 1024, 0x500, 40 * 1024
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts, cfg.Window = 16, 20
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 0)
	f := newResponder(t, pmtu, p0)
	src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 3)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
	first := h.drain()
	require.Len(t, first, 1, "the second part waits for room in the window")
	p := parse(t, first[0])
	require.Equal(t, uint32(16*pmtu), p.RETH().DMALen())
	f.handle(first[0])
	sent := append(first, pumpLink(h, f)...)
	var lens []uint32
	psn := packet.PSN(p0)
	for _, b := range sent {
		q := parse(t, b)
		require.Equal(t, psn, q.PSN(), "parts take consecutive PSN ranges")
		lens = append(lens, q.RETH().DMALen())
		psn = psn.Add(int(q.RETH().DMALen()+pmtu-1) / pmtu)
	}
	require.Equal(t, []uint32{16 * pmtu, 16 * pmtu, 8 * pmtu}, lens)
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
	require.Equal(t, src.buf, h.mem[lkeyA].buf[:size])
	require.Equal(t, packet.PSN(p0+40), h.r.SQPSN())
}
