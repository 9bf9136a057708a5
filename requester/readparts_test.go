package requester

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestReadPartsStaleMark: under go-back-N a response of the oldest READ
// (asked for in parts) placed past a hole is marked in the response bitmap
// (placePart). If the hole is then filled while the READ waits to be sent
// again (a retry rewound it, and advanceParts does not run), the in-order
// responses pass the marked PSN through doRead. The mark must not outlive
// its PSN: 4096 PSNs later (srTrack) it would stand for a response never
// received, and the READ would complete with those bytes missing.
func TestReadPartsStaleMark(t *testing.T) {
	const pmtu, p0 = 256, packet.PSN(0xFFF000)
	const npkts = srTrack + 2 // the last PSN aliases the marked one
	const size = npkts * pmtu
	for _, tc := range []struct {
		name  string
		retry func(h *harness)
	}{
		{"timeout", func(h *harness) {
			h.now = h.r.retrans.When()
			h.r.OnTimeout(h.now)
		}},
		{"rnr-nak", func(h *harness) { h.recv(rnr(p0, 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.MaxReadPkts = 2
			h := newHarness(t, cfg)
			dst := h.mem.add(lkeyA, baseA, size, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
			require.NotEmpty(t, h.drain())
			data := bytes.Repeat([]byte{0xEE}, pmtu)
			rd := func(op packet.Opcode, k int) []byte {
				return resp(op, p0.Add(k), packet.SyndromeACKUnlimited, 1, data)
			}

			// Response 1 (the LAST of part 0) comes before response 0:
			// placed past the hole, and marked.
			h.recv(rd(packet.RCRDMAReadResponseLast, 1))
			require.Equal(t, 1, h.r.sr.ngot)
			tc.retry(h) // the READ waits to be asked for again

			// The hole fills, and the rest streams in order up to the
			// last PSN, which stays missing.
			h.recv(rd(packet.RCRDMAReadResponseFirst, 0))
			h.recv(rd(packet.RCRDMAReadResponseLast, 1))
			h.recv(rd(packet.RCRDMAReadResponseFirst, 2))
			for k := 3; k < npkts-1; k++ {
				h.recv(rd(packet.RCRDMAReadResponseMiddle, k))
			}
			require.Equal(t, p0.Add(npkts-1), h.r.compPSN)
			require.Zero(t, h.r.sr.ngot, "no mark left behind the oldest unacknowledged PSN")

			// The READ is asked for again and any response comes: it
			// must not complete without its last response.
			h.now = h.now.Add(h.r.ack)
			h.r.OnTimeout(h.now)
			h.drain()
			h.recv(rd(packet.RCRDMAReadResponseMiddle, 5)) // a stale duplicate
			require.Empty(t, h.cq.wcs, "the READ completed with its last response missing")

			h.recv(rd(packet.RCRDMAReadResponseOnly, npkts-1))
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
			require.Equal(t, bytes.Repeat([]byte{0xEE}, size), dst.buf)
		})
	}
}

// TestReadPartsHoleRereadOnce: the oldest READ, asked in 3 parts of 4
// packets, loses a response in its first part and one in its third; the
// READ after it (4 packets) is still answering when the first part's
// re-read is answered. Once that part is whole the third part's hole is
// re-read (advanceParts), and the last response of the later READ, sent
// by the responder before that re-read arrived, asks for nothing again:
// it passed the hole before the re-read left (one re-read per hole; a
// serial responder such as rxe answers requests in the order they come,
// IBA 9.7.5.1.3). The data arrives whole with 2 re-reads.
func TestReadPartsHoleRereadOnce(t *testing.T) {
	const pmtu, p0, part = 1024, 0x6f0, 4
	const sizeA, sizeB = 12 * pmtu, 4 * pmtu
	h, f, src, out := twoReadsAnswered(t, p0, part, sizeA, sizeB, 4, 4)
	require.Len(t, out, 16)
	late := out[15] // the second READ's last response, still on its way
	for i, o := range out[:15] {
		if i != 1 && i != 9 {
			h.recv(o)
		}
	}
	reread := func(psn, pkts int) {
		t.Helper()
		again := h.drain()
		require.Len(t, again, 1)
		p := parse(t, again[0])
		require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
		require.Equal(t, packet.PSN(p0+psn), p.PSN())
		require.Equal(t, uint32(pkts*pmtu), p.RETH().DMALen())
		f.handle(again[0])
	}
	reread(1, 3)
	for _, o := range f.take() {
		h.recv(o)
	}
	reread(9, 3)
	answer := f.take()
	h.recv(late)
	require.Empty(t, h.drain(), "the third part's hole is asked for once")
	for _, o := range answer {
		h.recv(o)
	}
	requireTwoReadsDone(t, h, src)
	require.Equal(t, uint64(2), h.r.Counters().ReadHoleRereads)
}

// TestReadPartsAheadBecomesOldest: the oldest READ (4 packets) loses its
// last response and the READ after it, asked in 2 parts of 4, loses one
// in its second part, the responses after that hole kept. Both holes are
// re-read at once. When the first READ's re-read is answered the second
// becomes the oldest, its oldest unacknowledged PSN at its hole, whose
// re-read is on its way: nothing is asked for again (the re-read of its
// first missing PSN, not of its first PSN, is the one in flight).
func TestReadPartsAheadBecomesOldest(t *testing.T) {
	const pmtu, p0, part = 1024, 0x8f0, 4
	const sizeA, sizeB = 4 * pmtu, 8 * pmtu
	h, f, src, out := twoReadsAnswered(t, p0, part, sizeA, sizeB, 2, 3)
	require.Len(t, out, 12)
	for i, o := range out {
		if i != 3 && i != 4+5 {
			h.recv(o)
		}
	}
	again := h.drain()
	require.Len(t, again, 2)
	for k, rr := range [][2]int{{3, 1}, {4 + 5, 3}} {
		p := parse(t, again[k])
		require.Equal(t, packet.PSN(p0+rr[0]), p.PSN())
		require.Equal(t, uint32(rr[1]*pmtu), p.RETH().DMALen())
	}
	f.handle(again[0])
	for _, o := range f.take() {
		h.recv(o)
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Empty(t, h.drain(), "the second READ's hole is asked for once")
	f.handle(again[1])
	for _, o := range f.take() {
		h.recv(o)
	}
	requireTwoReadsDone(t, h, src)
	require.Equal(t, uint64(2), h.r.Counters().ReadHoleRereads)
}

// twoReadsAnswered posts a READ of sizeA bytes and one of sizeB after it,
// asked in parts of part packets (PMTU 1024, PSNs from p0, local memory
// zeroed, the responder's filled from seed), checks that the requests
// sent are reqs, has the responder answer them all, and returns the
// harness, the responder's source region and the responses in order,
// none of them received yet.
func twoReadsAnswered(t *testing.T, p0 packet.PSN, part, sizeA, sizeB int, seed byte, reqs int) (*harness, *fakeResponder, *region, [][]byte) {
	t.Helper()
	cfg := baseConfig(1024, p0)
	cfg.MaxReadPkts = part
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, sizeA+sizeB, verbs.AccessLocalWrite, 0)
	f := newResponder(t, 1024, p0)
	src := f.mem.add(rkey, rbase, sizeA+sizeB, verbs.AccessRemoteRead, seed)
	for i, r := range [][2]int{{0, sizeA}, {sizeA, sizeB}} {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(r[0]), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(r[0]), Length: uint32(r[1]), LKey: lkeyA}}})
	}
	sent := h.drain()
	require.Len(t, sent, reqs, "the READs' requests, a part each")
	for _, b := range sent {
		f.handle(b)
	}
	return h, f, src, f.take()
}

// requireTwoReadsDone checks the end of a twoReadsAnswered test: nothing
// more to send, both READs completed with success in order, and every
// byte of the source arrived.
func requireTwoReadsDone(t *testing.T, h *harness, src *region) {
	t.Helper()
	require.Empty(t, h.drain())
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	for _, wc := range h.cq.wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
	require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
}
