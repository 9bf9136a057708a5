package requester

import (
	"slices"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestReadAheadAfterGap: under go-back-N, a response lost from one of
// the READs in flight costs a re-read of that READ's rest only, at the
// PSN of the missing response; the responses of the other READs are kept
// and the READs complete in order, byte-exact, with no recovery timer
// expiry. A later READ's lost last response, or a single-packet READ's
// only one, shows no gap within it: a response of a READ after it shows
// the loss (the responder answers READs in order), and its rest is asked
// for then, not at the probe. With recovery off (rxe's completer) the
// same loss asks again for every READ from the gap on.
func TestReadAheadAfterGap(t *testing.T) {
	const pmtu, p0 = 1024, 0x700
	for _, tc := range []struct {
		name          string
		npkts, nreads int   // the READs: nreads of npkts responses each
		lost          []int // indexes of the lost responses
		off           bool
		rereads       []int  // the responses the re-reads start at, in order
		ahead         uint64 // responses placed ahead
	}{
		{"oldest", 8, 3, []int{3}, false, []int{3}, 16},
		{"last-of-oldest", 8, 3, []int{7}, false, []int{7}, 16},
		{"two-holes", 8, 3, []int{3, 12}, false, []int{3, 12}, 12},
		// The last response of the second READ is lost while the oldest
		// waits for its re-read.
		{"last-of-later", 8, 3, []int{3, 15}, false, []int{3, 15}, 15},
		// rxectl read-bw -s 1024: the oldest READ's only response and a
		// later one's.
		{"single-packet", 1, 6, []int{0, 3}, false, []int{0, 3}, 4},
		{"recovery-off", 8, 3, []int{3}, true, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			npkts, nreads := tc.npkts, tc.nreads
			size := npkts * pmtu
			cfg := baseConfig(pmtu, p0)
			cfg.Recovery.Off = tc.off
			h, f, src := withResponder(t, cfg, nreads*size, verbs.AccessRemoteRead, 5)
			var ids []uint64
			for i := range nreads {
				ids = append(ids, uint64(i+1))
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					RemoteAddr: rbase + uint64(i*size), RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: uint32(size), LKey: lkeyA}}})
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
				require.Zero(t, c.Recovery.TailProbes)
			}
			for _, b := range again {
				f.handle(b)
			}
			for _, o := range f.take() {
				h.recv(o)
			}
			pumpLink(h, f)
			require.Equal(t, ids, h.cq.ids())
			for _, wc := range h.cq.wcs {
				require.Equal(t, verbs.WCSuccess, wc.Status)
			}
			require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
			_, failed := h.r.Failed()
			require.False(t, failed)
		})
	}
}

