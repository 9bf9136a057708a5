package responder

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

func TestStateString(t *testing.T) {
	seen := map[string]bool{}
	for s := StateNone; s < numStates; s++ {
		name := s.String()
		require.NotEmpty(t, name, "state %d", s)
		require.False(t, seen[name], "duplicate name %s", name)
		seen[name] = true
	}
	require.Equal(t, "CHK_PSN", StateCheckPSN.String())
	require.Equal(t, "ERR_INVALIDATE_RKEY_VIOLATION", StateErrInvalidateRKey.String())
	require.Equal(t, "STATE_200", State(200).String())
}

func TestNewRejectsBadPMTU(t *testing.T) {
	require.Panics(t, func() { New(&Config{PMTU: 1500}, Env{}) })
}

var mtus = []int{256, 1024, 4096}

func sizesFor(mtu int) []int { return []int{0, 1, mtu - 1, mtu, mtu + 1, 3*mtu + 5} }

func TestSendSegmented(t *testing.T) {
	for _, mtu := range mtus {
		for _, size := range sizesFor(mtu) {
			t.Run(fmt.Sprintf("pmtu=%d/len=%d", mtu, size), func(t *testing.T) {
				h := newHarness(t, withPMTU(mtu))
				sges := h.postRecv(7, 300, 40000)
				data := pattern(size, 1)
				next := h.message(sendOps, 100, data)
				out := h.drain()
				require.Len(t, out, 1)
				expectACK(t, out[0], next.Add(-1), 1)
				require.Equal(t, next, h.r.EPSN())
				require.Equal(t, uint32(1), h.r.MSN())
				require.Len(t, h.cq.wcs, 1)
				require.Equal(t, verbs.WC{ID: 7, Status: verbs.WCSuccess, Opcode: verbs.WCRecv,
					ByteLen: uint32(size), QPNum: ourQPN, SrcQP: peerQPN}, h.cq.wcs[0])
				require.Equal(t, data, h.gather(sges, size))
				require.Zero(t, h.rq.Len())
				require.Equal(t, uint64(1), h.r.Counters().RDMARecvs)
				require.Equal(t, uint64(size), h.r.Counters().BytesPlaced)
			})
		}
	}
}

func TestSendVariants(t *testing.T) {
	const mtu = 256
	for _, tc := range []struct {
		name  string
		ops   msgOps
		size  int
		mods  []reqMod
		flags verbs.WCFlags
		imm   uint32
	}{
		{"only_imm", sendImmOps, 10, []reqMod{imm(0xDEADBEEF)}, verbs.WCFlagWithImm, 0xDEADBEEF},
		{"last_imm", sendImmOps, 600, []reqMod{imm(0x01020304)}, verbs.WCFlagWithImm, 0x01020304},
		{"only_inv", sendInvOps, 10, []reqMod{ieth(0x4242)}, verbs.WCFlagWithInv, 0x4242},
		{"last_inv", sendInvOps, 600, []reqMod{ieth(0x4242)}, verbs.WCFlagWithInv, 0x4242},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withPMTU(mtu))
			inv := &fakeMR{key: 0x4242, va: 0x50000, buf: make([]byte, 64), valid: true, remoteInv: true}
			h.mem.mrs = append(h.mem.mrs, inv)
			sges := h.postRecv(9, 1000)
			data := pattern(tc.size, 3)
			next := h.message(tc.ops, 100, data, tc.mods...)
			out := h.drain()
			require.Len(t, out, 1)
			expectACK(t, out[0], next.Add(-1), 1)
			require.Len(t, h.cq.wcs, 1)
			wc := h.cq.wcs[0]
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, verbs.WCRecv, wc.Opcode)
			require.Equal(t, tc.flags, wc.Flags)
			require.Equal(t, tc.imm, wc.Imm)
			require.Equal(t, uint32(tc.size), wc.ByteLen)
			require.Equal(t, data, h.gather(sges, tc.size))
			if tc.flags == verbs.WCFlagWithInv {
				require.Equal(t, []uint32{0x4242}, h.mem.invalidated)
				require.False(t, inv.valid)
			}
		})
	}
}

func TestWriteSegmented(t *testing.T) {
	for _, mtu := range mtus {
		for _, size := range sizesFor(mtu) {
			for _, withImm := range []bool{false, true} {
				t.Run(fmt.Sprintf("pmtu=%d/len=%d/imm=%v", mtu, size, withImm), func(t *testing.T) {
					h := newHarness(t, withPMTU(mtu))
					va := uint64(rva + 16)
					data := pattern(size, 5)
					ops, mods := writeOps, []reqMod{reth(va, rkey, uint32(size))}
					if withImm {
						ops, mods = writeImmOps, append(mods, imm(0xCAFE))
						h.postRecv(11, 4) // a WRITE WITH IMM takes a WQE but places nothing in it
					}
					next := h.message(ops, 100, data, mods...)
					out := h.drain()
					require.Len(t, out, 1)
					expectACK(t, out[0], next.Add(-1), 1)
					require.Equal(t, next, h.r.EPSN())
					require.Equal(t, data, h.remoteBytes(va, size))
					require.Zero(t, h.remoteBytes(va+uint64(size), 1)[0], "wrote past the end")
					if !withImm {
						require.Empty(t, h.cq.wcs)
						return
					}
					require.Equal(t, []verbs.WC{{ID: 11, Status: verbs.WCSuccess, Opcode: verbs.WCRecvRDMAWithImm,
						ByteLen: uint32(size), Imm: 0xCAFE, Flags: verbs.WCFlagWithImm, QPNum: ourQPN, SrcQP: peerQPN}}, h.cq.wcs)
				})
			}
		}
	}
}

