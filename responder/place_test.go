package responder

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// placeScript is a script at a 256-byte PMTU whose messages take wqes
// receive WQEs (posted by placeRun, each with SGEs of 500, 600 and 900
// bytes, so that a packet placed ahead crosses SGE boundaries).
func placeScript(t *testing.T, build func(s *script)) *script {
	s := &script{t: t, mtu: 256, psn: 100}
	build(s)
	return s
}

// placeStart prepares a harness for s under selective repeat with n
// receive WQEs of 2000 bytes in three SGEs.
func placeStart(t *testing.T, s *script, n int, mods ...cfgMod) (*harness, *srOutcome) {
	h, o := srStart(t, s, append([]cfgMod{withSR(0)}, mods...)...)
	for i := range n {
		h.postRecv(uint64(i+1), 500, 600, 900)
	}
	return h, o
}

// deliver hands the script's packets idx to the responder in that order.
func deliver(t *testing.T, h *harness, o *srOutcome, s *script, idx ...int) {
	t.Helper()
	for _, i := range idx {
		p, err := packet.Parse(s.reqs[i].b)
		require.NoError(t, err)
		h.r.Receive(t0, p)
		for _, q := range h.drain() {
			o.record(t, q)
		}
	}
}

// inOrder returns the outcome of delivering s in order without selective
// repeat, with n receive WQEs as placeStart posts them.
func inOrder(t *testing.T, s *script, n int) srOutcome {
	h, o := srStart(t, s)
	for i := range n {
		h.postRecv(uint64(i+1), 500, 600, 900)
	}
	idx := make([]int, len(s.reqs))
	for i := range idx {
		idx[i] = i
	}
	deliver(t, h, o, s, idx...)
	return o.end(t, h)
}

// sameOutcome requires got to be want: memory, completions, PSN and MSN,
// READ data, atomic results and the last PSN acknowledged.
func sameOutcome(t *testing.T, want, got srOutcome) {
	t.Helper()
	require.Equal(t, want.epsn, got.epsn)
	require.Equal(t, want.msn, got.msn)
	require.Equal(t, want.remote, got.remote, "remote memory")
	require.Equal(t, want.local, got.local, "receive buffers")
	require.Equal(t, want.wcs, got.wcs)
	require.Equal(t, want.reads, got.reads)
	require.Equal(t, want.atomics, got.atomics)
	require.Equal(t, want.lastACK, got.lastACK)
}

// The later packets of a WRITE held behind a hole are placed on arrival:
// their bytes are in memory before the hole fills, they are held without
// their payload, and the outcome is that of in-order delivery.
func TestPlaceAheadWrite(t *testing.T) {
	data := pattern(1500, 5) // 6 packets
	s := placeScript(t, func(s *script) { s.message(writeOps, data, reth(rva+100, rkey, 1500)) })
	want := inOrder(t, s, 0)

	h, o := placeStart(t, s, 0)
	deliver(t, h, o, s, 0, 2, 3, 4, 5) // packet 1 lost
	c := h.r.Counters()
	require.EqualValues(t, 4, c.OOOHeld)
	require.EqualValues(t, 4, c.OOOPlaced)
	require.Less(t, c.OOOBytesPeak, uint64(4*256), "held without their payloads")
	mem := h.remote.buf[100:]
	require.Equal(t, data[512:], mem[512:1500], "placed before the hole filled")
	require.NotEqual(t, data[256:512], mem[256:512], "the lost packet's bytes are not there yet")
	require.Empty(t, h.cq.wcs)

	deliver(t, h, o, s, 1)
	sameOutcome(t, want, o.end(t, h))
	require.Zero(t, h.r.ooo.n)
	require.EqualValues(t, 1500, h.r.Counters().BytesPlaced)
}

