package responder

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// nextOpts says how runNext runs a script.
type nextOpts struct {
	sr    bool // selective repeat (else go-back-N, for in-order delivery)
	whole bool // every out-of-order request held whole (noPlaceAhead)
	srq   bool // the receive queue is an SRQ (Config.SRQ)
	// shared posts every WQE at WQE 1's addresses; alias posts the WQEs
	// after the first there too, through a second L_Key (another memory
	// region over the same memory) at another address.
	shared, alias bool
	// before, if not nil, runs before the last packet is delivered.
	before func(h *harness)
}

// nextOutcome is what runNext leaves behind: memory, completions, every
// packet sent, in order, and the responder's state.
type nextOutcome struct {
	local, remote []byte
	wcs           []verbs.WC
	out           [][]byte
	epsn          packet.PSN
	msn           uint32
	failed        bool
	status        verbs.WCStatus
	failState     State
	placed        uint64 // Counters.OOOPlaced
	duplicates    uint64 // Counters.OOODuplicates
}

// nextWQE returns the SGEs of receive WQE id as runNext posts it: lens
// bytes each, from lva + id×32 KiB, 4 KiB apart, so that no two WQEs
// share a byte and a packet placed ahead crosses SGE boundaries.
func nextWQE(id uint64, lens ...uint32) []verbs.SGE {
	sges := make([]verbs.SGE, len(lens))
	addr := lva + id*0x8000
	for i, l := range lens {
		sges[i] = verbs.SGE{Addr: addr, Length: l, LKey: lkey}
		addr += (uint64(l) + 4096) &^ 4095
	}
	return sges
}

// runNext delivers the packets idx of s, in that order, to a responder at
// s's PMTU with one receive WQE per element of wqes (its SGE lengths; IDs
// from 1, laid out by nextWQE), the remote region's R_Key remotely
// invalidatable.
func runNext(t *testing.T, s *script, wqes [][]uint32, idx []int, opt nextOpts) nextOutcome {
	t.Helper()
	mods := []cfgMod{withPMTU(s.mtu), withPSN(s.reqs[0].psn)}
	if opt.sr {
		mods = append(mods, withSR(0))
	}
	if opt.srq {
		mods = append(mods, func(c *Config) { c.SRQ = true })
	}
	h := newHarness(t, mods...)
	h.r.noPlaceAhead = opt.whole
	h.remote.remoteInv = true
	copy(h.remote.buf, pattern(len(h.remote.buf), 9))
	const lkey2, lva2 = 0x78, 0x4000000
	h.mem.mrs = append(h.mem.mrs, &fakeMR{key: lkey2, va: lva2, buf: h.local.buf, valid: true, access: verbs.AccessLocalWrite})
	for i, lens := range wqes {
		id := uint64(i + 1)
		sges := nextWQE(id, lens...)
		switch {
		case opt.shared:
			sges = nextWQE(1, lens...)
		case opt.alias && id > 1:
			sges = nextWQE(1, lens...)
			for k := range sges {
				sges[k].LKey, sges[k].Addr = lkey2, sges[k].Addr-lva+lva2
			}
		}
		h.rq.post(verbs.RecvWR{ID: id, SGList: sges})
	}
	var o nextOutcome
	for k, i := range idx {
		if k == len(idx)-1 && opt.before != nil {
			opt.before(h)
		}
		p, err := packet.Parse(s.reqs[i].b)
		require.NoError(t, err)
		h.r.Receive(t0, p)
		for _, q := range h.drain() {
			o.out = append(o.out, q.Bytes())
		}
	}
	o.local, o.remote = h.local.buf, h.remote.buf
	o.wcs, o.epsn, o.msn = h.cq.wcs, h.r.EPSN(), h.r.MSN()
	o.status, o.failed = h.r.Failed()
	o.failState = h.r.FailState()
	c := h.r.Counters()
	o.placed, o.duplicates = c.OOOPlaced, c.OOODuplicates
	return o
}

// sameNext requires got to be want in everything a peer or consumer sees:
// memory, completions, the packets sent, PSN, MSN and failure.
func sameNext(t *testing.T, want, got nextOutcome) {
	t.Helper()
	sameBytes(t, want.remote, got.remote, "remote memory")
	sameBytes(t, want.local, got.local, "receive buffers")
	require.Equal(t, want.wcs, got.wcs, "completions")
	require.Equal(t, want.out, got.out, "packets sent")
	require.Equal(t, want.epsn, got.epsn, "ePSN")
	require.Equal(t, want.msn, got.msn, "MSN")
	require.Equal(t, want.failed, got.failed, "failed")
	require.Equal(t, want.status, got.status, "failure status")
	require.Equal(t, want.failState, got.failState, "failure state")
}

// sameBytes requires got to be want, naming the first byte that differs
// instead of printing both.
func sameBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if want[i] != got[i] {
			require.Failf(t, what+" differ", "first at offset %#x: %#x, want %#x", i, got[i], want[i])
		}
	}
}