// expectReadTrain checks the response train of a READ of data at psn with
// the given MSN (IBA 9.7.5.1.6; protocol notes §3.7).
func expectReadTrain(t *testing.T, out []packet.Packet, mtu int, psn packet.PSN, msn uint32, data []byte) {
	t.Helper()
	n := max(1, (len(data)+mtu-1)/mtu)
	require.Len(t, out, n)
	for i, p := range out {
		chunk := data[i*mtu : min((i+1)*mtu, len(data))]
		op := packet.RCRDMAReadResponseMiddle
		switch {
		case n == 1:
			op = packet.RCRDMAReadResponseOnly
		case i == 0:
			op = packet.RCRDMAReadResponseFirst
		case i == n-1:
			op = packet.RCRDMAReadResponseLast
		}
		expect(t, p, opcode(op), psnIs(psn.Add(i)), payloadIs(chunk))
		if op == packet.RCRDMAReadResponseMiddle {
			noAETH(t, p)
		} else {
			expect(t, p, aeth(packet.SyndromeACKUnlimited, msn))
		}
	}
}

func TestRead(t *testing.T) {
	for _, mtu := range mtus {
		for _, size := range []int{0, 1, mtu, 7 * mtu / 2} {
			t.Run(fmt.Sprintf("pmtu=%d/len=%d", mtu, size), func(t *testing.T) {
				h := newHarness(t, withPMTU(mtu))
				va := uint64(rva + 40)
				data := pattern(size, 9)
				copy(h.remoteBytes(va, size), data)
				h.rx(packet.RCRDMAReadRequest, 100, nil, reth(va, rkey, uint32(size)))
				n := max(1, (size+mtu-1)/mtu)
				require.Equal(t, packet.PSN(100).Add(n), h.r.EPSN(), "ePSN advances by the read's PSN count at once")
				require.Equal(t, StateReadReply, h.r.State())
				expectReadTrain(t, h.drain(), mtu, 100, 1, data)
				require.Equal(t, StateGetReq, h.r.State())
				require.Equal(t, uint64(n), h.r.Counters().ReadResponses)
				require.Equal(t, uint64(size), h.r.Counters().BytesRead)
			})
		}
	}
}

// Requests behind a READ are processed while its train is queued; the
// output stays in PSN order.
func TestReadPipelined(t *testing.T) {
	h := newHarness(t)
	data := pattern(3000, 2)
	copy(h.remoteBytes(rva, 3000), data)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 3000))
	h.rx(packet.RCRDMAWriteOnly, 103, []byte{1, 2, 3, 4}, reth(rva+8192, rkey, 4), ackReq)
	h.rx(packet.RCRDMAReadRequest, 104, nil, reth(rva, rkey, 10))
	require.Equal(t, packet.PSN(105), h.r.EPSN())
	out := h.drain()
	require.Len(t, out, 5)
	expectReadTrain(t, out[:3], 1024, 100, 1, data)
	expectACK(t, out[3], 103, 2)
	expectReadTrain(t, out[4:], 1024, 104, 3, data[:10])
}

func TestAtomics(t *testing.T) {
	for _, tc := range []struct {
		name            string
		op              packet.Opcode
		init, swap, cmp uint64
		want            uint64
	}{
		{"cmp_swap_hit", packet.RCCompareSwap, 5, 77, 5, 77},
		{"cmp_swap_miss", packet.RCCompareSwap, 5, 77, 6, 5},
		{"fetch_add", packet.RCFetchAdd, 0xFFFFFFFF, 1, 0, 0x100000000},
		{"fetch_add_wrap", packet.RCFetchAdd, ^uint64(0), 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			va := uint64(rva + 64)
			word := h.remoteBytes(va, 8)
			binary.NativeEndian.PutUint64(word, tc.init)
			h.rx(tc.op, 100, nil, atomicETH(va, rkey, tc.swap, tc.cmp))
			out := h.drain()
			require.Len(t, out, 1)
			expect(t, out[0], opcode(packet.RCAtomicAcknowledge), psnIs(100),
				aeth(packet.SyndromeACKUnlimited, 1), atomicOrig(tc.init))
			require.Equal(t, tc.want, binary.NativeEndian.Uint64(word))
			require.Equal(t, packet.PSN(101), h.r.EPSN())
		})
	}
}