// TestReadPartsAheadAfterGap: the oldest READ asked in parts (4 parts of
// 4 packets) loses one response in its first part and one in its third.
// The responses after each hole are kept; each hole's part is re-read
// from the hole to the part's end, the second as soon as the first is
// repaired; nothing else is asked for again and the data arrives whole.
// With recovery off (rxe's go-back-N) the responses after the first hole
// are dropped and the READ is asked for again from it.
func TestReadPartsAheadAfterGap(t *testing.T) {
	const pmtu, p0, npkts, part = 1024, 0x7f0, 16, 4
	const size = npkts * pmtu
	for _, tc := range []struct {
		name    string
		lost    []int
		off     bool
		rereads [][2]int // the PSN offset and packets of each re-read, in order
		ahead   uint64
	}{
		{"one-hole", []int{1}, false, [][2]int{{1, 3}}, 14},
		{"two-parts", []int{1, 9}, false, [][2]int{{1, 3}, {9, 3}}, 13},
		{"part-start", []int{4}, false, [][2]int{{4, 4}}, 11},
		{"whole-part-and-hole", []int{1, 8, 9, 10, 11}, false, [][2]int{{1, 3}, {8, 4}}, 10},
		{"recovery-off", []int{1}, true, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.MaxReadPkts = part
			cfg.Recovery.Off = tc.off
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, size, verbs.AccessLocalWrite, 0)
			f := newResponder(t, pmtu, p0)
			src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 7)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
			reqs := h.drain()
			require.Len(t, reqs, npkts/part, "every part is asked for at once")
			for _, b := range reqs {
				f.handle(b)
			}
			out := f.take()
			require.Len(t, out, npkts)
			for i, o := range out {
				if !slices.Contains(tc.lost, i) {
					h.recv(o)
				}
			}
			require.Empty(t, h.cq.ids(), "nothing completes past the hole")
			if tc.off {
				again := h.drain()
				require.NotEmpty(t, again)
				p := parse(t, again[0])
				require.Equal(t, packet.PSN(p0+1), p.PSN())
				require.Zero(t, h.r.Counters().ReadResponsesAhead)
			} else {
				for j, rr := range tc.rereads {
					again := h.drain()
					require.Len(t, again, 1, "re-read %d: one request", j)
					p := parse(t, again[0])
					require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
					require.Equal(t, packet.PSN(p0+rr[0]), p.PSN(), "re-read %d", j)
					require.Equal(t, rbase+uint64(rr[0]*pmtu), p.RETH().VA())
					require.Equal(t, uint32(rr[1]*pmtu), p.RETH().DMALen())
					f.handle(again[0])
					for _, o := range f.take() {
						h.recv(o)
					}
				}
				c := h.r.Counters()
				require.Equal(t, tc.ahead, c.ReadResponsesAhead)
				require.Equal(t, uint64(len(tc.rereads)), c.ReadHoleRereads)
			}
			pumpLink(h, f)
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
			require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
			require.Equal(t, packet.PSN(p0+npkts), h.r.SQPSN())
			_, failed := h.r.Failed()
			require.False(t, failed)
		})
	}
}

// TestReadPartsAheadWhileAsking: the oldest READ (4 parts of 4 packets,
// a window of 8 PSNs) has asked for two parts when a response of the
// first is lost. The responses after the hole are kept although the READ
// has not asked for all its parts yet, and only the hole's part is asked
// for again, not both parts (the go-back-N retry); the rest of the READ
// follows as the window allows, and the data arrives whole.
func TestReadPartsAheadWhileAsking(t *testing.T) {
	const pmtu, p0, npkts, part = 1024, 0x3f0, 16, 4
	const size = npkts * pmtu
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = part
	cfg.Window = 2 * part
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, size, verbs.AccessLocalWrite, 0)
	f := newResponder(t, pmtu, p0)
	src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 7)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
	reqs := h.drain()
	require.Len(t, reqs, 2, "two parts fill the window")
	again := serveLosing(t, h, f, reqs, 2*part, 1, p0+1, part-1)
	require.Equal(t, uint64(2*part-2), h.r.Counters().ReadResponsesAhead)
	pending := [][]byte{again}
	for range 8 {
		for _, b := range pending {
			f.handle(b)
		}
		for _, o := range f.take() {
			h.recv(o)
		}
		if pending = h.drain(); len(pending) == 0 {
			break
		}
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, src.buf, h.mem[lkeyA].buf)
	require.Zero(t, h.r.Counters().Recovery.RTOExpiries)
}