// twoSends is a script at a 256-byte PMTU from start: SEND A of 1100
// bytes (packets 0 to 4: FIRST, three MIDDLEs, a LAST of 76 bytes; with
// invalidate of the remote R_Key if inv) and SEND B with immediate of
// 900 bytes (packets 5 to 8: FIRST, two MIDDLEs, a LAST of 132 bytes).
func twoSends(t *testing.T, start packet.PSN, inv bool) (s *script, a, b []byte) {
	s = &script{t: t, mtu: 256, psn: start}
	a, b = pattern(1100, 1), pattern(900, 2)
	if inv {
		s.message(sendInvOps, a, ieth(rkey))
	} else {
		s.message(sendOps, a)
	}
	s.message(sendImmOps, b, imm(0x55))
	return s, a, b
}

// with returns idx between first and last.
func with(first int, idx []int, last int) []int {
	return append(append([]int{first}, idx...), last)
}

// The MIDDLE and LAST packets of the SEND after the SEND in progress are
// placed on arrival into the receive WQE that SEND takes, the oldest
// posted, once the LAST of the SEND in progress and the FIRST after it
// are held and every PSN between that FIRST and the packet is known to
// be a MIDDLE: their bytes are in the WQE before the hole fills, and the
// two WQEs end as in-order delivery leaves them, byte for byte, with the
// same completions in order.
func TestPlaceNextSend(t *testing.T) {
	wqes := [][]uint32{{500, 600, 900}, {500, 600, 900}}
	for _, tc := range []struct {
		name   string
		inv    bool
		late   []int  // delivered after packet 0, while packet 1 is missing
		placed uint64 // of them placed: 2, 3 and 4 of A, and of B's 6, 7 and 8
		dups   uint64
		// B's LAST, 8, is held whole: it arrives after two missing PSNs,
		// 6 and 7.
		lastWhole bool
	}{
		{"after the last", false, []int{2, 3, 4, 5, 6, 7, 8}, 6, 0, false},
		{"with a hole in the next", false, []int{2, 3, 4, 5, 7, 8, 6}, 6, 0, false},
		{"last of the next first", false, []int{2, 3, 4, 5, 8, 7, 6}, 5, 0, true},
		{"last of the next before its hole", false, []int{2, 3, 4, 5, 8, 6, 7}, 5, 0, true},
		{"duplicates", false, []int{2, 3, 4, 5, 6, 6, 7, 8, 8, 4}, 6, 3, false},
		// A's LAST, with invalidate, is held whole (placeAhead).
		{"after a last with invalidate", true, []int{2, 3, 4, 5, 6, 7, 8}, 5, 0, false},
	} {
		for _, start := range []packet.PSN{100, 0xFFFFFE} {
			t.Run(fmt.Sprintf("%s/start=%#x", tc.name, start), func(t *testing.T) {
				s, a, b := twoSends(t, start, tc.inv)
				all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
				want := runNext(t, s, wqes, all, nextOpts{})
				require.False(t, want.failed)
				require.Len(t, want.wcs, 2)
				for i, n := range []uint32{1100, 900} {
					wc := want.wcs[i]
					require.Equal(t, uint64(i+1), wc.ID)
					require.Equal(t, verbs.WCSuccess, wc.Status)
					require.Equal(t, n, wc.ByteLen)
				}
				require.Equal(t, uint32(0x55), want.wcs[1].Imm)
				gather := func(local []byte, id uint64, n int) []byte {
					var out []byte
					for _, sg := range nextWQE(id, 500, 600, 900) {
						off := sg.Addr - lva
						out = append(out, local[off:off+uint64(sg.Length)]...)
					}
					return out[:n]
				}
				require.Equal(t, a, gather(want.local, 1, len(a)))
				require.Equal(t, b, gather(want.local, 2, len(b)))

				idx := with(0, tc.late, 1)
				whole := runNext(t, s, wqes, idx, nextOpts{sr: true, whole: true})
				got := runNext(t, s, wqes, idx, nextOpts{sr: true, before: func(h *harness) {
					require.Equal(t, tc.placed, h.r.Counters().OOOPlaced)
					require.Empty(t, h.cq.wcs)
					in := gather(h.local.buf, 2, len(b))
					end := len(b)
					if tc.lastWhole {
						end = 768
						require.False(t, bytes.Equal(b[end:], in[end:]), "B's LAST is held whole")
					}
					require.True(t, bytes.Equal(b[256:end], in[256:end]),
						"B's MIDDLEs and LAST in its WQE before the hole fills")
					require.False(t, bytes.Equal(b[:256], in[:256]), "B's FIRST is held whole")
				}})
				require.Equal(t, tc.placed, got.placed)
				require.Equal(t, tc.dups, got.duplicates)
				sameBytes(t, want.local, got.local, "receive buffers")
				sameBytes(t, want.remote, got.remote, "remote memory")
				require.Equal(t, want.wcs, got.wcs, "completions")
				require.Equal(t, want.epsn, got.epsn)
				require.Equal(t, want.msn, got.msn)
				require.False(t, got.failed)
				sameNext(t, whole, got)
			})
		}
	}
}