func TestAtomicWriteAndFlush(t *testing.T) {
	h := newHarness(t)
	h.cfg.Access |= verbs.AccessFlushGlobal
	h.r.SetAccess(h.cfg.Access)
	va := uint64(rva + 128)
	val := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	h.rx(packet.RCAtomicWrite, 100, val, reth(va, rkey, 8))
	h.rx(packet.RCFlush, 101, nil, feth(flushGlobal), reth(va, rkey, 8))
	h.rx(packet.RCFlush, 102, nil, feth(flushLevelMR<<4|flushGlobal), reth(0, rkey, 0))
	out := h.drain()
	require.Len(t, out, 3)
	for i, p := range out {
		expect(t, p, opcode(packet.RCRDMAReadResponseOnly), psnIs(packet.PSN(100+i)),
			aeth(packet.SyndromeACKUnlimited, uint32(i+1)), payloadIs(nil))
	}
	require.Equal(t, val, h.remoteBytes(va, 8), "ATOMIC_WRITE stores the payload bytes as they are")
	require.Equal(t, packet.PSN(103), h.r.EPSN())
	// Duplicates are answered again and not re-executed.
	copy(h.remoteBytes(va, 8), make([]byte, 8))
	h.rx(packet.RCAtomicWrite, 100, val, reth(va, rkey, 8))
	h.rx(packet.RCFlush, 101, nil, feth(flushGlobal), reth(va, rkey, 8))
	out = h.drain()
	require.Len(t, out, 2)
	expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(100))
	expect(t, out[1], opcode(packet.RCRDMAReadResponseOnly), psnIs(101))
	require.Equal(t, make([]byte, 8), h.remoteBytes(va, 8))
}

func TestPSNWrap(t *testing.T) {
	h := newHarness(t, withPMTU(256), withPSN(0xFFFFFE))
	sges := h.postRecv(1, 2000)
	data := pattern(1000, 4) // 4 packets: FFFFFE, FFFFFF, 0, 1
	next := h.message(sendOps, 0xFFFFFE, data)
	require.Equal(t, packet.PSN(2), next)
	out := h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 1, 1)
	require.Equal(t, data, h.gather(sges, 1000))

	// A READ across the wrap and a replay from its middle.
	h2 := newHarness(t, withPMTU(256), withPSN(0xFFFFFF))
	rd := pattern(768, 6)
	copy(h2.remoteBytes(rva, 768), rd)
	h2.rx(packet.RCRDMAReadRequest, 0xFFFFFF, nil, reth(rva, rkey, 768))
	require.Equal(t, packet.PSN(2), h2.r.EPSN())
	expectReadTrain(t, h2.drain(), 256, 0xFFFFFF, 1, rd)
	h2.rx(packet.RCRDMAReadRequest, 0, nil, reth(rva+256, rkey, 512))
	expectReadTrain(t, h2.drain(), 256, 0, 1, rd[256:])
	// An old PSN from before the wrap is a duplicate, not a new request.
	h2.rx(packet.RCSendOnly, 0xFFFFF0, nil)
	out = h2.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 1, 1)
}

func TestDuplicateSendWrite(t *testing.T) {
	h := newHarness(t)
	sges := h.postRecv(1, 100)
	h.rx(packet.RCSendOnly, 100, pattern(10, 1), ackReq)
	va := uint64(rva)
	h.message(writeOps, 101, pattern(2500, 2), reth(va, rkey, 2500)) // 101..103
	out := h.drain()
	require.Len(t, out, 1, "coalesced")
	expectACK(t, out[0], 103, 2)
	require.Zero(t, h.r.LossSignals(), "requests received once")

	// Duplicates are re-ACKed with ePSN-1 and never re-executed (C9-105),
	// whatever their AckReq bit.
	h.rx(packet.RCSendOnly, 100, pattern(10, 9))
	h.rx(packet.RCRDMAWriteMiddle, 102, pattern(1024, 9))
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 103, 2)
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, pattern(10, 1), h.gather(sges, 10))
	require.Equal(t, pattern(2500, 2), h.remoteBytes(va, 2500))
	require.Equal(t, uint64(2), h.r.Counters().DuplicateRequest)
	require.Equal(t, uint64(2), h.r.LossSignals(), "requests received again are signs of loss")
	require.Equal(t, packet.PSN(104), h.r.EPSN())
}

