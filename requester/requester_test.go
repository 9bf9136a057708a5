package requester

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

const (
	lkeyA = 0x100
	lkeyB = 0x101
	rkey  = 0x200
	baseA = 0x10000
	baseB = 0x40000000
	rbase = 0x900000
)

// splitSGEs describes size bytes as up to three SGEs over two regions.
func splitSGEs(size int) []verbs.SGE {
	a, b := size/3, size/3
	c := size - a - b
	return []verbs.SGE{
		{Addr: baseA + 3, Length: uint32(a), LKey: lkeyA},
		{Addr: baseB + 1, Length: uint32(b), LKey: lkeyB},
		{Addr: baseA + 3 + uint64(a) + 17, Length: uint32(c), LKey: lkeyA},
	}
}

// gatherSGEs returns the bytes the SGEs describe.
func gatherSGEs(t testing.TB, m fakeMem, sges []verbs.SGE) []byte {
	var out []byte
	for _, s := range sges {
		b, ok := m.Local(s.LKey, s.Addr, s.Length, 0)
		require.True(t, ok)
		out = append(out, b...)
	}
	return out
}

func wantOpcodes(op verbs.WROpcode, n int) []packet.Opcode {
	if op == verbs.WRRDMARead {
		return []packet.Opcode{packet.RCRDMAReadRequest}
	}
	out := make([]packet.Opcode, n)
	for i := range out {
		out[i] = segOpcode(op, i == 0, i == n-1)
	}
	return out
}

func TestSegmentation(t *testing.T) {
	ops := []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRSendWithInv,
		verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead}
	for _, pmtu := range []int{1024, 4096} {
		for _, size := range []int{0, 1, pmtu - 1, pmtu, pmtu + 1, 1 << 20} {
			for _, op := range ops {
				t.Run(fmt.Sprintf("%v/pmtu%d/%d", op, pmtu, size), func(t *testing.T) {
					testSegmentation(t, op, pmtu, size)
				})
			}
		}
	}
}

func testSegmentation(t *testing.T, op verbs.WROpcode, pmtu, size int) {
	const sqpsn = 0x123456
	cfg := baseConfig(pmtu, sqpsn)
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 2*size+64, verbs.AccessLocalWrite, 1)
	h.mem.add(lkeyB, baseB, size+64, verbs.AccessLocalWrite, 2)
	f := newResponder(t, pmtu, sqpsn)
	remote := f.mem.add(rkey, rbase, size+64, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 3)
	sges := splitSGEs(size)
	local := gatherSGEs(t, h.mem, sges)
	rdata := append([]byte(nil), remote.buf[8:8+size]...)
	wr := &verbs.SendWR{ID: 7, Opcode: op, Flags: verbs.SendSignaled | verbs.SendSolicited,
		Imm: 0xDEADBEEF, InvalidateRKey: 0x7777, RemoteAddr: rbase + 8, RKey: rkey, SGList: sges}
	h.post(wr)
	sent := pumpLink(h, f)

	npk := max(1, (size+pmtu-1)/pmtu)
	want := wantOpcodes(op, npk)
	require.Len(t, sent, len(want))
	var payload []byte
	for i, b := range sent {
		p := parse(t, b)
		require.Equal(t, want[i], p.Opcode(), "packet %d", i)
		require.Equal(t, packet.PSN(sqpsn).Add(i), p.PSN())
		last := i == len(want)-1
		require.Equal(t, last || (i+1)%(DefaultWindow/ackPerWindow) == 0, p.AckReq(), "AckReq of packet %d", i)
		wantSE := last && (op == verbs.WRSend || op == verbs.WRSendWithImm || op == verbs.WRSendWithInv || op == verbs.WRRDMAWriteWithImm)
		require.Equal(t, wantSE, p.BTH().SE(), "SE of packet %d", i)
		info := p.Info()
		if p.Opcode() != packet.RCRDMAReadRequest {
			if !last {
				require.Equal(t, pmtu, p.PayloadLen())
			}
			if info.Has(packet.HdrRETH) {
				require.Equal(t, packet.RETHFields{VA: rbase + 8, RKey: rkey, DMALen: uint32(size)}, p.RETH().Fields())
			}
		} else {
			require.Equal(t, packet.RETHFields{VA: rbase + 8, RKey: rkey, DMALen: uint32(size)}, p.RETH().Fields())
		}
		require.Equal(t, last && (op == verbs.WRSendWithImm || op == verbs.WRRDMAWriteWithImm), info.Has(packet.HdrImmDt))
		if info.Has(packet.HdrImmDt) {
			require.Equal(t, uint32(0xDEADBEEF), p.ImmDt().Imm())
		}
		require.Equal(t, last && op == verbs.WRSendWithInv, info.Has(packet.HdrIETH))
		if info.Has(packet.HdrIETH) {
			require.Equal(t, uint32(0x7777), p.IETH().RKey())
		}
		payload = append(payload, p.Payload()...)
	}
	switch op {
	case verbs.WRSend, verbs.WRSendWithImm, verbs.WRSendWithInv:
		require.Equal(t, local, payload)
		require.Len(t, f.msgs, 1)
		require.True(t, bytes.Equal(local, f.msgs[0]))
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		require.Equal(t, local, payload)
		require.True(t, bytes.Equal(local, remote.buf[8:8+size]))
	case verbs.WRRDMARead:
		require.Empty(t, payload)
		require.True(t, bytes.Equal(rdata, gatherSGEs(t, h.mem, sges)), "read data placed")
	}
	require.Equal(t, packet.PSN(sqpsn).Add(npk), h.r.SQPSN())
	wc := verbs.WC{ID: 7, Status: verbs.WCSuccess, Opcode: verbs.WCOpcodeOf(op), ByteLen: uint32(size), QPNum: testQPN}
	if op == verbs.WRSendWithImm || op == verbs.WRRDMAWriteWithImm {
		wc.Flags = verbs.WCFlagWithImm
	}
	require.Equal(t, []verbs.WC{wc}, h.cq.wcs)
	require.Zero(t, h.r.Outstanding())
	require.True(t, h.r.Deadline().IsZero(), "timer stopped when nothing is outstanding")
	c := h.r.Counters()
	require.Equal(t, uint64(len(sent)), c.PacketsSent)
	require.Zero(t, c.Retransmits)
}