// TestReadStaleResponsePastCursor: after a go-back-N retry the send
// cursor is behind the PSNs asked for in the round before, whose
// responses may still come. Such a response is dropped: it is not a gap
// of this round, so it neither goes back N again nor spends retry_cnt (8
// of them failed a READ with RETRY_EXC_ERR while the peer was answering).
func TestReadStaleResponsePastCursor(t *testing.T) {
	const pmtu, p0, part = 1024, 0x5f0, 2
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = part
	cfg.Window = part
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 16*pmtu, verbs.AccessLocalWrite, 0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		RemoteAddr: 0x5000, RKey: 9, SGList: []verbs.SGE{{Addr: baseA, Length: 16 * pmtu, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1, "the first part")
	data := make([]byte, 16*pmtu)
	train := readResp(pmtu, p0, data, 0, false)
	h.recv(train[0])
	h.recv(train[1])
	require.Len(t, h.drain(), 1, "the second part")
	for i := 6; i < 16; i++ {
		h.recv(train[i]) // responses to PSNs the cursor has not asked for
	}
	require.Empty(t, h.drain(), "nothing asked for again")
	_, failed := h.r.Failed()
	require.False(t, failed)
	require.Zero(t, h.r.Counters().CompleterRetryErr)
}

// TestReadPartsAheadLaterReadInParts: two READs, each asked in 3 parts of
// 4 packets, all sent; a response of the first READ's first part is lost.
// The second READ's responses, each of its parts starting with FIRST, are
// placed as they come although it too is asked in parts; only the hole's
// part is asked for again, both READs complete in order, and nothing of
// the second is asked for twice.
func TestReadPartsAheadLaterReadInParts(t *testing.T) {
	const pmtu, p0, npkts, part = 1024, 0x2f0, 12, 4
	const size = npkts * pmtu
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = part
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 2*size, verbs.AccessLocalWrite, 0)
	f := newResponder(t, pmtu, p0)
	src := f.mem.add(rkey, rbase, 2*size, verbs.AccessRemoteRead, 7)
	for i := range 2 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*size), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
	}
	reqs := h.drain()
	require.Len(t, reqs, 6, "three parts of each READ")
	again := serveLosing(t, h, f, reqs, 2*npkts, 2, p0+2, part-2)
	f.handle(again)
	for _, o := range f.take() {
		h.recv(o)
	}
	require.Empty(t, h.drain())
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	require.Equal(t, src.buf, h.mem[lkeyA].buf)
	require.Equal(t, uint64(2*npkts-3), h.r.Counters().ReadResponsesAhead)
}

// serveLosing hands the READ requests reqs to the fake responder and its
// responses, which must number want, to the requester, all but response
// lost. It returns the one request the requester then sends, checked to
// re-read pkts packets from PSN psn: only the hole's part.
func serveLosing(t *testing.T, h *harness, f *fakeResponder, reqs [][]byte, want, lost int, psn packet.PSN, pkts int) []byte {
	t.Helper()
	for _, b := range reqs {
		f.handle(b)
	}
	out := f.take()
	require.Len(t, out, want)
	for i, o := range out {
		if i != lost {
			h.recv(o)
		}
	}
	again := h.drain()
	require.Len(t, again, 1, "only the hole's part is asked for again")
	p := parse(t, again[0])
	require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
	require.Equal(t, psn, p.PSN())
	require.Equal(t, uint32(pkts)*uint32(h.r.pmtu), p.RETH().DMALen())
	return again[0]
}

// TestReadRereadNothingMissing: a later READ asks for its rest again
// after a response out of order, and before that re-read leaves, copies
// of its responses from two streams fill it. The re-read is not sent: a
// READ request for nothing would take the next READ's first PSN, which
// the responder then holds as an empty READ, refusing the real one as a
// duplicate that does not match (RETRY_EXC_ERR or BAD_RESP_ERR under
// rxectl --drop 0.05,dir=recv --reorder 0.02,dir=recv,by=3).
func TestReadRereadNothingMissing(t *testing.T) {
	const p0 = 0xb00
	h, p := warmHarness(t, p0)
	for i := range 2 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i)*2048, Length: 2048, LKey: lkeyA}}, RemoteAddr: 0x5000 + uint64(i)*2048, RKey: 9})
	}
	require.Len(t, h.drain(), 2)
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 3)
	}
	a := readResp(1024, p, data[:2048], 0, false)
	b := readResp(1024, p+2, data[2048:], 0, false)
	h.now = h.now.Add(rttTest)
	h.recv(a[0]) // a[1] is lost
	h.recv(b[1]) // ahead of b[0]: b asks for its rest again
	h.recv(b[0])
	h.recv(b[1]) // a second stream's copy: b is whole
	out := h.drain()
	require.Len(t, out, 1, "only the first READ's hole is asked for again")
	pp := parse(t, out[0])
	require.Equal(t, p+1, pp.PSN())
	require.Equal(t, uint32(1024), pp.RETH().DMALen())
	h.recv(readResp(1024, p+1, data[1024:2048], 0, true)[0])
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	require.Equal(t, data, h.mem[lkeyA].buf[:4096])
}