func TestDuplicateRead(t *testing.T) {
	const mtu = 1024
	data := pattern(4*mtu, 3)
	setup := func(t *testing.T) *harness {
		h := newHarness(t)
		copy(h.remoteBytes(rva, len(data)), data)
		h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
		h.rx(packet.RCSendOnly, 104, nil, ackReq) // no WQE: RNR, but ePSN is past the read
		require.Len(t, h.drain(), 5)
		return h
	}
	for _, tc := range []struct {
		name   string
		psn    packet.PSN
		va     uint64
		length uint32
		key    uint32
		want   []byte // nil: dropped
		at     packet.PSN
	}{
		{"whole", 100, rva, 4 * mtu, rkey, data, 100},
		{"from_middle", 102, rva + 2*mtu, 2 * mtu, rkey, data[2*mtu:], 102},
		{"last_packet", 103, rva + 3*mtu, mtu, rkey, data[3*mtu:], 103},
		{"other_rkey", 102, rva + 2*mtu, 2 * mtu, rkey + 1, nil, 0},
		{"outside_range", 102, rva + 2*mtu, 3 * mtu, rkey, nil, 0},
		{"before_range", 102, rva - 8, 2 * mtu, rkey, nil, 0},
		{"psn_overflow", 103, rva + 2*mtu, 2 * mtu, rkey, nil, 0},
		{"no_resource", 90, rva, mtu, rkey, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := setup(t)
			h.rx(packet.RCRDMAReadRequest, tc.psn, nil, reth(tc.va, tc.key, tc.length))
			out := h.drain()
			require.Equal(t, packet.PSN(104), h.r.EPSN())
			if tc.want == nil {
				require.Empty(t, out)
				require.Equal(t, uint64(1), h.r.Counters().DuplicateDropped)
				return
			}
			// Replays restart with FIRST/ONLY at the retry PSN (rdmavt
			// shape); the MSN is the current one.
			expectReadTrain(t, out, mtu, tc.at, 1, tc.want)
			require.Equal(t, uint64(1), h.r.Counters().ReadReplays)
		})
	}
}

func TestDuplicateAtomic(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 2 })
	va := uint64(rva + 8)
	word := h.remoteBytes(va, 8)
	binary.NativeEndian.PutUint64(word, 5)
	h.rx(packet.RCFetchAdd, 100, nil, atomicETH(va, rkey, 3, 0))
	h.rx(packet.RCCompareSwap, 101, nil, atomicETH(va, rkey, 100, 8))
	require.Len(t, h.drain(), 2)
	require.Equal(t, uint64(100), binary.NativeEndian.Uint64(word))

	// Replays return the saved original value and do not execute again.
	h.rx(packet.RCFetchAdd, 100, nil, atomicETH(va, rkey, 3, 0))
	h.rx(packet.RCCompareSwap, 101, nil, atomicETH(va, rkey, 100, 8))
	out := h.drain()
	require.Len(t, out, 2)
	expect(t, out[0], opcode(packet.RCAtomicAcknowledge), psnIs(100), aeth(packet.SyndromeACKUnlimited, 2), atomicOrig(5))
	expect(t, out[1], opcode(packet.RCAtomicAcknowledge), psnIs(101), atomicOrig(8))
	require.Equal(t, uint64(100), binary.NativeEndian.Uint64(word))

	// With two resources, a third atomic recycles the oldest: its
	// duplicate is dropped (class D).
	h.rx(packet.RCFetchAdd, 102, nil, atomicETH(va, rkey, 1, 0))
	require.Len(t, h.drain(), 1)
	h.rx(packet.RCFetchAdd, 100, nil, atomicETH(va, rkey, 3, 0))
	require.Empty(t, h.drain())
	require.Equal(t, uint64(101), binary.NativeEndian.Uint64(word))
	require.Equal(t, uint64(1), h.r.Counters().DuplicateDropped)
}

func TestOutOfSequence(t *testing.T) {
	h := newHarness(t)
	va := uint64(rva)
	w := func(psn packet.PSN) { h.rx(packet.RCRDMAWriteOnly, psn, []byte{1}, reth(va, rkey, 1), ackReq) }
	w(102)
	w(103)
	w(104)
	out := h.drain()
	require.Len(t, out, 1, "exactly one NAK per gap")
	expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(100), aeth(packet.NAKSyndrome(packet.NAKPSNSeqError), 0))
	require.Equal(t, packet.PSN(100), h.r.EPSN())
	w(100)
	w(101)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 101, 2)
	w(105) // a new gap draws a new NAK
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], psnIs(102), syndrome(packet.NAKSyndrome(packet.NAKPSNSeqError)))
	c := h.r.Counters()
	require.Equal(t, uint64(2), c.OutOfSeqRequest)
	require.Equal(t, uint64(2), c.OutOfSeqDropped)
	require.Equal(t, uint64(2), h.r.LossSignals(), "each sequence-error NAK sent is a sign of loss")
	_, failed := h.r.Failed()
	require.False(t, failed)
}