func TestAtomics(t *testing.T) {
	for _, tc := range []struct {
		name        string
		op          verbs.WROpcode
		cmpAdd, swp uint64
		init, after uint64
		wantOp      packet.Opcode
		wantETH     packet.AtomicETHFields
	}{
		{"cas-hit", verbs.WRAtomicCmpAndSwp, 5, 9, 5, 9, packet.RCCompareSwap,
			packet.AtomicETHFields{VA: rbase + 16, RKey: rkey, SwapAdd: 9, Compare: 5}},
		{"cas-miss", verbs.WRAtomicCmpAndSwp, 4, 9, 5, 5, packet.RCCompareSwap,
			packet.AtomicETHFields{VA: rbase + 16, RKey: rkey, SwapAdd: 9, Compare: 4}},
		{"fetch-add", verbs.WRAtomicFetchAndAdd, 3, 0, 40, 43, packet.RCFetchAdd,
			packet.AtomicETHFields{VA: rbase + 16, RKey: rkey, SwapAdd: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(1024, 0xFFFFFF))
			lm := h.mem.add(lkeyA, baseA, 64, verbs.AccessLocalWrite, 0)
			f := newResponder(t, 1024, 0xFFFFFF)
			rm := f.mem.add(rkey, rbase, 64, verbs.AccessRemoteAtomic, 0)
			binary.NativeEndian.PutUint64(rm.buf[16:], tc.init)
			h.post(&verbs.SendWR{ID: 1, Opcode: tc.op, Flags: verbs.SendSignaled, RemoteAddr: rbase + 16, RKey: rkey,
				CompareAdd: tc.cmpAdd, Swap: tc.swp, SGList: []verbs.SGE{{Addr: baseA + 4, Length: 3, LKey: lkeyA}, {Addr: baseA + 20, Length: 5, LKey: lkeyA}}})
			sent := pumpLink(h, f)
			require.Len(t, sent, 1)
			p := parse(t, sent[0])
			require.Equal(t, tc.wantOp, p.Opcode())
			require.True(t, p.AckReq())
			require.Equal(t, tc.wantETH, p.AtomicETH().Fields())
			var orig [8]byte
			binary.NativeEndian.PutUint64(orig[:], tc.init)
			require.Equal(t, orig[:3], lm.buf[4:7], "original value, native byte order, across SGEs")
			require.Equal(t, orig[3:], lm.buf[20:25])
			require.Equal(t, tc.after, binary.NativeEndian.Uint64(rm.buf[16:]))
			require.Equal(t, []verbs.WC{{ID: 1, Opcode: verbs.WCOpcodeOf(tc.op), ByteLen: 8, QPNum: testQPN}}, h.cq.wcs)
			require.Zero(t, h.r.rdInUse)
		})
	}
	t.Run("atomic-write", func(t *testing.T) {
		h := newHarness(t, baseConfig(1024, 7))
		f := newResponder(t, 1024, 7)
		rm := f.mem.add(rkey, rbase, 64, verbs.AccessRemoteWrite, 0)
		h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRAtomicWrite, Flags: verbs.SendSignaled | verbs.SendInline,
			RemoteAddr: rbase + 8, RKey: rkey, InlineData: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
		sent := pumpLink(h, f)
		require.Len(t, sent, 1)
		p := parse(t, sent[0])
		require.Equal(t, packet.RCAtomicWrite, p.Opcode())
		require.Equal(t, packet.RETHFields{VA: rbase + 8, RKey: rkey, DMALen: 8}, p.RETH().Fields())
		require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, rm.buf[8:16])
		require.Equal(t, []verbs.WC{{ID: 3, Opcode: verbs.WCAtomicWrite, ByteLen: 8, QPNum: testQPN}}, h.cq.wcs)
	})
}

func TestPSNWrap(t *testing.T) {
	const pmtu = 1024
	h := newHarness(t, baseConfig(pmtu, 0xFFFFFE))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	f := newResponder(t, pmtu, 0xFFFFFE)
	f.mem.add(rkey, rbase, 1<<16, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 2)
	sgl := func(off, n int) []verbs.SGE {
		return []verbs.SGE{{Addr: baseA + uint64(off), Length: uint32(n), LKey: lkeyA}}
	}
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: sgl(0, 3*pmtu), Flags: verbs.SendSignaled})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, RemoteAddr: rbase + 8192, RKey: rkey, SGList: sgl(8192, 2*pmtu), Flags: verbs.SendSignaled})
	h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRSend, SGList: sgl(0, 10), Flags: verbs.SendSignaled})
	sent := pumpLink(h, f)
	var psns []packet.PSN
	for _, b := range sent {
		psns = append(psns, parse(t, b).PSN())
	}
	require.Equal(t, []packet.PSN{0xFFFFFE, 0xFFFFFF, 0, 1, 3}, psns)
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
	for _, wc := range h.cq.wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
	require.Equal(t, packet.PSN(4), h.r.SQPSN())
}

func TestAckReqEveryAcrossMessages(t *testing.T) {
	// 200 packets of 256 bytes, then a 2-packet message: AckReq on every
	// 16th packet (an eighth of the 128-PSN window, ackPerWindow) and the
	// last of the first, and on the last of the second.
	cfg := baseConfig(256, 0)
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	f := newResponder(t, 256, 0)
	f.mem.add(rkey, rbase, 1<<16, verbs.AccessRemoteWrite, 0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 200 * 256, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 300, LKey: lkeyA}}})
	sent := pumpLink(h, f)
	var acked []int
	for i, b := range sent {
		if parse(t, b).AckReq() {
			acked = append(acked, i)
		}
	}
	require.Equal(t, []int{15, 31, 47, 63, 79, 95, 111, 127, 143, 159, 175, 191, 199, 201}, acked)
}

func TestWindowStall(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 10))
	h.mem.add(lkeyA, baseA, 1<<20, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 1 << 20, LKey: lkeyA}}})
	sent := h.drain()
	require.Len(t, sent, DefaultWindow)
	require.False(t, h.r.Pending())
	h.recv(ack(packet.PSN(10).Add(63)))
	sent = h.drain()
	require.Len(t, sent, 64)
	require.Equal(t, packet.PSN(10).Add(128), parse(t, sent[0]).PSN())

	// A smaller window; AckReqEvery follows it down.
	cfg := baseConfig(1024, 10)
	cfg.Window = 16
	h = newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<20, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 1 << 20, LKey: lkeyA}}})
	sent = h.drain()
	require.Len(t, sent, 16)
	require.True(t, parse(t, sent[15]).AckReq())
}

func TestMaxRdAtomicStall(t *testing.T) {
	cfg := baseConfig(1024, 100)
	cfg.MaxRdAtomic = 2
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i)*64, Length: 16, LKey: lkeyA}}})
	}
	h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 16, LKey: lkeyA}}})
	sent := h.drain()
	require.Len(t, sent, 2)
	require.Equal(t, 2, h.r.rdInUse)
	h.recv(resp(packet.RCRDMAReadResponseOnly, 100, packet.SyndromeACKUnlimited, 1, make([]byte, 16)))
	require.Equal(t, []uint64{1}, h.cq.ids())
	sent = h.drain()
	require.Len(t, sent, 2)
	require.Equal(t, packet.RCRDMAReadRequest, parse(t, sent[0]).Opcode())
	require.Equal(t, packet.PSN(102), parse(t, sent[0]).PSN())
	require.Equal(t, packet.RCSendOnly, parse(t, sent[1]).Opcode())
}

func TestFence(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	sge := []verbs.SGE{{Addr: baseA, Length: 16, LKey: lkeyA}}
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: sge})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendFence, SGList: sge}) // no earlier READ: goes
	h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: sge})
	h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendFence, SGList: sge})
	require.Len(t, h.drain(), 3)
	h.recv(ack(1))
	require.False(t, h.r.Pending(), "fenced behind the READ")
	h.recv(resp(packet.RCRDMAReadResponseOnly, 2, packet.SyndromeACKUnlimited, 3, make([]byte, 16)))
	sent := h.drain()
	require.Len(t, sent, 1)
	require.Equal(t, packet.PSN(3), parse(t, sent[0]).PSN())
}