// The later packets of a SEND are placed into the receive WQE in use while
// every PSN from the hole to the one before them is known to be a MIDDLE
// of it: held as a SEND MIDDLE, or missing and followed by a SEND MIDDLE
// or LAST. Two missing PSNs in a row stop it (the first may end the
// message); after a drain the run starts again at the new hole.
func TestPlaceAheadSend(t *testing.T) {
	data := pattern(2000, 6) // 8 packets: FIRST, 6 MIDDLEs, LAST; the WQE holds 2000
	s := placeScript(t, func(s *script) { s.message(sendImmOps, data, imm(0x77)) })
	want := inOrder(t, s, 1)
	require.Len(t, want.wcs, 1)

	h, o := placeStart(t, s, 1)
	local := func(off, n int) []byte {
		// The WQE's SGEs: 500 bytes at lva+8, 600 at lva+8+4096, 900 at lva+8+8192.
		var out []byte
		for _, sg := range []struct{ at, n int }{{8, 500}, {8 + 4096, 600}, {8 + 8192, 900}} {
			out = append(out, h.local.buf[sg.at:sg.at+sg.n]...)
		}
		return out[off : off+n]
	}
	placed := func() uint64 { return h.r.Counters().OOOPlaced }
	// 1, 3 and 4 lost.
	deliver(t, h, o, s, 0, 2)
	require.EqualValues(t, 1, placed(), "2 follows the hole at 1")
	require.Equal(t, data[512:768], local(512, 256), "packet 2 placed, across the first SGE boundary")
	deliver(t, h, o, s, 6)
	require.EqualValues(t, 1, placed(), "6 is held whole: 3 and 4 are both missing, 3 may have ended the message")
	deliver(t, h, o, s, 4)
	require.EqualValues(t, 2, placed(), "4 proves 3 a MIDDLE; 2 is a MIDDLE")
	deliver(t, h, o, s, 5)
	require.EqualValues(t, 3, placed(), "5 follows the held MIDDLE 4")
	require.Equal(t, data[4*256:6*256], local(4*256, 512))
	require.NotEqual(t, data[6*256:7*256], local(6*256, 256), "6 was held whole, not placed")

	deliver(t, h, o, s, 1) // drains 1 and 2, stops at 3
	require.Equal(t, s.reqs[3].psn, h.r.EPSN())
	deliver(t, h, o, s, 7) // the run from 3: 4, 5 and 6 held SEND MIDDLEs
	require.EqualValues(t, 4, placed())
	require.Equal(t, data[7*256:], local(7*256, len(data)-7*256), "packet 7 placed, into the third SGE")
	require.Empty(t, h.cq.wcs)

	deliver(t, h, o, s, 3)
	sameOutcome(t, want, o.end(t, h))
	require.Zero(t, h.r.ooo.n)
}

// Nothing of a later message is placed ahead, even where it follows the
// message in progress without a hole between them: its bytes may overlap
// the earlier message's, which must land first. A SEND after a SEND in
// progress whose LAST is held goes into the next receive WQE (placeNext,
// srplacenext_test.go), unless, as here, the two WQEs share their
// buffers (placeStart posts every WQE at the same address).
func TestPlaceAheadNotAcrossMessages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  func(s *script)
		wqes   int
		late   []int  // delivered while packet 1 is missing
		placed uint64 // of them placed: at most the first message's last packet, right after the hole
	}{
		{"write then overlapping write", func(s *script) {
			s.message(writeOps, pattern(768, 1), reth(rva, rkey, 768))     // 0, 1, 2
			s.message(writeOps, pattern(512, 2), reth(rva+256, rkey, 512)) // 3, 4: over 1 and 2
			s.message(writeOps, pattern(600, 3), reth(rva+200, rkey, 600)) // 5, 6, 7
		}, 0, []int{2, 3, 4, 5, 6, 7}, 1},
		{"send then send", func(s *script) {
			s.message(sendOps, pattern(700, 4)) // 0, 1, 2
			s.message(sendOps, pattern(600, 5)) // 3, 4, 5
		}, 2, []int{2, 3, 4, 5}, 1},
		{"send ending in the hole", func(s *script) {
			s.message(sendOps, pattern(400, 6)) // 0, 1 (LAST, lost)
			s.message(sendOps, pattern(900, 7)) // 2, 3, 4, 5
		}, 2, []int{2, 3, 4, 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := placeScript(t, tc.build)
			want := inOrder(t, s, tc.wqes)
			h, o := placeStart(t, s, tc.wqes)
			deliver(t, h, o, s, 0)
			deliver(t, h, o, s, tc.late...)
			c := h.r.Counters()
			require.EqualValues(t, len(tc.late), c.OOOHeld)
			require.Equal(t, tc.placed, c.OOOPlaced)
			deliver(t, h, o, s, 1)
			sameOutcome(t, want, o.end(t, h))
		})
	}
}

// A packet whose opcode or length does not fit its place in the message
// in progress is held whole and fails when it executes, as it would have
// in order; nothing is written outside the message's range.
func TestPlaceAheadMisfits(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   packet.Opcode
		psn  int // PSNs after the FIRST
		n    int
	}{
		{"middle too short", packet.RCRDMAWriteMiddle, 2, 100},
		{"middle where the last belongs", packet.RCRDMAWriteMiddle, 3, 256},
		{"last too long", packet.RCRDMAWriteLast, 3, 256},
		{"last in the middle", packet.RCRDMAWriteLast, 2, 256},
		{"beyond the message", packet.RCRDMAWriteMiddle, 5, 256},
		{"with immediate", packet.RCRDMAWriteLastWithImm, 3, 232},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A WRITE of 1000 bytes at rva+100: FIRST, MIDDLE, MIDDLE, LAST (232 bytes).
			h := newHarness(t, withPMTU(256), withSR(0))
			before := append([]byte(nil), h.remote.buf...)
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(256, 1), reth(rva+100, rkey, 1000))
			h.drain()
			h.rx(tc.op, packet.PSN(100+tc.psn), pattern(tc.n, 2), imm(1))
			h.drain()
			c := h.r.Counters()
			require.EqualValues(t, 1, c.OOOHeld)
			require.Zero(t, c.OOOPlaced)
			require.Equal(t, before[356:], h.remote.buf[356:], "nothing written past the FIRST")
		})
	}
}