func TestRNR(t *testing.T) {
	h := newHarness(t)
	h.rx(packet.RCSendOnly, 100, []byte("hi"), ackReq)
	h.rx(packet.RCSendOnly, 101, []byte("there"), ackReq) // in flight behind: dropped silently
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(100), aeth(packet.RNRSyndrome(12), 0))
	require.Equal(t, packet.PSN(100), h.r.EPSN())
	require.True(t, h.seen(StateErrRNR))

	// A Modify QP sets a new timer code for the next RNR NAK.
	h.r.SetMinRNRTimer(5)
	h.rx(packet.RCSendOnly, 100, []byte("hi"), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], syndrome(packet.RNRSyndrome(5)))

	sges := h.postRecv(3, 64)
	h.rx(packet.RCSendOnly, 100, []byte("hi"), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 100, 1)
	require.Equal(t, []byte("hi"), h.gather(sges, 2))
	require.Equal(t, uint64(2), h.r.Counters().SendRNRErr)
	_, failed := h.r.Failed()
	require.False(t, failed)

	// A WRITE WITH IMMEDIATE needs its WQE at the last packet only: the
	// retry restarts there, the data already written stays.
	data := pattern(2000, 8)
	h.rx(packet.RCRDMAWriteFirst, 101, data[:1024], reth(rva, rkey, 2000), imm(1))
	h.rx(packet.RCRDMAWriteLastWithImm, 102, data[1024:], imm(1), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], psnIs(102), syndrome(packet.RNRSyndrome(5)))
	h.postRecv(4, 0)
	h.rx(packet.RCRDMAWriteLastWithImm, 102, data[1024:], imm(1), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 102, 2)
	require.Equal(t, data, h.remoteBytes(rva, 2000))
	require.Equal(t, uint32(2000), h.cq.wcs[1].ByteLen)
	require.Equal(t, verbs.WCRecvRDMAWithImm, h.cq.wcs[1].Opcode)
}

func TestZeroLengthRDMASkipsRKey(t *testing.T) {
	// IBA C9-88: a zero-length WRITE or READ does not check R_Key or VA.
	h := newHarness(t)
	h.rx(packet.RCRDMAWriteOnly, 100, nil, reth(0xBAD, 0xBAD, 0), ackReq)
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(0xBAD, 0xBAD, 0))
	out := h.drain()
	require.Len(t, out, 2)
	expectACK(t, out[0], 100, 1)
	expect(t, out[1], opcode(packet.RCRDMAReadResponseOnly), psnIs(101), aeth(packet.SyndromeACKUnlimited, 2), payloadIs(nil))
	// A zero-length READ can be replayed.
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(0xBAD, 0x1, 0))
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(101))
}

func TestACKCoalescing(t *testing.T) {
	h := newHarness(t)
	w := func(psn packet.PSN, mods ...reqMod) {
		h.rx(packet.RCRDMAWriteOnly, psn, []byte{1, 2}, append(mods, reth(rva, rkey, 2))...)
	}
	w(100, ackReq)
	w(101, ackReq)
	w(102, ackReq)
	out := h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 102, 3)
	require.Equal(t, uint64(2), h.r.Counters().AcksCoalesced)

	// ACKs do not jump over a queued READ train.
	w(103, ackReq)
	h.rx(packet.RCRDMAReadRequest, 104, nil, reth(rva, rkey, 2))
	w(105, ackReq)
	w(106, ackReq)
	out = h.drain()
	require.Len(t, out, 3)
	expectACK(t, out[0], 103, 4)
	expect(t, out[1], opcode(packet.RCRDMAReadResponseOnly), psnIs(104), aeth(packet.SyndromeACKUnlimited, 5))
	expectACK(t, out[2], 106, 7)

	// Without AckReq, the end of a message is still acknowledged; a
	// FIRST or MIDDLE without AckReq is not.
	h.rx(packet.RCRDMAWriteFirst, 107, pattern(1024, 0), reth(rva, rkey, 2048))
	h.rx(packet.RCRDMAWriteMiddle, 108, pattern(1024, 0))
	require.False(t, h.r.Pending())
	h.rx(packet.RCRDMAWriteLast, 109, pattern(1024, 0))
	require.True(t, h.seen(StateErrLength), "a LAST beyond the DMA length")
	h2 := newHarness(t)
	h2.rx(packet.RCRDMAWriteFirst, 100, pattern(1024, 0), reth(rva, rkey, 1500))
	require.False(t, h2.r.Pending())
	h2.rx(packet.RCRDMAWriteLast, 101, pattern(476, 0))
	out = h2.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 101, 1)
}

func TestCredits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		credits bool
		srq     bool
		posted  int
		want    packet.Syndrome
	}{
		{"off", false, false, 5, packet.SyndromeACKUnlimited},
		{"none_posted", true, false, 0, packet.ACKSyndrome(0)},
		{"one", true, false, 1, packet.ACKSyndrome(1)},
		{"five", true, false, 5, packet.ACKSyndrome(packet.CreditCode(5))},
		{"hundred", true, false, 100, packet.ACKSyndrome(packet.CreditCode(100))},
		{"srq", true, true, 5, packet.SyndromeACKUnlimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Credits, c.SRQ = tc.credits, tc.srq })
			for i := range tc.posted {
				h.postRecv(uint64(i), 16)
			}
			h.rx(packet.RCRDMAWriteOnly, 100, []byte{1}, reth(rva, rkey, 1), ackReq)
			h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva, rkey, 1))
			h.rx(packet.RCFetchAdd, 102, nil, atomicETH(rva+8, rkey, 1, 0))
			out := h.drain()
			require.Len(t, out, 3)
			for _, p := range out {
				expect(t, p, syndrome(tc.want))
			}
		})
	}
}