func TestCoalescedAckAndUnsignaled(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		t.Run(fmt.Sprint("sigall=", sigAll), func(t *testing.T) {
			cfg := baseConfig(1024, 50)
			cfg.SigAll = sigAll
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			var want []uint64
			for i := range 10 {
				wr := &verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 2000, LKey: lkeyA}}}
				if i%3 == 0 {
					wr.Flags = verbs.SendSignaled
				}
				if sigAll || i%3 == 0 {
					want = append(want, uint64(i))
				}
				h.post(wr)
			}
			sent := h.drain()
			require.Len(t, sent, 20)
			// An ACK inside the 4th message completes three.
			h.recv(ack(50 + 6))
			require.Equal(t, 7, h.r.Outstanding())
			h.recv(ack(50 + 19))
			require.Equal(t, want, h.cq.ids())
			require.Zero(t, h.r.Outstanding())
			require.True(t, h.r.Deadline().IsZero())
			require.Equal(t, CompDone, h.r.State())
		})
	}
}

func TestReadPlacementAcrossSGEs(t *testing.T) {
	const pmtu = 1024
	h := newHarness(t, baseConfig(pmtu, 0x800))
	ma := h.mem.add(lkeyA, baseA, 4096, verbs.AccessLocalWrite, 1)
	mb := h.mem.add(lkeyB, baseB, 64, verbs.AccessLocalWrite, 2)
	origA, origB := append([]byte(nil), ma.buf...), append([]byte(nil), mb.buf...)
	sges := []verbs.SGE{{Addr: baseA + 5, Length: 1000, LKey: lkeyA}, {Addr: baseB + 3, Length: 7, LKey: lkeyB}, {Addr: baseA + 2000, Length: 1993, LKey: lkeyA}}
	h.post(&verbs.SendWR{ID: 9, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, SGList: sges})
	sent := h.drain()
	require.Len(t, sent, 1)
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i*13 + 1)
	}
	for _, b := range readResp(pmtu, 0x800, data, 0, false) {
		h.recv(b)
	}
	require.Equal(t, data, gatherSGEs(t, h.mem, sges))
	copy(origA[5:], data[:1000])
	copy(origB[3:], data[1000:1007])
	copy(origA[2000:], data[1007:])
	require.Equal(t, origA, ma.buf, "nothing written outside the SGEs")
	require.Equal(t, origB, mb.buf)
	require.Equal(t, []verbs.WC{{ID: 9, Opcode: verbs.WCRDMARead, ByteLen: 3000, QPNum: testQPN}}, h.cq.wcs)
	require.Equal(t, uint64(3000), h.r.Counters().ReadBytes)
}

func TestReadOutOfOrderDropped(t *testing.T) {
	const pmtu = 256
	h := newHarness(t, baseConfig(pmtu, 0))
	h.mem.add(lkeyA, baseA, 4096, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 3 * pmtu, LKey: lkeyA}}})
	h.drain()
	rs := readResp(pmtu, 0, bytes.Repeat([]byte{0xAB}, 3*pmtu), 0, false)
	h.recv(rs[1]) // MIDDLE before FIRST
	h.recv(rs[2])
	require.Equal(t, uint64(2), h.r.Counters().ResponsesDropped)
	require.Empty(t, h.cq.wcs)
	for _, b := range rs {
		h.recv(b)
	}
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
}

func TestSequenceNAKGoBackN(t *testing.T) {
	const pmtu, p0 = 1024, 0x300
	h := newHarness(t, baseConfig(pmtu, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.mem.add(lkeyB, baseB, 1<<16, verbs.AccessLocalWrite, 2)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: splitSGEs(5 * pmtu)})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 1000, LKey: lkeyA}}})
	first := h.drain()
	require.Len(t, first, 6)
	h.recv(nak(p0+2, packet.NAKPSNSeqError))
	require.Equal(t, []CompState{CompGetAck, CompGetWQE, CompCheckPSN, CompCheckAck, CompErrorRetry, CompDone}, h.r.Trace(nil))
	again := undouble(t, h.drain())
	require.Len(t, again, 4)
	for i, b := range again {
		p, q := parse(t, b), parse(t, first[2+i])
		require.Equal(t, q.Opcode(), p.Opcode())
		require.Equal(t, q.PSN(), p.PSN())
		require.Equal(t, q.Payload(), p.Payload())
		require.Equal(t, q.Header(packet.HdrRETH), p.Header(packet.HdrRETH))
	}
	require.Equal(t, packet.RCSendMiddle, parse(t, again[0]).Opcode())
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.RcvdSeqErr)
	require.Equal(t, uint64(1), c.CompleterRetryErr)
	require.Equal(t, uint64(5), c.Retransmits, "the retry's four packets and the second copy of its first")
	require.Equal(t, uint64(1), c.RetryDoubled)
	// A second NAK for the same gap does not start another retry.
	h.recv(nak(p0+2, packet.NAKPSNSeqError))
	require.False(t, h.r.Pending())
	h.recv(ack(p0 + 5))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
}

func TestRNRNak(t *testing.T) {
	const p0 = 0x10
	h := newHarness(t, baseConfig(1024, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	}
	require.Len(t, h.drain(), 3)
	// RNR NAK on the second SEND: the first is implicitly acknowledged.
	h.recv(rnr(p0+1, 12))
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, uint64(1), h.r.Counters().RcvdRNRErr)
	require.Equal(t, h.now.Add(640*time.Microsecond), h.r.Deadline())
	require.False(t, h.r.Pending())
	require.Nil(t, h.next())
	h.now = h.now.Add(639 * time.Microsecond)
	h.r.OnTimeout(h.now) // early: still waiting
	require.False(t, h.r.Pending())
	h.now = h.now.Add(time.Microsecond)
	h.r.OnTimeout(h.now)
	again := h.drain()
	require.Len(t, again, 2)
	require.Equal(t, packet.PSN(p0+1), parse(t, again[0]).PSN())
	require.Equal(t, packet.RCSendOnly, parse(t, again[0]).Opcode())
	h.recv(ack(p0 + 2))
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
}

func TestRNRRetryExhausted(t *testing.T) {
	const p0 = 0x10
	cfg := baseConfig(1024, p0)
	cfg.RNRRetry = 2
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	}
	for range 2 {
		require.Len(t, h.drain(), 3)
		h.recv(rnr(p0, 1))
		_, failed := h.r.Failed()
		require.False(t, failed)
		h.now = h.r.Deadline()
		h.r.OnTimeout(h.now)
	}
	require.Len(t, h.drain(), 3)
	h.recv(rnr(p0, 1))
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRNRRetryExcErr, st)
	require.Equal(t, CompError, h.r.State())
	require.Equal(t, uint64(1), h.r.Counters().RNRRetryExceededErr)
	require.Equal(t, []verbs.WC{{ID: 1, Status: verbs.WCRNRRetryExcErr, Opcode: verbs.WCSend, ByteLen: 100, QPNum: testQPN, VendorErr: 0x21}}, h.cq.wcs)
	require.False(t, h.r.Pending())
	require.True(t, h.r.Deadline().IsZero())
	h.r.Flush()
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[1].Status)
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[2].Status)
	require.Zero(t, h.r.Outstanding())
}