// TestReadRereadOnlyWhatWasAsked: a later READ asked in parts of 2 (a
// window of 4 PSNs lets out one part of it) loses the order of its
// responses and asks for its rest again; copies from two streams then
// bring everything its first part asked for. The re-read is not sent: the
// next part is for the send cursor to ask, at its own PSN. Re-reading it
// put the READ's data ahead of the cursor, which then asked for a part
// with the PSN of one and the offset of the next (RETRY_EXC_ERR under
// rxectl --drop 0.05,dir=recv --reorder 0.02,dir=recv,by=3). Every READ
// request's PSN matches its offset.
func TestReadRereadOnlyWhatWasAsked(t *testing.T) {
	const p0, pmtu = 0xc00, 1024
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = 2
	cfg.Window = 4
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	p := warm(t, h, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 2 * pmtu, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA + 2*pmtu, Length: 4 * pmtu, LKey: lkeyA}}, RemoteAddr: 0x5000 + 2*pmtu, RKey: 9})
	data := make([]byte, 6*pmtu)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var sent [][]byte
	take := func() [][]byte {
		out := h.drain()
		sent = append(sent, out...)
		return out
	}
	require.Len(t, take(), 2, "the first READ and the second's first part")
	a := readResp(pmtu, p, data[:2*pmtu], 0, false)
	b := readResp(pmtu, p+2, data[2*pmtu:4*pmtu], 0, false) // the first part of the second READ
	h.now = h.now.Add(rttTest)
	h.recv(a[0]) // a[1] is lost
	h.recv(b[1]) // ahead of b[0]: the second READ asks for its rest again
	h.recv(b[0])
	h.recv(b[1]) // a second stream's copy: its first part is whole
	out := take()
	require.Len(t, out, 1, "only the first READ's hole is asked for again")
	require.Equal(t, p+1, parse(t, out[0]).PSN())
	// The rest comes: the hole, then what the cursor asks for.
	h.recv(readResp(pmtu, p+1, data[pmtu:2*pmtu], 0, true)[0])
	for range 4 {
		for _, b := range take() {
			q := parse(t, b)
			k := int(q.PSN().Diff(p))
			h.recv(readResp(pmtu, q.PSN(), data[k*pmtu:k*pmtu+int(q.RETH().DMALen())], 0, true)[0])
			if q.RETH().DMALen() > pmtu {
				h.recv(readResp(pmtu, q.PSN(), data[k*pmtu:k*pmtu+int(q.RETH().DMALen())], 1, false)[0])
			}
		}
	}
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	require.Equal(t, data, h.mem[lkeyA].buf[:6*pmtu])
	for _, b := range sent {
		q := parse(t, b)
		require.Equal(t, uint64(0x5000)+uint64(q.PSN().Diff(p))*pmtu, q.RETH().VA(), "PSN %d and its offset", q.PSN())
	}
}