func TestFlush(t *testing.T) {
	t.Run("rq", func(t *testing.T) {
		h := newHarness(t)
		h.postRecv(1, 4096)
		h.postRecv(2, 16)
		h.postRecv(3, 16)
		h.rx(packet.RCSendFirst, 100, pattern(1024, 0))
		h.rx(packet.RCSendMiddle, 101, pattern(1024, 0), ackReq)
		require.True(t, h.r.Pending())
		h.r.Flush()
		require.False(t, h.r.Pending(), "pending output dropped")
		require.Zero(t, h.rq.Len())
		require.Len(t, h.cq.wcs, 3)
		for i, wc := range h.cq.wcs {
			require.Equal(t, verbs.WC{ID: uint64(i + 1), Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: ourQPN}, wc)
		}
		require.Equal(t, StateError, h.r.State())
		// Afterwards every packet is dropped; a later Flush flushes new WQEs.
		h.rx(packet.RCSendMiddle, 102, pattern(1024, 0))
		require.False(t, h.r.Pending())
		h.postRecv(4, 16)
		h.r.Flush()
		require.Len(t, h.cq.wcs, 4)
	})
	t.Run("srq", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.SRQ = true })
		h.postRecv(1, 16)
		h.postRecv(2, 16)
		h.r.Flush()
		require.Empty(t, h.cq.wcs)
		require.Equal(t, 2, h.rq.Len())
	})
	t.Run("keeps_error_nak", func(t *testing.T) {
		h := newHarness(t)
		h.rx(packet.RCRDMAWriteOnly, 100, []byte{1}, reth(rva, 0xBAD, 1), ackReq)
		_, failed := h.r.Failed()
		require.True(t, failed)
		h.r.Flush()
		out := h.drain()
		require.Len(t, out, 1)
		expect(t, out[0], psnIs(100), syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
	})
	t.Run("drops_class_b_naks", func(t *testing.T) {
		// An RNR NAK and a PSN Sequence Error NAK still queued are no
		// error NAK of a failure: a QP moved to ERR does not send them.
		for _, send := range []func(h *harness){
			func(h *harness) { h.rx(packet.RCSendOnly, 100, []byte{1}, ackReq) },
			func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 102, []byte{1}, reth(rva, rkey, 1), ackReq) },
		} {
			h := newHarness(t)
			send(h)
			require.True(t, h.r.Pending())
			h.r.Flush()
			require.Empty(t, h.drain())
		}
	})
}

// TestMRGoneMidRead covers a memory region deregistered while its READ
// response train is being sent: the train and what follows it are
// replaced by a Remote Access Error NAK carrying the PSN of the READ
// request the train answers (rxe read_reply fails, and acknowledge NAKs
// the request packet's PSN), that of the duplicate for a replayed train.
func TestMRGoneMidRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		sent int // responses sent before the deregistration
		dup  bool
		psn  packet.PSN
	}{
		{name: "before_first_response", sent: 0, psn: 100},
		{name: "after_first_response", sent: 1, psn: 100},
		{name: "after_two_responses", sent: 2, psn: 100},
		{name: "replayed_from_middle", sent: 2, dup: true, psn: 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 3000))
			h.rx(packet.RCRDMAWriteOnly, 103, []byte{1}, reth(rva, rkey, 1), ackReq)
			for range tc.sent {
				require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))
			}
			if tc.dup {
				// The requester lost the responses from 101 on and asks
				// for the rest; the train restarts there.
				h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+1024, rkey, 3000-1024))
			}
			h.remote.valid = false // deregistered between two response packets
			out := h.drain()
			require.Len(t, out, 1, "the train and what follows it are replaced by the NAK")
			expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(tc.psn), aeth(packet.NAKSyndrome(packet.NAKRemoteAccess), 2))
			status, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCRemAccessErr, status)
			require.Equal(t, StateErrRKeyViolation, h.r.FailState())
		})
	}
}

// TestSolicitedCompletions: each receive completion carries its
// request's SE bit for solicited-only notification.
func TestSolicitedCompletions(t *testing.T) {
	h, cq := seHarness(t)
	h.rx(packet.RCSendOnly, 100, []byte{1}, se, ackReq)
	h.rx(packet.RCSendOnly, 101, []byte{1}, ackReq)
	require.Equal(t, []bool{true, false}, cq.se)
}

// seCQ records the solicited flag of each completion it takes.
type seCQ struct{ se []bool }

// seHarness is a harness whose responder completes into an seCQ, with two
// 16-byte receive WQEs (IDs 1 and 2) posted.
func seHarness(t *testing.T) (*harness, *seCQ) {
	h := newHarness(t)
	cq := &seCQ{}
	h.r = New(&h.cfg, Env{Mem: h.mem, RQ: h.rq, CQ: cq})
	h.postRecv(1, 16)
	h.postRecv(2, 16)
	return h, cq
}