func TestTimeoutRetransmit(t *testing.T) {
	const pmtu, p0 = 1024, 0xFFFFFF
	cfg := baseConfig(pmtu, p0)
	cfg.Timeout = 10
	cfg.Recovery.Off = true // this test is about the IB timer alone
	T := retry.AckTimeout(10)
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, Imm: 5,
		SGList: []verbs.SGE{{Addr: baseA, Length: 3 * pmtu, LKey: lkeyA}}})
	first := h.drain()
	require.Len(t, first, 3)
	require.Equal(t, t0.Add(T), h.r.Deadline())

	// Progress pushes the timer down the road.
	h.now = t0.Add(time.Millisecond)
	h.recv(ack(p0))
	require.Equal(t, h.now.Add(T), h.r.Deadline())
	h.r.OnTimeout(t0.Add(T)) // a stale firing
	require.Zero(t, h.r.Counters().Timeouts)
	require.False(t, h.r.Pending())

	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	require.Equal(t, uint64(1), h.r.Counters().Timeouts)
	require.True(t, h.r.Deadline().IsZero(), "stopped until the resend")
	again := h.drain()
	require.Len(t, again, 2)
	for i, b := range again {
		p, q := parse(t, b), parse(t, first[1+i])
		require.Equal(t, q.Opcode(), p.Opcode())
		require.Equal(t, q.PSN(), p.PSN())
		require.Equal(t, q.Payload(), p.Payload())
	}
	require.Equal(t, h.now.Add(T), h.r.Deadline())
	require.Equal(t, uint64(2), h.r.Counters().Retransmits)
	h.recv(ack(packet.PSN(p0).Add(2)))
	require.Len(t, h.cq.wcs, 1)
	require.True(t, h.r.Deadline().IsZero())
}

func TestTimeoutZeroDisablesTimer(t *testing.T) {
	cfg := baseConfig(1024, 0)
	cfg.Timeout = 0
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	require.True(t, h.r.Deadline().IsZero())
}

func TestRetryExhausted(t *testing.T) {
	for _, retries := range []uint8{0, 1, 3} {
		t.Run(fmt.Sprint("retry_cnt=", retries), func(t *testing.T) {
			cfg := baseConfig(1024, 0)
			cfg.RetryCnt = retries
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			for i := range 3 {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
			}
			for range retries {
				require.Len(t, h.drain(), 3)
				h.now = h.r.Deadline()
				h.r.OnTimeout(h.now)
				_, failed := h.r.Failed()
				require.False(t, failed)
			}
			require.Len(t, h.drain(), 3)
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			st, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCRetryExcErr, st)
			c := h.r.Counters()
			require.Equal(t, uint64(retries)+1, c.Timeouts)
			require.Equal(t, uint64(retries), c.CompleterRetryErr)
			require.Equal(t, uint64(1), c.RetryExceededErr)
			h.r.Flush()
			require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
			require.Equal(t, []verbs.WCStatus{verbs.WCRetryExcErr, verbs.WCWRFlushErr, verbs.WCWRFlushErr},
				[]verbs.WCStatus{h.cq.wcs[0].Status, h.cq.wcs[1].Status, h.cq.wcs[2].Status})
			// Posting after the flush waits for the next Flush.
			h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRSend})
			require.False(t, h.r.Pending())
			h.r.Flush()
			require.Equal(t, uint64(4), h.cq.wcs[3].ID)
			require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[3].Status)
		})
	}
}

func TestImpliedNAK(t *testing.T) {
	const pmtu = 1024
	h := newHarness(t, baseConfig(pmtu, 20))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 2 * pmtu, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
	first := h.drain()
	require.Len(t, first, 2)
	require.Equal(t, packet.PSN(22), parse(t, first[1]).PSN())
	h.recv(ack(22)) // the READ responses were lost
	require.Equal(t, []CompState{CompGetAck, CompGetWQE, CompCheckPSN, CompErrorRetry, CompDone}, h.r.Trace(nil))
	again := h.drain()
	require.Len(t, again, 2)
	require.Equal(t, first[0][:packet.BTHSize+packet.RETHSize], again[0][:packet.BTHSize+packet.RETHSize])
	require.Equal(t, uint64(1), h.r.Counters().CompleterRetryErr)
	for _, b := range readResp(pmtu, 20, make([]byte, 2*pmtu), 0, false) {
		h.recv(b)
	}
	h.recv(ack(22))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
}

func TestRemoteErrorNAKs(t *testing.T) {
	for _, tc := range []struct {
		code packet.NAKCode
		want verbs.WCStatus
	}{
		{packet.NAKInvalidRequest, verbs.WCRemInvReqErr},
		{packet.NAKRemoteAccess, verbs.WCRemAccessErr},
		{packet.NAKRemoteOperation, verbs.WCRemOpErr},
		{packet.NAKInvalidRDRequest, verbs.WCRemOpErr},
		{17, verbs.WCRemOpErr},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			h := newHarness(t, baseConfig(1024, 0))
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			sge := []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: sge})
			h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: sge}) // unsignaled
			h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRSend, SGList: sge})
			require.Len(t, h.drain(), 3)
			h.recv(nak(1, tc.code))
			st, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, tc.want, st)
			require.Equal(t, []verbs.WC{
				{ID: 1, Opcode: verbs.WCSend, ByteLen: 10, QPNum: testQPN},
				{ID: 2, Status: tc.want, Opcode: verbs.WCRDMAWrite, ByteLen: 10, QPNum: testQPN, VendorErr: uint32(packet.NAKSyndrome(tc.code))},
			}, h.cq.wcs)
			h.recv(ack(2)) // ignored after the failure
			require.Len(t, h.cq.wcs, 2)
			h.r.Flush()
			require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
			require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[2].Status)
		})
	}
}

func TestReadRestart(t *testing.T) {
	const pmtu, p0 = 1024, 0x40
	for _, tc := range []struct {
		name   string
		pkts   int
		rdmavt bool
	}{
		{"rxe-middle-last", 4, false},
		{"rdmavt-first-last", 4, true},
		{"rxe-last", 3, false},
		{"rdmavt-only", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.mem.add(lkeyB, baseB, 1<<16, verbs.AccessLocalWrite, 2)
			size := tc.pkts * pmtu
			sges := splitSGEs(size)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, SGList: sges})
			require.Len(t, h.drain(), 1)
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i*31 + 7)
			}
			rs := readResp(pmtu, p0, data, 0, false)
			h.recv(rs[0])
			h.recv(rs[1])
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			again := h.drain()
			require.Len(t, again, 1)
			p := parse(t, again[0])
			require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
			require.Equal(t, packet.PSN(p0+2), p.PSN())
			require.Equal(t, packet.RETHFields{VA: rbase + 2*pmtu, RKey: rkey, DMALen: uint32(size - 2*pmtu)}, p.RETH().Fields())
			for _, b := range readResp(pmtu, p0, data, 2, tc.rdmavt) {
				h.recv(b)
			}
			require.Equal(t, []verbs.WC{{ID: 1, Opcode: verbs.WCRDMARead, ByteLen: uint32(size), QPNum: testQPN}}, h.cq.wcs)
			require.Equal(t, data, gatherSGEs(t, h.mem, sges))
			require.Equal(t, packet.PSN(p0).Add(tc.pkts), h.r.SQPSN())
		})
	}
}