// TestReadPartsAheadHoleInLaterRead: the oldest READ (4 packets, one
// part) loses its last response, and the READ after it, asked in 3 parts
// of 4 packets, loses a response in its first part and one in its third.
// The later READ's second and third parts come after the hole in its
// first, each as its own stream (IBA 9.7.5.1.3: the responder answers
// each part's request in turn); they are kept, not dropped as out of
// order. So the first round asks again for the oldest READ's last
// response and the first part's rest only, and once that part is whole
// the third part's rest from its hole: no part whose responses all came
// is asked for again.
func TestReadPartsAheadHoleInLaterRead(t *testing.T) {
	const pmtu, p0, part = 1024, 0x5f0, 4
	const sizeA, sizeB = 4 * pmtu, 12 * pmtu
	h, f, src, out := twoReadsAnswered(t, p0, part, sizeA, sizeB, 3, 4)
	require.Len(t, out, 16)
	for i, o := range out {
		// Lost: the oldest READ's last response (3) and the second
		// READ's responses 1 (first part) and 9 (third part).
		if i != 3 && i != 4+1 && i != 4+9 {
			h.recv(o)
		}
	}
	require.Empty(t, h.cq.ids(), "nothing completes past the hole")
	for j, want := range [][][2]int{{{3, 1}, {4 + 1, 3}}, {{4 + 9, 3}}} {
		again := h.drain()
		require.Len(t, again, len(want), "round %d", j)
		for k, rr := range want {
			p := parse(t, again[k])
			require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
			require.Equal(t, packet.PSN(p0+rr[0]), p.PSN(), "round %d, re-read %d", j, k)
			require.Equal(t, rbase+uint64(rr[0]*pmtu), p.RETH().VA())
			require.Equal(t, uint32(rr[1]*pmtu), p.RETH().DMALen())
			f.handle(again[k])
		}
		for _, o := range f.take() {
			h.recv(o)
		}
	}
	requireTwoReadsDone(t, h, src)
	c := h.r.Counters()
	require.Equal(t, uint64(3), c.ReadHoleRereads)
	require.Zero(t, c.Timeouts)
	require.Zero(t, c.Recovery.TailProbes)
	_, failed := h.r.Failed()
	require.False(t, failed)
}

// TestReadAheadDuringRewind: a lost READ request has the responder NAK
// the next one (IBA 9.7.5.1.2), and the go-back-N retry asks again for
// the READs from it on as the window, halved by the loss, allows: two of
// the three, the third waiting for the send cursor. A response of the
// oldest READ is then lost. Only that READ's rest is asked for again:
// the READ after it, whose request was just sent and whose responses
// follow, is not asked for a second time (which a second go-back-N
// would do), and the third READ goes when the window lets it.
func TestReadAheadDuringRewind(t *testing.T) {
	const pmtu, p0, npkts = 1024, 0x1f0, 4
	const size = npkts * pmtu
	cfg := baseConfig(pmtu, p0)
	cfg.Window = 4 * npkts
	cfg.Recovery.MinWindow = npkts
	h, f, src := withResponder(t, cfg, 4*size, verbs.AccessRemoteRead, 6)
	for i := range 4 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*size), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
	}
	reqs := h.drain()
	require.Len(t, reqs, 4)
	for i, b := range reqs {
		if i != 1 { // the second READ's request is lost
			f.handle(b)
		}
	}
	for _, o := range f.take() { // the first READ's responses and the NAK
		h.recv(o)
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	again := h.drain()
	require.Len(t, again, 2, "the retry asks for as much as the halved window allows")
	for k, b := range again {
		require.Equal(t, packet.PSN(p0+(k+1)*npkts), parse(t, b).PSN())
		f.handle(b)
	}
	out := f.take()
	require.Len(t, out, 2*npkts)
	for i, o := range out {
		if i != 1 { // the second READ's second response is lost
			h.recv(o)
		}
	}
	var rereads []packet.PSN
	for range 8 {
		b := h.next()
		if b == nil {
			break
		}
		p := parse(t, b)
		rereads = append(rereads, p.PSN())
		f.handle(b)
		for _, o := range f.take() {
			h.recv(o)
		}
	}
	require.Equal(t, []packet.PSN{p0 + npkts + 1, p0 + 3*npkts}, rereads,
		"the hole's rest, then the fourth READ: the third is not asked for again")
	require.Empty(t, h.drain())
	require.Equal(t, []uint64{1, 2, 3, 4}, h.cq.ids())
	for _, wc := range h.cq.wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
	require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
}