// With a shared receive queue nothing of the SEND after the one in
// progress is placed ahead: another QP may take the WQE at the queue's
// head before that SEND starts.
func TestPlaceNextSendSRQ(t *testing.T) {
	wqes := [][]uint32{{500, 600, 900}, {500, 600, 900}}
	s, _, _ := twoSends(t, 100, false)
	idx := []int{0, 2, 3, 4, 5, 6, 7, 8, 1}
	want := runNext(t, s, wqes, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, nextOpts{srq: true})
	whole := runNext(t, s, wqes, idx, nextOpts{sr: true, srq: true, whole: true})
	got := runNext(t, s, wqes, idx, nextOpts{sr: true, srq: true})
	require.EqualValues(t, 3, got.placed, "only A's packets 2, 3 and 4")
	sameBytes(t, want.local, got.local, "receive buffers")
	require.Equal(t, want.wcs, got.wcs)
	require.Len(t, got.wcs, 2)
	sameNext(t, whole, got)
}

// Where the SEND after the one in progress cannot be placed ahead (its
// FIRST short or missing, a packet past its WQE, a PSN before the packet
// not known to be a MIDDLE, another kind of message or a one-packet SEND
// after the one in progress, no WQE posted for it, a WQE whose buffers
// overlap those of the WQE in use, a packet after its LAST), or a packet
// follows the LAST of the SEND in progress, the
// packets are held whole and the outcome is that of the same arrivals
// with every out-of-order request held whole: the same memory,
// completions and errors, and the same packets sent.
func TestPlaceNextSameAsWhole(t *testing.T) {
	two := [][]uint32{{500, 600, 900}, {500, 600, 900}}
	sendA := func(s *script) { s.message(sendOps, pattern(1100, 1)) } // 0..4
	for _, tc := range []struct {
		name   string
		build  func(s *script)
		wqes   [][]uint32
		idx    []int
		placed uint64
		fails  bool // the peer's packets fail the QP when they execute
		opt    nextOpts
	}{
		{"first short", func(s *script) {
			sendA(s)
			s.add(packet.RCSendFirst, pattern(100, 2))  // 5
			s.add(packet.RCSendMiddle, pattern(256, 3)) // 6
			s.add(packet.RCSendLast, pattern(50, 4))    // 7
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 1}, 3, true, nextOpts{}},
		{"past the WQE", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, [][]uint32{{500, 600, 900}, {300, 300}}, []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 4, true, nextOpts{}},
		{"not known to be a middle", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(1300, 2)) // 5..10
		}, two, []int{0, 2, 3, 4, 5, 8, 10, 1, 6, 7, 9}, 3, false, nextOpts{}},
		{"first of the next late", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, two, []int{0, 2, 3, 4, 6, 7, 8, 5, 1}, 3, false, nextOpts{}},
		{"last of the first late", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, two, []int{0, 2, 3, 5, 6, 7, 8, 4, 1}, 3, false, nextOpts{}},
		{"write between", func(s *script) {
			sendA(s)
			s.message(writeOps, pattern(300, 2), reth(rva, rkey, 300)) // 5, 6
			s.message(sendOps, pattern(600, 3))                        // 7..9
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 8, 9, 1}, 3, false, nextOpts{}},
		{"one-packet send between", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(100, 2)) // 5
			s.message(sendOps, pattern(600, 3)) // 6..8
		}, [][]uint32{{2000}, {2000}, {2000}}, []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 3, false, nextOpts{}},
		{"no WQE for the next", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, two[:1], []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 3, false, nextOpts{}},
		{"only where the last belongs", func(s *script) {
			s.add(packet.RCSendFirst, pattern(256, 1))  // 0
			s.add(packet.RCSendMiddle, pattern(256, 1)) // 1
			s.add(packet.RCSendMiddle, pattern(256, 1)) // 2
			s.add(packet.RCSendOnly, pattern(100, 1))   // 3
			s.message(sendOps, pattern(900, 2))         // 4..7
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 1}, 1, true, nextOpts{}},
		{"middle after the next's last", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(600, 2))         // 5..7
			s.add(packet.RCSendMiddle, pattern(256, 3)) // 8
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 5, true, nextOpts{}},
		{"buffers shared with the WQE in use", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 3, false, nextOpts{shared: true}},
		{"buffers of the WQE in use through another L_Key", func(s *script) {
			sendA(s)
			s.message(sendOps, pattern(900, 2)) // 5..8
		}, two, []int{0, 2, 3, 4, 5, 6, 7, 8, 1}, 3, false, nextOpts{alias: true}},
		{"middle after the last in progress", func(s *script) {
			s.message(sendOps, pattern(700, 1))         // 0..2
			s.add(packet.RCSendMiddle, pattern(256, 3)) // 3
		}, two, []int{0, 2, 3, 1}, 1, true, nextOpts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{t: t, mtu: 256, psn: 100}
			tc.build(s)
			opt := tc.opt
			opt.sr, opt.whole = true, true
			whole := runNext(t, s, tc.wqes, tc.idx, opt)
			opt.whole = false
			got := runNext(t, s, tc.wqes, tc.idx, opt)
			sameNext(t, whole, got)
			require.Equal(t, tc.placed, got.placed)
			require.Equal(t, tc.fails, got.failed)
		})
	}
}