func TestLocalProtectionError(t *testing.T) {
	t.Run("head", func(t *testing.T) {
		h := newHarness(t, baseConfig(1024, 0))
		h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
		h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: 0x999}}})
		h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
		require.True(t, h.r.Pending())
		require.Nil(t, h.next())
		st, failed := h.r.Failed()
		require.True(t, failed)
		require.Equal(t, verbs.WCLocProtErr, st)
		require.Equal(t, []verbs.WC{{ID: 1, Status: verbs.WCLocProtErr, Opcode: verbs.WCSend, ByteLen: 10, QPNum: testQPN}}, h.cq.wcs)
		require.False(t, h.r.Pending())
		h.r.Flush()
		require.Equal(t, []uint64{1, 2}, h.cq.ids())
		require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[1].Status)
	})
	t.Run("second-sge-of-later-wqe", func(t *testing.T) {
		h := newHarness(t, baseConfig(256, 0))
		h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
		h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
		// The second SGE runs past the end of the region.
		h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA, Length: 300, LKey: lkeyA}, {Addr: baseA + 1<<16 - 8, Length: 100, LKey: lkeyA}}})
		h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRSend})
		require.NotNil(t, h.next()) // SEND
		require.NotNil(t, h.next()) // WRITE_FIRST
		require.True(t, h.r.Pending())
		require.Nil(t, h.next()) // WRITE_LAST fails
		require.False(t, h.r.Pending())
		st, failed := h.r.Failed()
		require.True(t, failed)
		require.Equal(t, verbs.WCLocProtErr, st)
		require.Empty(t, h.cq.wcs)
		require.Equal(t, uint64(1), h.r.Counters().LocalErrors)
		h.r.Flush()
		require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
		require.Equal(t, []verbs.WCStatus{verbs.WCWRFlushErr, verbs.WCLocProtErr, verbs.WCWRFlushErr},
			[]verbs.WCStatus{h.cq.wcs[0].Status, h.cq.wcs[1].Status, h.cq.wcs[2].Status})
	})
	t.Run("read-destination", func(t *testing.T) {
		h := newHarness(t, baseConfig(1024, 0))
		h.mem.add(lkeyA, baseA, 1<<16, 0, 1) // no local write access
		h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
		require.Len(t, h.drain(), 1)
		h.recv(resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 1, make([]byte, 10)))
		require.Equal(t, []verbs.WC{{ID: 1, Status: verbs.WCLocProtErr, Opcode: verbs.WCRDMARead, ByteLen: 10, QPNum: testQPN}}, h.cq.wcs)
	})
}

func TestBadResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   verbs.WROpcode
		resp []byte
		want verbs.WCStatus
	}{
		{"read-response-for-send", verbs.WRSend, resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 0, make([]byte, 10)), verbs.WCFatalErr},
		{"atomic-ack-for-send", verbs.WRSend, respOrig(packet.RCAtomicAcknowledge, 0, packet.SyndromeACKUnlimited, 0, nil, 1), verbs.WCBadRespErr},
		{"short-read-response", verbs.WRRDMARead, resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 0, make([]byte, 9)), verbs.WCBadRespErr},
		{"long-read-response", verbs.WRRDMARead, resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 0, make([]byte, 11)), verbs.WCBadRespErr},
		{"read-response-nak-syndrome", verbs.WRRDMARead, resp(packet.RCRDMAReadResponseOnly, 0, packet.RNRSyndrome(1), 0, make([]byte, 10)), verbs.WCBadRespErr},
		{"middle-without-first", verbs.WRRDMARead, resp(packet.RCRDMAReadResponseMiddle, 0, 0, 0, make([]byte, 1024)), verbs.WCBadRespErr},
		{"reserved-syndrome", verbs.WRSend, resp(packet.RCAcknowledge, 0, 0x40, 0, nil), verbs.WCBadRespErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(1024, 0))
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: tc.op, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
			require.Len(t, h.drain(), 1)
			h.recv(tc.resp)
			h.requireFailedWith(tc.want)
		})
	}
}

func TestIgnoredResponses(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 100))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
	h.recv(ack(100)) // nothing sent yet
	require.Len(t, h.drain(), 1)
	h.recv(ack(99))  // stale
	h.recv(ack(100)) // an ACK cannot answer a READ
	// A request opcode, and a CNP, are not responses.
	h.r.Receive(h.now, packet.Packet{})
	cnp := make([]byte, packet.PacketLen(packet.CNP, 0))
	_, err := packet.Build(cnp, &packet.Headers{BTH: packet.BTHFields{Opcode: packet.CNP, DestQP: testQPN}}, nil, &respPseudo)
	require.NoError(t, err)
	h.recv(cnp)
	require.Equal(t, uint64(5), h.r.Counters().ResponsesDropped)
	_, failed := h.r.Failed()
	require.False(t, failed)
	require.Empty(t, h.cq.wcs)
}

func TestPostValidation(t *testing.T) {
	cfg := baseConfig(1024, 0)
	cfg.MaxWR, cfg.MaxSGE, cfg.MaxInline = 2, 2, 16
	sge := verbs.SGE{Addr: baseA, Length: 8, LKey: lkeyA}
	for _, tc := range []struct {
		name string
		wr   verbs.SendWR
		err  error
	}{
		{"local-inv", verbs.SendWR{Opcode: verbs.WRLocalInv}, ErrUnsupportedOpcode},
		{"bind-mw", verbs.SendWR{Opcode: verbs.WRBindMW}, ErrUnsupportedOpcode},
		{"flush", verbs.SendWR{Opcode: verbs.WRFlush}, ErrUnsupportedOpcode},
		{"unknown", verbs.SendWR{Opcode: 99}, ErrUnsupportedOpcode},
		{"sges", verbs.SendWR{Opcode: verbs.WRSend, SGList: []verbs.SGE{sge, sge, sge}}, ErrTooManySGE},
		{"inline-long", verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: make([]byte, 17)}, ErrInlineTooLong},
		{"inline-read", verbs.SendWR{Opcode: verbs.WRRDMARead, Flags: verbs.SendInline, InlineData: make([]byte, 8)}, ErrInlineNotAllowed},
		{"atomic-length", verbs.SendWR{Opcode: verbs.WRAtomicFetchAndAdd, SGList: []verbs.SGE{{Length: 4}}}, ErrAtomicLength},
		{"atomic-align", verbs.SendWR{Opcode: verbs.WRAtomicCmpAndSwp, RemoteAddr: 4, SGList: []verbs.SGE{sge}}, ErrAtomicAlign},
		{"atomic-write-length", verbs.SendWR{Opcode: verbs.WRAtomicWrite, SGList: []verbs.SGE{{Length: 9}}}, ErrAtomicLength},
		// rxe's post checks no ATOMIC_WRITE alignment: the responder NAKs a misaligned one.
		{"atomic-write-unaligned", verbs.SendWR{Opcode: verbs.WRAtomicWrite, RemoteAddr: 4, SGList: []verbs.SGE{sge}}, nil},
		{"too-long", verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{{Length: 1 << 31}, {Length: 1}}}, ErrMessageTooLong},
		{"2GiB", verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{{Length: 1 << 31}}}, nil},
		{"inline-ok", verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: make([]byte, 16)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(cfg, fakeMem{}, &fakeCQ{})
			require.ErrorIs(t, r.Post(&tc.wr), tc.err)
		})
	}
	t.Run("full", func(t *testing.T) {
		r := New(cfg, fakeMem{}, &fakeCQ{})
		require.NoError(t, r.Post(&verbs.SendWR{Opcode: verbs.WRSend}))
		require.NoError(t, r.Post(&verbs.SendWR{Opcode: verbs.WRSend}))
		require.ErrorIs(t, r.Post(&verbs.SendWR{Opcode: verbs.WRSend}), ErrQueueFull)
		require.Equal(t, 2, r.Outstanding())
	})
	t.Run("no-rd-atomic", func(t *testing.T) {
		c := *cfg
		c.MaxRdAtomic = 0
		r := New(&c, fakeMem{}, &fakeCQ{})
		require.ErrorIs(t, r.Post(&verbs.SendWR{Opcode: verbs.WRRDMARead}), ErrNoRdAtomic)
	})
	t.Run("bad-pmtu", func(t *testing.T) {
		c := *cfg
		c.PMTU = 1500
		require.Panics(t, func() { New(&c, fakeMem{}, &fakeCQ{}) })
	})
}