// A WRITE packet placed ahead checks the R_Key range of its own bytes: a
// region deregistered after the FIRST is not written, and the packet is
// held whole to fail when it executes.
func TestPlaceAheadRegionGone(t *testing.T) {
	data := pattern(1024, 3)
	s := placeScript(t, func(s *script) { s.message(writeOps, data, reth(rva, rkey, 1024)) })
	h, o := placeStart(t, s, 0)
	deliver(t, h, o, s, 0)
	h.remote.valid = false
	deliver(t, h, o, s, 2, 3)
	c := h.r.Counters()
	require.EqualValues(t, 2, c.OOOHeld)
	require.Zero(t, c.OOOPlaced)
	require.NotEqual(t, data[512:], h.remote.buf[512:1024])
}

// A second copy of a PSN already held is dropped unread, as without
// placement: it does not overwrite what the first copy placed.
func TestPlaceAheadDuplicate(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	h.rx(packet.RCRDMAWriteFirst, 100, pattern(256, 1), reth(rva, rkey, 1000))
	h.drain()
	first, other := pattern(256, 2), pattern(256, 3)
	h.rx(packet.RCRDMAWriteMiddle, 102, first)
	h.rx(packet.RCRDMAWriteMiddle, 102, other)
	h.drain()
	c := h.r.Counters()
	require.EqualValues(t, 1, c.OOOPlaced)
	require.EqualValues(t, 1, c.OOODuplicates)
	require.Equal(t, first, h.remote.buf[512:768])
}

// BenchmarkSRLossyStream: a stream of 1 MiB WRITEs or SENDs in 4 KiB
// packets under selective repeat, one packet in 100 lost and delivered 64
// packets later (about a loopback round trip at 4 KiB), per op one packet
// in and what it draws out; whole: every out-of-order request held whole
// (noPlaceAhead), as before placeAhead.
func BenchmarkSRLossyStream(b *testing.B) {
	const (
		mtu   = 4096
		size  = 1 << 20
		every = 100 // one packet in every lost
		late  = 64  // packets between a loss and its resend
	)
	for _, op := range []string{"write", "send"} {
		for _, whole := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/whole=%v", op, whole), func(b *testing.B) {
				h := newHarness(b, withPMTU(mtu), withSR(0))
				h.r.noPlaceAhead = whole
				h.r.env.Trace = nil // the harness's state log grows with every packet
				h.remote.buf = make([]byte, size)
				h.local.buf = make([]byte, size)
				ops, mods := writeOps, []reqMod{reth(rva, rkey, size)}
				if op == "send" {
					ops, mods = sendOps, nil
				}
				s := &script{t: b, mtu: mtu, psn: 0}
				s.message(ops, pattern(size, 1), mods...)
				pkts := s.reqs // 256 packets; their PSNs are rewritten as the stream goes
				type lost struct {
					due int
					psn packet.PSN
					b   []byte
				}
				spare := make([][]byte, 8)
				for i := range spare {
					spare[i] = make([]byte, mtu+128)
				}
				pend := make([]lost, 0, len(spare))
				out := make([]byte, mtu+128)
				psn := h.r.EPSN()
				seq := 0
				rx := func(buf []byte, at packet.PSN) {
					packet.BTH(buf).SetPSN(at)
					p, err := packet.Parse(buf)
					if err != nil {
						b.Fatal(err)
					}
					h.r.Receive(t0, p)
					for h.r.NextPacket(t0, out) > 0 {
					}
				}
				b.SetBytes(mtu)
				b.ReportAllocs()
				for b.Loop() {
					i := seq % len(pkts)
					if i == 0 && op == "send" {
						h.rq.post(verbs.RecvWR{SGList: []verbs.SGE{{Addr: lva, Length: size, LKey: lkey}}})
					}
					if seq%every == every/2 && len(pend) < len(spare) {
						c := spare[len(pend)][:len(pkts[i].b)]
						copy(c, pkts[i].b)
						pend = append(pend, lost{due: seq + late, psn: psn, b: c})
					} else {
						rx(pkts[i].b, psn)
					}
					if len(pend) > 0 && pend[0].due == seq {
						// pend[k] is held in spare[k]: deliver the oldest,
						// then move its buffer to the end of both.
						rx(pend[0].b, pend[0].psn)
						copy(pend, pend[1:])
						pend = pend[:len(pend)-1]
						freed := spare[0]
						copy(spare, spare[1:])
						spare[len(spare)-1] = freed
					}
					psn = psn.Next()
					seq++
				}
				if _, failed := h.r.Failed(); failed {
					b.Fatal("the responder failed")
				}
				c := h.r.Counters()
				if c.OOOHeld > 0 {
					b.ReportMetric(float64(c.OOOPlaced)/float64(c.OOOHeld), "placed/held")
				}
			})
		}
	}
}