func (c *seCQ) Complete(*verbs.WC) bool { panic("CompleteSolicited expected") }
func (c *seCQ) CompleteSolicited(_ *verbs.WC, s bool) bool {
	c.se = append(c.se, s)
	return true
}

func TestDropsNonRequests(t *testing.T) {
	h := newHarness(t)
	for _, op := range []packet.Opcode{packet.RCAcknowledge, packet.RCRDMAReadResponseOnly, packet.UCSendOnly, packet.CNP} {
		var mods []reqMod
		h.r.Receive(t0, build(t, h.tx, op, 100, nil, mods...))
	}
	require.False(t, h.r.Pending())
	require.Equal(t, uint64(4), h.r.Counters().Dropped)
	require.Equal(t, packet.PSN(100), h.r.EPSN())
}

func TestBufferTooSmallKeepsPacket(t *testing.T) {
	h := newHarness(t)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 1000))
	require.Zero(t, h.r.NextPacket(t0, make([]byte, 100)))
	require.True(t, h.r.Pending())
	require.Len(t, h.drain(), 1)
}

// The output queue is bounded; a request that finds it full is dropped
// before it changes any state, like a lost packet.
func TestQueueFullDrops(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 1 })
	psn := packet.PSN(100)
	for i := 0; h.r.q.Free() > 0; i++ {
		require.Less(t, i, 100)
		if i%2 == 0 {
			h.rx(packet.RCRDMAReadRequest, psn, nil, reth(rva, rkey, 8))
		} else {
			h.rx(packet.RCRDMAWriteOnly, psn, []byte{1}, reth(rva, rkey, 1), ackReq)
		}
		psn = psn.Next()
	}
	h.rx(packet.RCRDMAWriteOnly, psn, []byte{1}, reth(rva, rkey, 1), ackReq)
	require.Equal(t, psn, h.r.EPSN())
	require.Equal(t, uint64(1), h.r.Counters().Dropped)
	require.Len(t, h.drain(), 4*1+16)
	h.rx(packet.RCRDMAWriteOnly, psn, []byte{1}, reth(rva, rkey, 1), ackReq)
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(psn))
}

// TestDuplicateReadRestartsTrain: a duplicate READ for PSNs the train has
// already sent rewinds the train still being sent to the duplicate's PSN
// (FIRST, the rest of the data), instead of queueing a replay behind the
// rest of the train; a duplicate for PSNs not sent yet is answered by the
// train itself and dropped (rxe duplicate_request repositions its current
// read resource the same way).
func TestDuplicateReadRestartsTrain(t *testing.T) {
	const mtu = 1024
	data := pattern(8*mtu, 5)
	pull := func(h *harness, k int) []packet.Packet {
		var out []packet.Packet
		for range k {
			n := h.r.NextPacket(t0, h.rxbuf)
			require.NotZero(t, n)
			p, err := packet.Parse(append([]byte(nil), h.rxbuf[:n]...))
			require.NoError(t, err)
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		dup       packet.PSN
		wantFirst packet.PSN
		restarts  uint64
		covered   uint64
	}{
		{"already_sent", 102, 102, 1, 0},
		{"not_sent_yet", 106, 104, 0, 1},
		{"next_to_send", 104, 104, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			copy(h.remoteBytes(rva, len(data)), data)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
			first := pull(h, 4) // 100..103 are on their way
			require.Equal(t, packet.PSN(103), first[3].PSN())
			off := uint32(tc.dup-100) * mtu
			h.rx(packet.RCRDMAReadRequest, tc.dup, nil, reth(rva+uint64(off), rkey, uint32(len(data))-off))
			rest := h.drain()
			require.Len(t, rest, int(108-tc.wantFirst), "nothing is sent twice beyond the rewind")
			for i, p := range rest {
				psn := tc.wantFirst.Add(i)
				require.Equal(t, psn, p.PSN())
				require.Equal(t, data[(psn-100)*mtu:(psn-99)*mtu], p.Payload())
			}
			if tc.restarts > 0 {
				require.Equal(t, packet.RCRDMAReadResponseFirst, rest[0].Opcode(), "a rewound train restarts with FIRST")
			} else {
				require.Equal(t, packet.RCRDMAReadResponseMiddle, rest[0].Opcode(), "the train goes on")
			}
			require.Equal(t, packet.RCRDMAReadResponseLast, rest[len(rest)-1].Opcode())
			c := h.r.Counters()
			require.Equal(t, tc.restarts, c.ReadRestarts)
			require.Equal(t, tc.covered, c.ReadsCovered)
			require.Equal(t, uint64(104-tc.wantFirst), c.ReadResponsesResent, "PSNs sent again")
			require.Equal(t, uint64(1), c.DuplicateRequest)
			require.Equal(t, packet.PSN(108), h.r.EPSN())
		})
	}
}