func TestInlineCopiedAtPost(t *testing.T) {
	h := newHarness(t, baseConfig(256, 0))
	data := []byte("hello, inline world")
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendInline | verbs.SendSignaled, InlineData: data})
	copy(data, "XXXXX")
	sent := h.drain()
	require.Len(t, sent, 1)
	require.Equal(t, []byte("hello, inline world"), parse(t, sent[0]).Payload())
}

func TestDraining(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	sge := []verbs.SGE{{Addr: baseA, Length: 2000, LKey: lkeyA}}
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: sge})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, SGList: sge})
	require.NotNil(t, h.next()) // SEND_FIRST of WQE 1
	h.r.SetDraining(true)
	require.False(t, h.r.Drained())
	require.NotNil(t, h.next(), "a started WQE finishes")
	require.False(t, h.r.Pending(), "no new WQE starts")
	h.recv(ack(1))
	require.True(t, h.r.Drained())
	h.r.SetDraining(false)
	require.False(t, h.r.Drained())
	require.Len(t, h.drain(), 2)
}

func TestCredits(t *testing.T) {
	cfg := baseConfig(1024, 0)
	cfg.Credits = true
	cfg.Recovery.Off = true // the deadlines below are the credit and IB timers only
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	sge := []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}
	wait := retry.AckTimeout(cfg.Timeout)
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, SGList: sge})
	}
	require.Len(t, h.drain(), 1, "before any credit: one message, the probe")
	require.Equal(t, uint64(1), h.r.Counters().CreditProbes)

	// MSN 1, no credits: LSN 1. SSN 2 would be the probe: it waits.
	h.recv(resp(packet.RCAcknowledge, 0, packet.ACKSyndrome(0), 1, nil))
	require.Empty(t, h.drain(), "no credit: the probe waits for an update")
	require.Equal(t, h.now.Add(wait), h.r.Deadline(), "the probe wait is armed")
	require.Equal(t, uint64(1), h.r.Counters().CreditStalls)

	// An unsolicited update (a repeat of the last ACK, MSN 1, 2 credits:
	// LSN 3) lets SSN 2 and 3 go, and stops the probe wait.
	h.now = h.now.Add(wait / 2)
	h.recv(resp(packet.RCAcknowledge, 0, packet.ACKSyndrome(2), 1, nil))
	require.Len(t, h.drain(), 2)
	require.Equal(t, h.now.Add(retry.AckTimeout(cfg.Timeout)), h.r.Deadline(), "only the retransmit timer")
	require.Equal(t, uint64(2), h.r.Counters().CreditUpdates)

	// SSN 4 is beyond the limit: it and the WRITE behind it wait; after
	// the probe wait with no update, SSN 4 goes as the probe.
	h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRSend, SGList: sge})
	h.post(&verbs.SendWR{ID: 5, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: sge})
	h.recv(resp(packet.RCAcknowledge, 2, packet.ACKSyndrome(0), 3, nil)) // LSN 3
	require.Empty(t, h.drain())
	dl := h.r.Deadline()
	require.Equal(t, h.now.Add(wait), dl)
	h.now = dl.Add(-time.Nanosecond)
	h.r.OnTimeout(h.now)
	require.Empty(t, h.drain(), "early firing")
	h.now = dl
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 2, "the probe (SSN 4), then the WRITE, which needs no credit")
	require.Equal(t, uint64(2), h.r.Counters().CreditProbes)

	// SSN 6 is two beyond the limit: it waits for the probe's response,
	// with no probe wait of its own.
	h.post(&verbs.SendWR{ID: 6, Opcode: verbs.WRSend, SGList: sge})
	require.Empty(t, h.drain())
	require.Equal(t, h.now.Add(wait), h.r.Deadline(), "only the retransmit timer")
	h.recv(resp(packet.RCAcknowledge, 4, packet.SyndromeACKUnlimited, 5, nil))
	require.Len(t, h.drain(), 1, "unlimited from now on")
	require.Zero(t, h.r.Counters().RcvdRNRErr)
	h.recv(resp(packet.RCAcknowledge, 5, packet.SyndromeACKUnlimited, 6, nil))
	require.Zero(t, h.r.Outstanding())
	require.True(t, h.r.Deadline().IsZero(), "no timer left")
	require.Equal(t, uint64(2), h.r.Counters().CreditStalls)
}

