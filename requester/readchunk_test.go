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

// TestReadChunkRereadOnly: a READ part's last response is lost; the
// re-read from it asks for one packet, which a responder restarting its
// train answers with READ_RESPONSE_ONLY carrying a full PMTU: it is the
// end of the part, not a bad response.
func TestReadChunkRereadOnly(t *testing.T) {
	const pmtu, p0, size = 256, 0x700, 4 * 256
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = 2
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 0)
	f := newResponder(t, pmtu, p0)
	f.rdmavt = true
	src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 5)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
	reqs := h.drain()
	require.Len(t, reqs, 2, "two parts of two packets")
	for _, b := range reqs {
		f.handle(b)
	}
	out := f.take()
	require.Len(t, out, 4)
	h.recv(out[0]) // FIRST of part 1; its LAST (out[1]) is lost
	h.recv(out[2]) // a gap: the part is asked for again from the lost packet
	again := h.drain()
	require.NotEmpty(t, again)
	require.Equal(t, uint32(pmtu), parse(t, again[0]).RETH().DMALen(), "only the rest of the part")
	for _, b := range again {
		f.handle(b)
	}
	for _, o := range f.take() {
		h.recv(o)
	}
	pumpLink(h, f)
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
	require.Equal(t, src.buf, h.mem[lkeyA].buf[:size])
}

// TestReadPartsAfterLoss: under go-back-N with the adaptive window, a READ
// asked for before any loss goes as one request; after a lost response,
// repaired by a re-read of the READ's rest (which keeps the window at its
// largest), the next READ is asked for in parts of the smallest window,
// so that another lost response costs the rest of a part; with the
// recovery off or the window fixed, READs stay whole. The data arrives
// whole either way.
func TestReadPartsAfterLoss(t *testing.T) {
	const pmtu, p0, npkts = 1024, 0x900, 40
	const size = npkts * pmtu
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		parts bool
	}{
		{"adaptive", func(*Config) {}, true},
		{"fixed-window", func(c *Config) { c.Recovery.FixedWindow = true }, false},
		{"recovery-off", func(c *Config) { c.Recovery.Off = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.Window, cfg.Recovery.MinWindow = 64, 8
			tc.set(cfg)
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<17, verbs.AccessLocalWrite, 0)
			f := newResponder(t, pmtu, p0)
			src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 9)
			read := func(id uint64, off uint32) [][]byte {
				h.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(off), Length: size, LKey: lkeyA}}})
				reqs := h.drain()
				require.NotEmpty(t, reqs)
				return reqs
			}

			reqs := read(1, 0)
			require.Len(t, reqs, 1)
			require.Equal(t, uint32(size), parse(t, reqs[0]).RETH().DMALen(), "a whole READ before any loss")
			f.handle(reqs[0])
			out := f.take()
			require.Len(t, out, npkts)
			h.recv(out[0])
			for _, o := range out[2:] { // out[1] is lost: a gap
				h.recv(o)
			}
			pumpLink(h, f)
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, src.buf, h.mem[lkeyA].buf[:size])

			reqs = read(2, size)
			want := uint32(size)
			if tc.parts {
				require.Equal(t, cfg.Window, h.r.Counters().Recovery.Window,
					"a READ repaired by a re-read keeps the window (readAgain)")
				want = 8 * pmtu // but the next READ goes in parts
			}
			require.Equal(t, want, parse(t, reqs[0]).RETH().DMALen())
			for _, b := range reqs {
				f.handle(b)
			}
			for _, o := range f.take() {
				h.recv(o)
			}
			pumpLink(h, f)
			require.Equal(t, []uint64{1, 2}, h.cq.ids())
			for _, wc := range h.cq.wcs {
				require.Equal(t, verbs.WCSuccess, wc.Status)
			}
			require.Equal(t, src.buf, h.mem[lkeyA].buf[size:2*size])
		})
	}
}

// TestReadPSNSpan: a READ whose responses take half the 24-bit PSN space
// is refused at Post (2^31 bytes at PMTU 256); one PSN shorter is taken,
// and waits behind an outstanding SEND until the SEND is acknowledged, so
// that the PSNs outstanding never reach half the space (PSN comparison
// would then order them backwards, and the window, the retransmit timer
// and Karn's rule with it).
func TestReadPSNSpan(t *testing.T) {
	cfg := baseConfig(256, 1000)
	cfg.Window = 4
	h := newHarness(t, cfg)
	h.mem.add(1, 0x10000, 64, verbs.AccessLocalWrite, 1)
	read := func(n uint32) *verbs.SendWR {
		return &verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, RKey: 5, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: 0x10000, Length: n, LKey: 1}}}
	}
	require.ErrorIs(t, h.r.Post(read(1<<31)), ErrReadPSNSpan)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendInline | verbs.SendSignaled, InlineData: []byte("x")})
	h.post(read(1<<31 - 256)) // 2^23 - 1 response PSNs
	require.NotNil(t, h.next(), "the SEND")
	require.Nil(t, h.next(), "the READ waits: SEND + READ would span 2^23 PSNs")
	require.Equal(t, 1, int(h.r.psn.Diff(h.r.compPSN)))
	h.recv(ack(1000))
	require.NotNil(t, h.next(), "the READ, once the SEND is acknowledged")
	require.Equal(t, 1<<23-1, int(h.r.psn.Diff(h.r.compPSN)))
	require.Nil(t, h.next())
}