// TestDuplicateReadOutsideOriginalDropped: a duplicate READ is answered
// only if its range lies inside the original READ's (rxe duplicate_request
// drops it otherwise), here where the PSN span alone would allow it: the
// original is one PSN of 100 bytes.
func TestDuplicateReadOutsideOriginalDropped(t *testing.T) {
	const va = rva + 1024
	for _, tc := range []struct {
		name   string
		va     uint64
		length uint32
		replay bool
	}{
		{"same", va, 100, true},
		{"inside", va + 40, 60, true},
		{"longer", va, 101, false},
		{"past_end", va + 50, 100, false},
		{"before_start", va - 8, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			copy(h.remoteBytes(rva, 4096), pattern(4096, 5))
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(va, rkey, 100))
			require.Len(t, h.drain(), 1)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(tc.va, rkey, tc.length))
			out := h.drain()
			if !tc.replay {
				require.Empty(t, out)
				require.Equal(t, uint64(1), h.r.Counters().DuplicateDropped)
				return
			}
			require.Len(t, out, 1)
			expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(100),
				payloadIs(h.remoteBytes(tc.va, int(tc.length))))
		})
	}
}

// TestDuplicateReadReplayInArrivalOrder: without selective repeat a
// replayed READ's responses leave after the responses already queued, in
// the order the requests arrived, as rxe answers each request when it
// processes it; only selective repeat puts a replay at the head.
func TestDuplicateReadReplayInArrivalOrder(t *testing.T) {
	h := newHarness(t)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	require.Len(t, h.drain(), 1)
	h.rx(packet.RCRDMAWriteOnly, 101, pattern(8, 0), reth(rva+64, rkey, 8), ackReq)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	out := h.drain()
	require.Len(t, out, 2)
	expectACK(t, out[0], 101, 2)
	expect(t, out[1], opcode(packet.RCRDMAReadResponseOnly), psnIs(100))
}

// TestMRGoneMidReadBeforeLaterFailure: when a READ's region goes while its
// responses are queued and a later request has already failed the
// responder, the READ's fault is the failure reported, the one whose NAK
// goes on the wire (the later request's NAK queued behind the train is
// dropped with it). Kernel rxe answers a READ whole before it looks at the
// next request, so it fails on the READ with REM_ACCESS_ERR.
func TestMRGoneMidReadBeforeLaterFailure(t *testing.T) {
	h := newHarness(t)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	h.rx(packet.RCSendMiddle, 101, pattern(1024, 0)) // no FIRST: class C
	status, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRemInvReqErr, status)
	h.remote.valid = false
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(100), syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
	status, failed = h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRemAccessErr, status, "Failed agrees with the NAK sent")
	require.Equal(t, StateErrRKeyViolation, h.r.FailState())
}

// TestDuplicateReadPastQueuedReplay: without selective repeat a duplicate
// READ that asks for PSNs past the end of the replay still queued for the
// same READ is answered: the replay is repositioned to the duplicate's
// range (FIRST at its PSN, its VA and length), as rxe duplicate_request
// resets the READ's responder resource to the duplicate, instead of being
// dropped as if the replay would send those PSNs. One response stream per
// READ stays queued. A duplicate inside what the replay has still to send
// is left to it.
func TestDuplicateReadPastQueuedReplay(t *testing.T) {
	const mtu = 1024
	data := pattern(8*mtu, 9)
	for _, tc := range []struct {
		name     string
		dup, end packet.PSN // the second duplicate asks for [dup, end)
		want     []packet.PSN
		covered  uint64
	}{
		{"past_replay_end", 104, 108, []packet.PSN{104, 105, 106, 107}, 0},
		{"overlaps_replay_end", 101, 104, []packet.PSN{101, 102, 103}, 0},
		{"inside_replay", 101, 102, []packet.PSN{100, 101}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			copy(h.remoteBytes(rva, len(data)), data)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
			require.Len(t, h.drain(), 8)
			// The first duplicate asks for 100..101 again: a replay is queued.
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			off := uint32(tc.dup-100) * mtu
			h.rx(packet.RCRDMAReadRequest, tc.dup, nil, reth(rva+uint64(off), rkey, uint32(tc.end-tc.dup)*mtu))
			streams := 0
			for i := range h.r.q.Len() {
				if h.r.q.At(i).kind == outRead {
					streams++
				}
			}
			require.Equal(t, 1, streams, "one response stream for the READ")
			out := h.drain()
			psns := make([]packet.PSN, len(out))
			for i, p := range out {
				psns[i] = p.PSN()
			}
			require.Equal(t, tc.want, psns, "the PSNs of the responses")
			for _, p := range out {
				require.Equal(t, data[(p.PSN()-100)*mtu:(p.PSN()-99)*mtu], p.Payload())
			}
			require.Contains(t, []packet.Opcode{packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseOnly}, out[0].Opcode())
			require.Equal(t, packet.RCRDMAReadResponseLast, out[len(out)-1].Opcode())
			require.Equal(t, tc.covered, h.r.Counters().ReadsCovered)
			require.Zero(t, h.r.Counters().DuplicateDropped)
		})
	}
}