// TestCreditsStallFlagIsFresh: a requester that was waiting to probe, and
// then gets credits while something else (here SQD draining) holds its next
// WQE back, arms no new probe wait.
func TestCreditsStallFlagIsFresh(t *testing.T) {
	cfg := baseConfig(1024, 0)
	cfg.Credits = true
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.recv(resp(packet.RCAcknowledge, packet.PSNMask, packet.ACKSyndrome(1), 0, nil)) // LSN 1
	for i := range 2 {
		h.post(&verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
	}
	require.Len(t, h.drain(), 1)
	h.recv(resp(packet.RCAcknowledge, 0, packet.ACKSyndrome(0), 1, nil)) // SSN 1 done, LSN 1
	require.False(t, h.r.Pending(), "SSN 2 waits to probe")
	require.Equal(t, uint64(1), h.r.Counters().CreditStalls)
	h.r.SetDraining(true)
	h.recv(resp(packet.RCAcknowledge, 0, packet.ACKSyndrome(1), 1, nil)) // LSN 2
	require.True(t, h.r.Deadline().IsZero(), "draining, not waiting for credits")
	require.Equal(t, uint64(1), h.r.Counters().CreditStalls)
	h.r.SetDraining(false)
	require.Len(t, h.drain(), 1)
}

// TestCreditsLimit runs messages against the limits of table tests: the
// SSNs that may start for a given newest AETH.
func TestCreditsLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		syn     packet.Syndrome
		msn     uint32
		posted  int
		want    int
		stalled bool
	}{
		{"zero credits", packet.ACKSyndrome(0), 0, 4, 0, true},
		{"one credit", packet.ACKSyndrome(1), 0, 4, 1, true},
		{"code 5 is 6 credits", packet.ACKSyndrome(5), 0, 10, 6, true},
		{"MSN counts", packet.ACKSyndrome(2), 3, 10, 2, true},
		{"enough", packet.ACKSyndrome(8), 0, 10, 10, false},
		{"unlimited", packet.SyndromeACKUnlimited, 0, 40, 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(1024, 0)
			cfg.Credits = true
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			// An AETH before any message (an unsolicited ACK) sets the limit.
			h.recv(resp(packet.RCAcknowledge, packet.PSNMask, tc.syn, tc.msn, nil))
			// The first tc.msn WQEs are WRITEs (they use SSNs, not credits).
			for i := range int(tc.msn) + tc.posted {
				wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}}
				if i < int(tc.msn) {
					wr.Opcode, wr.RemoteAddr, wr.RKey = verbs.WRRDMAWrite, rbase, rkey
				}
				h.post(&wr)
			}
			require.Len(t, h.drain(), int(tc.msn)+tc.want)
			require.Equal(t, tc.stalled, h.r.Counters().CreditStalls == 1, "waiting to probe")
			require.Zero(t, h.r.Counters().CreditProbes)
		})
	}
}

func TestCQOverflow(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.cq.full = true
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	require.Len(t, h.drain(), 1)
	h.recv(ack(0))
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCFatalErr, st)
	require.Equal(t, uint64(1), h.r.Counters().CQOverflow)
}

func TestCompStateString(t *testing.T) {
	require.Equal(t, "CHECK_PSN", CompCheckPSN.String())
	require.Equal(t, "DONE", CompDone.String())
	require.Equal(t, "COMPST_99", CompState(99).String())
}

// countCQ counts completions without allocating.
type countCQ struct{ n int }

func (c *countCQ) Complete(*verbs.WC) bool { c.n++; return true }

func TestNoAllocations(t *testing.T) {
	const pmtu = 1024
	cfg := baseConfig(pmtu, 0xFFFFF0)
	mem := fakeMem{}
	mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	cq := &countCQ{}
	r := New(cfg, mem, cq)
	buf := make([]byte, pmtu+maxHeaders)
	write := &verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 1500, LKey: lkeyA}, {Addr: baseA + 4000, Length: 1500, LKey: lkeyA}}}
	read := &verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 8000, Length: 2000, LKey: lkeyA}}}
	cas := &verbs.SendWR{ID: 3, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 16000, Length: 8, LKey: lkeyA}}}
	ackB := ack(0)
	rr := readResp(pmtu, 0, make([]byte, 2000), 0, false)
	atk := respOrig(packet.RCAtomicAcknowledge, 0, packet.SyndromeACKUnlimited, 0, nil, 42)
	now := t0
	cycle := func() {
		if r.Post(write) != nil || r.Post(read) != nil || r.Post(cas) != nil {
			panic("post")
		}
		psn := r.SQPSN()
		for r.NextPacket(now, buf) > 0 {
		}
		packet.BTH(ackB).SetPSN(psn.Add(2))
		p, _ := packet.Parse(ackB)
		r.Receive(now, p)
		for i, b := range rr {
			packet.BTH(b).SetPSN(psn.Add(3 + i))
			p, _ = packet.Parse(b)
			r.Receive(now, p)
		}
		packet.BTH(atk).SetPSN(psn.Add(5))
		p, _ = packet.Parse(atk)
		r.Receive(now, p)
		now = now.Add(time.Microsecond)
		r.OnTimeout(now)
		_ = r.Deadline()
	}
	cycle()
	require.Equal(t, 3, cq.n)
	require.Zero(t, testing.AllocsPerRun(200, cycle))
	require.Zero(t, r.Outstanding())
	_, failed := r.Failed()
	require.False(t, failed)
}

func TestLateAckDuringRetry(t *testing.T) {
	const p0 = 0x500
	h := newHarness(t, baseConfig(256, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 600, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
	require.Len(t, h.drain(), 4)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	require.Equal(t, packet.RCSendFirst, parse(t, h.next()).Opcode()) // the retry has begun
	// The ACK of the first round arrives late: WQE 1 completes and the
	// retry skips to WQE 2 instead of re-sending the rest of WQE 1.
	h.recv(ack(p0 + 2))
	require.Equal(t, []uint64{1}, h.cq.ids())
	sent := h.drain()
	require.Len(t, sent, 1)
	require.Equal(t, packet.RCSendOnly, parse(t, sent[0]).Opcode())
	require.Equal(t, packet.PSN(p0+3), parse(t, sent[0]).PSN())
	h.recv(ack(p0 + 3))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
}

func TestAdvancingSequenceNAKRefillsRetries(t *testing.T) {
	const p0 = 0
	cfg := baseConfig(256, p0)
	cfg.RetryCnt = 1
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 8 * 256, LKey: lkeyA}}})
	require.Len(t, h.drain(), 8)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now) // retry_cnt spent
	require.Len(t, h.drain(), 8)
	// The peer got PSNs 0..2: the NAK moves the oldest unacknowledged PSN,
	// which is progress, so the retry it asks for is allowed.
	h.recv(nak(3, packet.NAKPSNSeqError))
	_, failed := h.r.Failed()
	require.False(t, failed)
	again := undouble(t, h.drain())
	require.Len(t, again, 5)
	require.Equal(t, packet.PSN(3), parse(t, again[0]).PSN())
	require.Equal(t, packet.RCRDMAWriteMiddle, parse(t, again[0]).Opcode())
	// That retry spent the refilled budget; a NAK that does not move the
	// PSN is part of the same episode and ignored; the next timeout fails.
	h.now = h.now.Add(time.Millisecond)
	h.recv(nak(3, packet.NAKPSNSeqError))
	require.False(t, h.r.Pending())
	_, failed = h.r.Failed()
	require.False(t, failed)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRetryExcErr, st)
}

// TestRetryWaitsBehindQueuedReadTrains: one READ response is lost while
// two more READs are outstanding. The implied NAK starts a retry, but the
// responder answers the re-sent request only after the trains it has
// already queued (IBA 9.7.5.1.3 executes in order; rxe and our responder
// append the replay). Those trains take several ACK timeouts to arrive and
// make no progress here. rxe_completer re-arms the retransmit timer at
// COMPST_EXIT after every response it drains while PSNs are outstanding,
// so responses that keep arriving hold the timer off and the retry waits;
// the READs must complete without a timeout and without RETRY_EXC_ERR.
func TestRetryWaitsBehindQueuedReadTrains(t *testing.T) {
	const pmtu, p0, pkts = 256, 0x100, 32
	cfg := baseConfig(pmtu, p0)
	cfg.RetryCnt = 2
	T := retry.AckTimeout(cfg.Timeout)
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	data := make([][]byte, 3)
	for i := range data {
		data[i] = make([]byte, pkts*pmtu)
		for j := range data[i] {
			data[i][j] = byte(i*7 + j*13)
		}
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*pkts*pmtu), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*pkts*pmtu), Length: pkts * pmtu, LKey: lkeyA}}})
	}
	require.Len(t, h.drain(), 3)
	psn := func(i int) packet.PSN { return packet.PSN(p0).Add(i * pkts) }

	// step delivers b a quarter of an ACK timeout after the previous
	// response, firing the timer first if it is due, as the device does.
	step := func(b []byte) {
		h.now = h.now.Add(T / 4)
		if d := h.r.Deadline(); !d.IsZero() && !h.now.Before(d) {
			h.r.OnTimeout(h.now)
		}
		h.drain() // re-sent requests: the responder queues them behind its trains
		h.recv(b)
	}
	r0 := readResp(pmtu, psn(0), data[0], 0, false)
	step(r0[0]) // r0[1] is lost
	for _, b := range r0[2:] {
		step(b) // out of order: dropped
	}
	for _, b := range readResp(pmtu, psn(1), data[1], 0, false) {
		step(b) // the first is an implied NAK: one retry
	}
	for _, b := range readResp(pmtu, psn(2), data[2], 0, false) {
		step(b)
	}
	_, failed := h.r.Failed()
	require.False(t, failed, "the retry was given up while responses kept arriving")
	require.Zero(t, h.r.Counters().Timeouts)
	require.Equal(t, uint64(1), h.r.Counters().CompleterRetryErr)
	// The replays: READ 1 from the lost packet, then READs 2 and 3.
	for _, b := range readResp(pmtu, psn(0), data[0], 1, false) {
		step(b)
	}
	for i := 1; i < 3; i++ {
		for _, b := range readResp(pmtu, psn(i), data[i], 0, false) {
			step(b)
		}
	}
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
	for i := range data {
		require.Equal(t, verbs.WCSuccess, h.cq.wcs[i].Status)
		require.Equal(t, data[i], gatherSGEs(t, h.mem, []verbs.SGE{{Addr: baseA + uint64(i*pkts*pmtu), Length: pkts * pmtu, LKey: lkeyA}}))
	}
	require.Zero(t, h.r.Counters().Timeouts)
	require.True(t, h.r.Deadline().IsZero())
}

// TestReadGapRetriesAtOnce: a READ response past a missing one (lost, or
// overtaken on a path that reorders) makes the requester ask again from
// the missing PSN at once, without waiting for the ACK timeout; the rest
// of the old train is dropped without more requests; in-order progress on
// the re-read starts a new episode, so a second gap is also recovered at
// once; the READ completes with no timeout.
func TestReadGapRetriesAtOnce(t *testing.T) {
	const pmtu, p0, pkts = 256, 0x200, 12
	cfg := baseConfig(pmtu, p0)
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	data := make([]byte, pkts*pmtu)
	for i := range data {
		data[i] = byte(i * 31)
	}
	h.post(&verbs.SendWR{ID: 9, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: pkts * pmtu, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	train := readResp(pmtu, p0, data, 0, false)
	reRead := func(from int) {
		t.Helper()
		out := h.drain()
		require.Len(t, out, 1, "one READ request from the missing PSN, at once")
		p := parse(t, out[0])
		require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
		require.Equal(t, packet.PSN(p0).Add(from), p.PSN())
		require.Equal(t, rbase+uint64(from*pmtu), p.RETH().VA())
		require.Equal(t, uint32((pkts-from)*pmtu), p.RETH().DMALen())
	}
	h.recv(train[0])
	h.recv(train[1])
	h.recv(train[3]) // 2 is missing
	reRead(2)
	h.recv(train[4])
	h.recv(train[2]) // late: the re-read is under way
	require.Empty(t, h.drain(), "one re-read per gap")

	// The re-read's train (our responder restarts with FIRST) goes in
	// order to 5, then 6 is overtaken by 7: a second episode.
	second := readResp(pmtu, p0, data, 2, true)
	for _, b := range second[:4] { // 2..5
		h.recv(b)
	}
	h.recv(second[5]) // 7: 6 is missing
	reRead(6)
	for _, b := range readResp(pmtu, p0, data, 6, true) {
		h.recv(b)
	}
	require.Equal(t, []uint64{9}, h.cq.ids())
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
	require.Equal(t, data, gatherSGEs(t, h.mem, []verbs.SGE{{Addr: baseA, Length: pkts * pmtu, LKey: lkeyA}}))
	c := h.r.Counters()
	require.Zero(t, c.Timeouts)
	require.Equal(t, uint64(3), c.ReadGaps, "3, then 4 while the re-read was under way, then 7 of the re-read")
	require.Equal(t, uint64(2), c.CompleterRetryErr)
	_, failed := h.r.Failed()
	require.False(t, failed)
}

// TestNAKMidRead covers a fatal NAK that ends a READ whose first responses
// arrived: kernel rxe's responder sends it with the READ request's PSN
// (read_reply fails, acknowledge NAKs pkt->psn), which is before the
// oldest unacknowledged PSN; rxe check_psn then hands an ACKNOWLEDGE that
// arrives inside a read response train to check_ack all the same. An ACK
// (not a NAK) there completes nothing and is ignored.
func TestNAKMidRead(t *testing.T) {
	const pmtu, p0 = 1024, 0x40
	for _, tc := range []struct {
		name   string
		psn    packet.PSN
		syn    packet.Syndrome
		want   verbs.WCStatus
		failed bool
	}{
		{"rem-access-at-request-psn", p0, packet.NAKSyndrome(packet.NAKRemoteAccess), verbs.WCRemAccessErr, true},
		{"rem-op-at-request-psn", p0, packet.NAKSyndrome(packet.NAKRemoteOperation), verbs.WCRemOpErr, true},
		{"inv-req-at-middle-psn", p0 + 1, packet.NAKSyndrome(packet.NAKInvalidRequest), verbs.WCRemInvReqErr, true},
		{"rem-access-at-next-psn", p0 + 2, packet.NAKSyndrome(packet.NAKRemoteAccess), verbs.WCRemAccessErr, true},
		{"stale-ack-ignored", p0, packet.SyndromeACKUnlimited, verbs.WCSuccess, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(pmtu, p0))
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 4 * pmtu, LKey: lkeyA}}})
			require.Len(t, h.drain(), 1)
			train := readResp(pmtu, p0, make([]byte, 4*pmtu), 0, false)
			h.recv(train[0])
			h.recv(train[1])
			h.recv(resp(packet.RCAcknowledge, tc.psn, tc.syn, 1, nil))
			st, failed := h.r.Failed()
			require.Equal(t, tc.failed, failed)
			if !tc.failed {
				require.Empty(t, h.cq.wcs)
				h.recv(train[2])
				h.recv(train[3])
				require.Equal(t, []uint64{1}, h.cq.ids())
				require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
				return
			}
			require.Equal(t, tc.want, st)
			require.Len(t, h.cq.wcs, 1)
			require.Equal(t, tc.want, h.cq.wcs[0].Status)
			require.Equal(t, uint32(tc.syn), h.cq.wcs[0].VendorErr)
		})
	}
}
