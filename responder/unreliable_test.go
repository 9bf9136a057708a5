package responder

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

var (
	uSrc = netip.MustParseAddrPort("192.0.2.1:4791")
	uDst = netip.MustParseAddrPort("192.0.2.2:4791")
)

// uHarness wires an Unreliable receive side to fakes: one 64 KiB local MR
// (key 1) cut into 4 KiB receive WQEs, one 64 KiB remote MR (key 2). mods
// change the configuration (PMTU 256, RQ PSN 100, Q_Key 9, remote write).
type uHarness struct {
	t   testing.TB
	u   *Unreliable
	rq  *fakeRQ
	cq  *fakeCQ
	loc *fakeMR
	rem *fakeMR
	buf []byte
	// tos and ttl are the IP header fields the datagrams arrive with.
	tos, ttl uint8
}

func newUHarness(t testing.TB, ud bool, wqes int, mods ...func(*UConfig)) *uHarness {
	h := &uHarness{t: t, rq: newFakeRQ(64), cq: &fakeCQ{}, buf: make([]byte, 1024),
		loc: &fakeMR{key: 1, va: 0x10000, buf: make([]byte, 64<<10), access: verbs.AccessLocalWrite, valid: true},
		rem: &fakeMR{key: 2, va: 0x80000, buf: make([]byte, 64<<10), access: verbs.AccessRemoteWrite, valid: true}}
	for i := range wqes {
		h.rq.post(verbs.RecvWR{ID: uint64(i), SGList: []verbs.SGE{{Addr: 0x10000 + uint64(i)*4096, Length: 4096, LKey: 1}}})
	}
	cfg := UConfig{UD: ud, QPN: ourQPN, PMTU: 256, RQPSN: 100, QKey: 9, Access: verbs.AccessRemoteWrite}
	for _, m := range mods {
		m(&cfg)
	}
	h.u = NewUnreliable(cfg,
		Env{Mem: &fakeMem{mrs: []*fakeMR{h.loc, h.rem}}, RQ: h.rq, CQ: h.cq})
	return h
}

func (h *uHarness) rx(op packet.Opcode, psn packet.PSN, n int, mods ...reqMod) {
	pay := make([]byte, n)
	for i := range pay {
		pay[i] = byte(psn)
	}
	h.u.Receive(t0, build(h.t, h.buf, op, psn, pay, mods...), IPHeader{Src: uSrc, Dst: uDst, TOS: h.tos, TTL: h.ttl})
}

func TestUCSequences(t *testing.T) {
	type pkt struct {
		op  packet.Opcode
		psn packet.PSN
	}
	f, m, l, o := packet.UCSendFirst, packet.UCSendMiddle, packet.UCSendLast, packet.UCSendOnly
	for _, tc := range []struct {
		name    string
		pkts    []pkt
		lens    []uint32 // receive completions' byte counts
		dropped uint64   // MessagesDropped
		epsn    packet.PSN
	}{
		{"one message", []pkt{{f, 100}, {m, 101}, {l, 102}}, []uint32{768}, 0, 103},
		{"a lost MIDDLE drops the message, the next FIRST resyncs",
			[]pkt{{f, 100}, {l, 102}, {f, 103}, {l, 104}}, []uint32{512}, 1, 105},
		{"a MIDDLE outside a message is dropped", []pkt{{m, 100}, {o, 101}}, []uint32{256}, 1, 102},
		{"an ONLY after a gap resyncs", []pkt{{o, 100}, {o, 150}}, []uint32{256, 256}, 1, 151},
		{"a FIRST inside a message drops it (rxe check_op_seq)", []pkt{{f, 100}, {f, 101}, {l, 102}, {o, 103}}, []uint32{256}, 1, 104},
		{"a duplicate ONLY (old PSN) is dropped", []pkt{{o, 100}, {m, 100}}, []uint32{256}, 1, 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUHarness(t, false, 4)
			for _, p := range tc.pkts {
				h.rx(p.op, p.psn, 256)
			}
			var lens []uint32
			for _, wc := range h.cq.wcs {
				require.Equal(t, verbs.WCSuccess, wc.Status)
				lens = append(lens, wc.ByteLen)
			}
			require.Equal(t, tc.lens, lens)
			require.Equal(t, tc.dropped, h.u.Counters().MessagesDropped)
			require.Equal(t, tc.epsn, h.u.EPSN())
			if len(h.cq.wcs) > 0 {
				require.Equal(t, uint64(0), h.cq.wcs[0].ID, "an abandoned message leaves its WQE for the next one")
			}
		})
	}
}

func TestUCWrite(t *testing.T) {
	h := newUHarness(t, false, 1)
	h.rx(packet.UCRDMAWriteFirst, 100, 256, reth(0x80000, 2, 512))
	h.rx(packet.UCRDMAWriteLastWithImm, 101, 256, imm(5))
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, verbs.WCRecvRDMAWithImm, h.cq.wcs[0].Opcode)
	require.Equal(t, uint32(512), h.cq.wcs[0].ByteLen)
	require.Equal(t, byte(101), h.rem.buf[300])
	// A bad R_Key drops the message silently.
	h.rx(packet.UCRDMAWriteOnly, 102, 8, reth(0x80000, 99, 8))
	require.Equal(t, uint64(1), h.u.Counters().AccessErr)
	require.Len(t, h.cq.wcs, 1)
	// A range that runs past the region is refused at its first packet
	// (rxe check_rkey checks the rest of the range on every packet): the
	// FIRST, inside the region, places nothing either.
	end := uint64(0x80000 + len(h.rem.buf))
	h.rx(packet.UCRDMAWriteFirst, 103, 256, reth(end-300, 2, 512))
	h.rx(packet.UCRDMAWriteLast, 104, 256)
	require.Equal(t, uint64(2), h.u.Counters().AccessErr)
	require.Equal(t, make([]byte, 300), h.rem.buf[len(h.rem.buf)-300:], "nothing placed")
	// A WRITE with immediate takes its receive WQE before it places its
	// last packet (rxe check_resource): with none posted, the LAST places
	// nothing.
	h.rx(packet.UCRDMAWriteFirst, 105, 256, reth(0x81000, 2, 300))
	h.rx(packet.UCRDMAWriteLastWithImm, 106, 44, imm(1))
	require.Equal(t, uint64(1), h.u.Counters().NoWQE)
	require.Equal(t, byte(105), h.rem.buf[0x1000], "the FIRST is placed")
	require.Equal(t, make([]byte, 44), h.rem.buf[0x1000+256:0x1000+300], "the LAST is not")
	require.Len(t, h.cq.wcs, 1)
}

func TestUDReceive(t *testing.T) {
	h := newUHarness(t, true, 2)
	h.rx(packet.UDSendOnly, 1, 100, func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 8, SrcQP: 0x33} })
	require.Equal(t, uint64(1), h.u.Counters().QKeyMismatch)
	h.rx(packet.UDSendOnlyWithImmediate, 2, 100, imm(3), func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 9, SrcQP: 0x33} })
	require.Len(t, h.cq.wcs, 1)
	wc := h.cq.wcs[0]
	require.Equal(t, uint32(GRHSize+100), wc.ByteLen)
	require.Equal(t, uint32(0x33), wc.SrcQP)
	require.Equal(t, verbs.WCFlagGRH|verbs.WCFlagWithImm, wc.Flags)
	require.Equal(t, uSrc, wc.Src)
	grh := h.loc.buf[:GRHSize]
	require.Equal(t, make([]byte, 20), grh[:20])
	require.Equal(t, []byte{0x45, 0, 0, byte(20 + 8 + packet.PacketLen(packet.UDSendOnlyWithImmediate, 100))}, grh[20:24])
	require.Equal(t, []byte{192, 0, 2, 1, 192, 0, 2, 2}, grh[32:40])
	// The IPv4 header checksum verifies.
	var sum uint32
	for i := 20; i < 40; i += 2 {
		sum += uint32(grh[i])<<8 | uint32(grh[i+1])
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	require.Equal(t, uint32(0xFFFF), sum)
	h.rx(packet.UDSendOnly, 3, 300, func(hd *packet.Headers) { hd.DETH.QKey = 9 })
	require.Len(t, h.cq.wcs, 2, "longer than the path MTU, it fits its buffer (rxe rxe_resp_check_length)")
	require.Zero(t, h.u.Counters().TooLong)
	h.rx(packet.UCSendOnly, 4, 10)
	require.Equal(t, uint64(1), h.u.Counters().Dropped, "a UC packet on a UD QP")
}

// TestUDReceiveGRHFields: the GRH area carries the traffic class and TTL
// (hop limit) the datagram arrived with, as kernel rxe's copy of the
// received IP header does; a TTL the socket did not report reads 64.
func TestUDReceiveGRHFields(t *testing.T) {
	v6src, v6dst := netip.MustParseAddrPort("[2001:db8::1]:49152"), netip.MustParseAddrPort("[2001:db8::2]:4791")
	tests := []struct {
		name     string
		src, dst netip.AddrPort
		tos, ttl uint8
		want     map[int]byte // GRH area offset -> byte
	}{
		{"ipv4", uSrc, uDst, 0xb8, 63, map[int]byte{20: 0x45, 21: 0xb8, 28: 63, 29: 17}},
		{"ipv4 not reported", uSrc, uDst, 0, 0, map[int]byte{21: 0, 28: 64}},
		{"ipv6", v6src, v6dst, 0x68, 255, map[int]byte{0: 0x66, 1: 0x80, 2: 0, 3: 0, 6: 17, 7: 255}},
		{"ipv6 not reported", v6src, v6dst, 0, 0, map[int]byte{0: 0x60, 1: 0, 7: 64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newUHarness(t, true, 1)
			pkt := build(t, h.buf, packet.UDSendOnly, 1, []byte{1, 2, 3, 4}, func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 9, SrcQP: 5} })
			h.u.Receive(t0, pkt, IPHeader{Src: tc.src, Dst: tc.dst, TOS: tc.tos, TTL: tc.ttl})
			require.Len(t, h.cq.wcs, 1)
			require.Equal(t, tc.src, h.cq.wcs[0].Src)
			grh := h.loc.buf[:GRHSize]
			for off, b := range tc.want {
				require.Equal(t, b, grh[off], "GRH byte %d", off)
			}
			if tc.src.Addr().Is4() {
				var sum uint32
				for i := 20; i < 40; i += 2 {
					sum += uint32(grh[i])<<8 | uint32(grh[i+1])
				}
				for sum > 0xFFFF {
					sum = sum&0xFFFF + sum>>16
				}
				require.Equal(t, uint32(0xFFFF), sum, "IPv4 header checksum")
				return
			}
			require.Equal(t, tc.src.Addr().AsSlice(), grh[8:24])
			require.Equal(t, tc.dst.Addr().AsSlice(), grh[24:40])
		})
	}
}

// FuzzUnreliableReceive: random UC and UD packets never panic the receive
// side, never complete more WQEs than were posted, complete them in order,
// every completion fits its WQE, and a received message's bytes are its
// packets' payloads in order. Error completions come only from the
// classes that make them: class E (REM_INV_REQ_ERR, REM_ACCESS_ERR) only
// with an SRQ, class A (LOC_QP_OP_ERR) only for the WQE with a bad L_Key,
// last, with the receive side failed.
//
// prog is pairs [op and PSN step][payload/2, RETH, Q_Key]; an odd-length
// prog ends in a configuration byte: bit 0 an SRQ, bit 1 a receive WQE
// with a bad L_Key (the one bits 5-7 number), bit 2 receive buffers of 280
// bytes instead of 4 KiB, bit 3 RETH DMA lengths equal to the payload,
// bit 4 RETHs with an unknown R_Key.
func FuzzUnreliableReceive(f *testing.F) {
	f.Add(false, []byte{0, 0, 1, 1, 2, 2, 4, 9})
	f.Add(true, []byte{0x40, 9, 0x41, 9})
	// In sequence, the first packet's op byte is 0x2X and the next ones'
	// 0x3X: PSN steps of 0 and 1, opcode index (high + low nibble) mod 15.
	f.Add(false, []byte{0x22, 150, 0x01})                // UC SEND ONLY over the PMTU, SRQ
	f.Add(false, []byte{0x22, 8, 0x02})                  // UC SEND ONLY into a bad WQE
	f.Add(false, []byte{0x2D, 128, 0x3E, 128, 0x05})     // UC SEND FIRST, LAST past a 280-byte buffer, SRQ
	f.Add(false, []byte{0x29, 5, 0x19})                  // UC WRITE ONLY with immediate, bad R_Key, SRQ
	f.Add(true, []byte{0x2A, 122, 0x05})                 // UD datagram past a 280-byte buffer, SRQ
	f.Add(false, []byte{0x2D, 128, 0x4D, 5, 0x01})       // UC SEND FIRST, then a LAST after a gap, SRQ
	f.Add(true, []byte{0x2A, 8, 0x2A, 8, 0x2A, 8, 0x22}) // UD datagrams, the second WQE bad
	f.Add(false, []byte{0x2D, 128, 0x3E, 100, 0x00})     // UC SEND FIRST and LAST: one message of 456 bytes
	ops := []packet.Opcode{packet.UCSendFirst, packet.UCSendMiddle, packet.UCSendLast, packet.UCSendLastWithImmediate,
		packet.UCSendOnly, packet.UCSendOnlyWithImmediate, packet.UCRDMAWriteFirst, packet.UCRDMAWriteMiddle,
		packet.UCRDMAWriteLast, packet.UCRDMAWriteLastWithImm, packet.UCRDMAWriteOnly, packet.UCRDMAWriteOnlyWithImm,
		packet.UDSendOnly, packet.UDSendOnlyWithImmediate, packet.RCSendOnly}
	f.Fuzz(func(t *testing.T, ud bool, prog []byte) {
		var conf byte
		if len(prog)%2 == 1 {
			conf, prog = prog[len(prog)-1], prog[:len(prog)-1]
		}
		srq, bad, badWQE := conf&1 != 0, conf&2 != 0, int(conf>>5)
		wqeLen, rethIsPay, rkey := uint32(4096), conf&8 != 0, uint32(2)
		if conf&4 != 0 {
			wqeLen = 280 // a UC FIRST fits, its LAST does not; so does a long UD datagram
		}
		if conf&16 != 0 {
			rkey = 3
		}
		var mods []func(*UConfig)
		if srq {
			mods = append(mods, withSRQ)
		}
		h := newUHarness(t, ud, 0, mods...)
		for i := range 8 {
			w := verbs.RecvWR{ID: uint64(i), SGList: []verbs.SGE{{Addr: 0x10000 + uint64(i)*4096, Length: wqeLen, LKey: 1}}}
			if bad && i == badWQE {
				w.SGList[0].LKey = 99
			}
			h.rq.post(w)
		}
		psn := packet.PSN(100)
		for len(prog) >= 2 {
			op := ops[int(prog[0])%len(ops)]
			psn = psn.Add(int(prog[0]>>4) - 2)
			n := int(prog[1]) * 2
			if op.Info().Mask&packet.MaskPayload == 0 {
				n = 0
			}
			qkey := uint32(9)
			if prog[1]&1 != 0 {
				qkey = 8
			}
			dmaLen := uint32(prog[1]) * 4
			if rethIsPay {
				dmaLen = uint32(n)
			}
			h.rx(op, psn, n, reth(0x80000+uint64(prog[1])*64, rkey, dmaLen), imm(1),
				func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: qkey, SrcQP: 5} })
			prog = prog[2:]
		}
		// Every receive WQE taken has its completion (the CQ never fills
		// here), in the order they were posted.
		if len(h.cq.wcs)+h.rq.Len() != 8 {
			t.Fatalf("%d completions and %d WQEs left of 8", len(h.cq.wcs), h.rq.Len())
		}
		var succeeded uint64
		lastA := false
		for i, wc := range h.cq.wcs {
			if wc.ID != uint64(i) {
				t.Fatalf("completion %d is of WQE %d", i, wc.ID)
			}
			if wc.QPNum != ourQPN {
				t.Fatalf("completion of QP %#x", wc.QPNum)
			}
			switch wc.Opcode {
			case verbs.WCRecv:
				if wc.ByteLen > wqeLen {
					t.Fatalf("completion of %d bytes in a %d-byte WQE", wc.ByteLen, wqeLen)
				}
			case verbs.WCRecvRDMAWithImm:
				// A WRITE's RETH here names at most 255*4 bytes.
				if wc.ByteLen > 255*4 {
					t.Fatalf("WRITE with immediate completed with %d bytes", wc.ByteLen)
				}
			default:
				t.Fatalf("completion opcode %v", wc.Opcode)
			}
			switch wc.Status {
			case verbs.WCSuccess:
				succeeded++
				continue
			case verbs.WCRemInvReqErr, verbs.WCRemAccessErr:
				if !srq {
					t.Fatalf("class E completion %v without an SRQ", wc.Status)
				}
			case verbs.WCLocQPOpErr:
				if !bad || i != badWQE || i != len(h.cq.wcs)-1 {
					t.Fatalf("LOC_QP_OP_ERR completion %d of WQE %d (bad WQE %v %d)", i, wc.ID, bad, badWQE)
				}
				lastA = true
			default:
				t.Fatalf("completion status %v", wc.Status)
			}
			if wc.ByteLen != 0 || wc.Flags != 0 || wc.SrcQP != 0 || wc.Imm != 0 {
				t.Fatalf("error completion with more than ID, status and QP: %+v", wc)
			}
		}
		c := h.u.Counters()
		if c.RDMARecvs != succeeded {
			t.Fatalf("rdma_recvs %d, %d successful completions", c.RDMARecvs, succeeded)
		}
		if st, failed := h.u.Failed(); failed != lastA || failed && st != verbs.WCLocQPOpErr {
			t.Fatalf("Failed() = %v, %v after a class A completion: %v", st, failed, lastA)
		}
		// A received message is its packets' payloads (each byte the low
		// byte of its packet's PSN) at the start of its WQE's buffer: a
		// UD datagram after the 40-byte GRH area, a UC SEND's packets in
		// PSN order, each 256 bytes (the PMTU) but the last.
		for _, wc := range h.cq.wcs {
			if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRecv {
				continue
			}
			got := h.loc.buf[int(wc.ID)*4096:][:wc.ByteLen]
			if ud {
				got = got[GRHSize:]
			}
			for k := range got {
				want := got[0]
				if !ud {
					want += byte(k / 256)
				}
				if got[k] != want {
					t.Fatalf("byte %d of the message in WQE %d is %#x, want %#x", k, wc.ID, got[k], want)
				}
			}
		}
		// Nothing lands outside the WQEs' buffers (nor in the one whose
		// L_Key fails) or past the furthest range a RETH here can name.
		for i := range 8 {
			from, to := i*4096+int(wqeLen), (i+1)*4096
			if bad && i == badWQE {
				from = i * 4096
			}
			for j, b := range h.loc.buf[from:to] {
				if b != 0 {
					t.Fatalf("local MR byte %d written, outside WQE %d's buffer", from+j, i)
				}
			}
		}
		for i, b := range h.loc.buf[8*4096:] {
			if b != 0 {
				t.Fatalf("local MR byte %d written, outside every WQE", 8*4096+i)
			}
		}
		for i, b := range h.rem.buf[255*64+255*4:] {
			if b != 0 {
				t.Fatalf("remote MR byte %d written, past every RETH range", 255*64+255*4+i)
			}
		}
		// The QP enters ERR: a WQE taken from an SRQ and not completed
		// (a UC SEND abandoned part-way) completes with WR_FLUSH_ERR, in
		// order; the QP's own RQ is the owner's to flush.
		done := len(h.cq.wcs)
		h.u.Flush()
		if srq && h.rq.peeked {
			t.Fatalf("WQE %d taken from the SRQ is left after Flush", done)
		}
		for i, wc := range h.cq.wcs[done:] {
			if !srq || wc.Status != verbs.WCWRFlushErr || wc.ID != uint64(done+i) {
				t.Fatalf("Flush completed %+v (SRQ %v)", wc, srq)
			}
		}
	})
}

// TestUnreliableCQOverflowFails: a receive completion that finds the CQ
// full fails the receive side (rxe do_complete for every QP type), counts
// it, and later packets are dropped; RDMARecvs counts only delivered
// completions.
func TestUnreliableCQOverflowFails(t *testing.T) {
	for _, ud := range []bool{true, false} {
		h := newUHarness(t, ud, 4)
		h.cq.limit = -1 // always full
		op := packet.UCSendOnly
		if ud {
			op = packet.UDSendOnly
		}
		deth := func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 9, SrcQP: 0x33} }
		h.rx(op, 100, 32, deth)
		st, failed := h.u.Failed()
		require.True(t, failed, "ud=%v", ud)
		require.Equal(t, verbs.WCGeneralErr, st)
		c := h.u.Counters()
		require.Equal(t, uint64(1), c.CQOverflow)
		require.Zero(t, c.RDMARecvs)
		h.cq.limit = 0
		h.rx(op, 101, 32, deth)
		require.Empty(t, h.cq.wcs, "a failed receive side places nothing more")
		require.Equal(t, uint64(1), h.u.Counters().Dropped)
	}
}

// TestUCLengthRules: UC packets that break rxe check_length's rules, or a
// WRITE whose packets do not add up to its DMA length, drop their message
// (nothing completes, nothing past the rules is placed).
func TestUCLengthRules(t *testing.T) {
	type rx struct {
		op   packet.Opcode
		n    int
		mods []reqMod
	}
	for _, tc := range []struct {
		name   string
		pkts   []rx
		placed uint64
	}{
		{"WRITE ONLY over the PMTU", []rx{{packet.UCRDMAWriteOnly, 1000, []reqMod{reth(0x80000, 2, 1000)}}}, 0},
		{"SEND FIRST short of the PMTU", []rx{{packet.UCSendFirst, 10, nil}, {packet.UCSendLast, 10, nil}}, 0},
		{"SEND MIDDLE over the PMTU", []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendMiddle, 300, nil}, {packet.UCSendLast, 10, nil}}, 256},
		{"SEND LAST empty", []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendLast, 0, nil}}, 256},
		{"WRITE ends short of its DMA length", []rx{{packet.UCRDMAWriteFirst, 256, []reqMod{reth(0x80000, 2, 1000)}},
			{packet.UCRDMAWriteLastWithImm, 256, []reqMod{imm(7)}}}, 256},
		{"WRITE LAST past its DMA length", []rx{{packet.UCRDMAWriteFirst, 256, []reqMod{reth(0x80000, 2, 300)}},
			{packet.UCRDMAWriteLastWithImm, 256, []reqMod{imm(7)}}}, 256},
		{"DMA length over 2^31", []rx{{packet.UCRDMAWriteFirst, 256, []reqMod{reth(0x80000, 2, 1<<31+1)}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUHarness(t, false, 4)
			h.buf = make([]byte, 4096)
			psn := packet.PSN(100)
			for _, p := range tc.pkts {
				h.rx(p.op, psn, p.n, p.mods...)
				psn = psn.Next()
			}
			c := h.u.Counters()
			require.Empty(t, h.cq.wcs)
			require.Equal(t, tc.placed, c.BytesPlaced)
			require.Equal(t, uint64(1), c.LengthErr)
			require.Equal(t, uint64(1), c.MessagesDropped)
			require.Equal(t, 4, h.rq.Len(), "no receive WQE consumed")
		})
	}
	// The rules let a well-formed message through.
	h := newUHarness(t, false, 4)
	h.rx(packet.UCRDMAWriteFirst, 100, 256, reth(0x80000, 2, 300))
	h.rx(packet.UCRDMAWriteLastWithImm, 101, 44, imm(7))
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, uint32(300), h.cq.wcs[0].ByteLen)
	require.Zero(t, h.u.Counters().LengthErr)
}

// withSRQ makes the harness's receive queue a shared receive queue.
func withSRQ(c *UConfig) { c.SRQ = true }

// udDETH gives a UD request the harness's Q_Key.
func udDETH(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 9, SrcQP: 0x33} }

// TestUnreliableErrorClasses: the receive-side errors of UC and UD QPs,
// each without and with an SRQ, sorted by IBA class as rxe_resp.c sorts
// them. A length or R_Key error of a message that took a receive WQE is
// class D without an SRQ (dropped, the WQE stays for the next message)
// and class E with one (the WQE completes with REM_INV_REQ_ERR or
// REM_ACCESS_ERR; the QP goes on). One that took no WQE is only dropped.
// A receive WQE whose SGE cannot be written is class A either way: it
// completes with LOC_QP_OP_ERR and the receive side fails.
func TestUnreliableErrorClasses(t *testing.T) {
	type rx struct {
		op   packet.Opcode
		n    int
		mods []reqMod
	}
	sge := func(addr uint64, n, key uint32) verbs.SGE { return verbs.SGE{Addr: addr, Length: n, LKey: key} }
	wqe := func(id uint64, sges ...verbs.SGE) verbs.RecvWR { return verbs.RecvWR{ID: id, SGList: sges} }
	big := wqe(1, sge(0x11000, 4096, 1)) // the WQE behind the first, for the next message
	const remEnd = 0x80000 + 64<<10      // the end of the remote MR
	tooLong := func(c UCounters) uint64 { return c.TooLong }
	lengthErr := func(c UCounters) uint64 { return c.LengthErr }
	accessErr := func(c UCounters) uint64 { return c.AccessErr }
	for _, tc := range []struct {
		name string
		ud   bool
		wqes []verbs.RecvWR // nil: two of 4 KiB
		pkts []rx
		// status is the completion of the first WQE: with an SRQ only
		// (class E); with or without one if WCLocQPOpErr (class A). 0:
		// no WQE was taken, nothing completes.
		status  verbs.WCStatus
		counter func(UCounters) uint64 // counts the error once; nil for class A
		noWrite bool                   // UConfig.Access without remote write
	}{
		{name: "UC SEND ONLY over the PMTU", pkts: []rx{{packet.UCSendOnly, 300, nil}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC SEND FIRST short of the PMTU", pkts: []rx{{packet.UCSendFirst, 10, nil}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC SEND MIDDLE over the PMTU: the WQE taken at FIRST completes",
			pkts:   []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendMiddle, 300, nil}, {packet.UCSendLast, 10, nil}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC SEND LAST empty", pkts: []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendLast, 0, nil}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC SEND too long for its receive buffer",
			wqes:   []verbs.RecvWR{wqe(0, sge(0x10000, 200, 1), sge(0x10100, 100, 1)), big},
			pkts:   []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendLast, 256, nil}},
			status: verbs.WCRemInvReqErr, counter: tooLong},
		{name: "UC WRITE ONLY with immediate over the PMTU",
			pkts:   []rx{{packet.UCRDMAWriteOnlyWithImm, 300, []reqMod{reth(0x80000, 2, 300), imm(1)}}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC WRITE LAST with immediate past its DMA length",
			pkts: []rx{{packet.UCRDMAWriteFirst, 256, []reqMod{reth(0x80000, 2, 300)}},
				{packet.UCRDMAWriteLastWithImm, 256, []reqMod{imm(1)}}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC WRITE ONLY with immediate, bad R_Key",
			pkts:   []rx{{packet.UCRDMAWriteOnlyWithImm, 8, []reqMod{reth(0x80000, 99, 8), imm(1)}}},
			status: verbs.WCRemAccessErr, counter: accessErr},
		{name: "UC WRITE with immediate whose range runs past the MR: refused at FIRST, no WQE taken (rxe check_rkey checks the rest of the range)",
			pkts: []rx{{packet.UCRDMAWriteFirst, 256, []reqMod{reth(remEnd-266, 2, 300)}},
				{packet.UCRDMAWriteLastWithImm, 44, []reqMod{imm(1)}}},
			counter: accessErr, noWrite: true},
		{name: "UC WRITE ONLY, bad R_Key: no WQE taken",
			pkts: []rx{{packet.UCRDMAWriteOnly, 8, []reqMod{reth(0x80000, 99, 8)}}}, counter: accessErr},
		{name: "UC WRITE FIRST over the PMTU: no WQE taken",
			pkts: []rx{{packet.UCRDMAWriteFirst, 300, []reqMod{reth(0x80000, 2, 600)}}}, counter: lengthErr},
		{name: "UC WRITE ONLY with immediate without remote write: dropped before a WQE is taken (rxe check_op_valid)",
			pkts:    []rx{{packet.UCRDMAWriteOnlyWithImm, 8, []reqMod{reth(0x80000, 2, 8), imm(1)}}},
			counter: accessErr, noWrite: true},
		{name: "UD datagram too long for its receive buffer", ud: true,
			wqes:   []verbs.RecvWR{wqe(0, sge(0x10000, 60, 1), sge(0x10100, 60, 1)), big},
			pkts:   []rx{{packet.UDSendOnly, 100, nil}},
			status: verbs.WCRemInvReqErr, counter: tooLong},
		{name: "UD datagram one byte too long for its receive buffer", ud: true,
			wqes:   []verbs.RecvWR{wqe(0, sge(0x10000, GRHSize+99, 1)), big},
			pkts:   []rx{{packet.UDSendOnly, 100, nil}},
			status: verbs.WCRemInvReqErr, counter: tooLong},
		{name: "UC WRITE ONLY with immediate, a payload and a zero DMA length (C9-88: it names no memory)",
			pkts:   []rx{{packet.UCRDMAWriteOnlyWithImm, 8, []reqMod{reth(0x80000, 2, 0), imm(1)}}},
			status: verbs.WCRemInvReqErr, counter: lengthErr},
		{name: "UC SEND into a WQE with a bad L_Key",
			wqes: []verbs.RecvWR{wqe(0, sge(0x10000, 4096, 99)), big},
			pkts: []rx{{packet.UCSendOnly, 16, nil}}, status: verbs.WCLocQPOpErr},
		{name: "UC SEND whose second SGE is past the MR",
			wqes: []verbs.RecvWR{wqe(0, sge(0x10000, 256, 1), sge(0x10000+64<<10-100, 1000, 1)), big},
			pkts: []rx{{packet.UCSendFirst, 256, nil}, {packet.UCSendLast, 256, nil}}, status: verbs.WCLocQPOpErr},
		{name: "UC SEND into an SGE without local write (the remote MR)",
			wqes: []verbs.RecvWR{wqe(0, sge(0x80000, 4096, 2)), big},
			pkts: []rx{{packet.UCSendOnlyWithImmediate, 16, []reqMod{imm(1)}}}, status: verbs.WCLocQPOpErr},
		{name: "UD datagram into a WQE with a bad L_Key", ud: true,
			wqes: []verbs.RecvWR{wqe(0, sge(0x10000, 4096, 99)), big},
			pkts: []rx{{packet.UDSendOnly, 16, nil}}, status: verbs.WCLocQPOpErr},
		{name: "UD payload SGE with a bad L_Key after the GRH area", ud: true,
			wqes: []verbs.RecvWR{wqe(0, sge(0x10000, GRHSize, 1), sge(0x10100, 4096, 99)), big},
			pkts: []rx{{packet.UDSendOnly, 16, nil}}, status: verbs.WCLocQPOpErr},
	} {
		for _, srq := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/srq=%v", tc.name, srq), func(t *testing.T) {
				mods := []func(*UConfig){}
				if srq {
					mods = append(mods, withSRQ)
				}
				if tc.noWrite {
					mods = append(mods, func(c *UConfig) { c.Access = 0 })
				}
				h := newUHarness(t, tc.ud, 0, mods...)
				wqes := tc.wqes
				if wqes == nil {
					wqes = []verbs.RecvWR{wqe(0, sge(0x10000, 4096, 1)), big}
				}
				for _, w := range wqes {
					h.rq.post(w)
				}
				psn := packet.PSN(100)
				send := func(p rx) {
					if tc.ud {
						p.mods = append(p.mods, udDETH)
					}
					h.rx(p.op, psn, p.n, p.mods...)
					psn = psn.Next()
				}
				for _, p := range tc.pkts {
					send(p)
				}
				classA := tc.status == verbs.WCLocQPOpErr
				completed := classA || srq && tc.status != 0
				c := h.u.Counters()
				if tc.counter != nil {
					require.Equal(t, uint64(1), tc.counter(c))
				}
				if !classA {
					require.Zero(t, c.TooLong+c.LengthErr+c.AccessErr-tc.counter(c), "one counter only")
				} else {
					require.Zero(t, c.TooLong+c.LengthErr+c.AccessErr, "a malformed WQE is no length or access error")
				}
				if completed {
					require.Len(t, h.cq.wcs, 1)
					require.Equal(t, verbs.WC{ID: 0, Status: tc.status, Opcode: h.cq.wcs[0].Opcode, QPNum: ourQPN}, h.cq.wcs[0],
						"an error completion carries the WR ID, status and QP number")
					require.Equal(t, 1, h.rq.Len(), "the WQE is consumed")
				} else {
					require.Empty(t, h.cq.wcs)
					require.Equal(t, 2, h.rq.Len(), "the WQE stays for the next message")
				}
				require.Zero(t, c.RDMARecvs, "error completions are not rdma_recvs")
				st, failed := h.u.Failed()
				require.Equal(t, classA, failed)
				if classA {
					require.Equal(t, verbs.WCLocQPOpErr, st)
				}

				// The next message: the QP goes on (classes D and E) into
				// the WQE left at the head, or (class A) takes nothing.
				n := h.cq.wcs
				if tc.ud {
					send(rx{packet.UDSendOnly, 16, nil})
				} else {
					send(rx{packet.UCSendOnly, 16, nil})
				}
				if classA {
					require.Len(t, h.cq.wcs, len(n), "a failed receive side completes nothing more")
					require.Equal(t, uint64(1), h.u.Counters().Dropped)
					return
				}
				require.Len(t, h.cq.wcs, len(n)+1)
				wc := h.cq.wcs[len(n)]
				require.Equal(t, verbs.WCSuccess, wc.Status)
				want := uint64(0)
				if completed {
					want = 1
				}
				require.Equal(t, want, wc.ID)
				require.Equal(t, uint64(1), h.u.Counters().RDMARecvs)
			})
		}
	}
}

// TestUnreliableMalformedWQECQFull: a malformed receive WQE whose error
// completion finds the CQ full fails the receive side with the CQ
// overflow's status, as an RC responder's class A error does (the first
// failure wins).
func TestUnreliableMalformedWQECQFull(t *testing.T) {
	h := newUHarness(t, false, 0)
	h.rq.post(verbs.RecvWR{ID: 7, SGList: []verbs.SGE{{Addr: 0x10000, Length: 4096, LKey: 99}}})
	h.cq.limit = -1
	h.rx(packet.UCSendOnly, 100, 16)
	st, failed := h.u.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCGeneralErr, st)
	require.Equal(t, uint64(1), h.u.Counters().CQOverflow)
	require.Zero(t, h.rq.Len())
}

// TestUnreliableFlushHeldSRQWQE: a receive WQE taken from an SRQ by a UC
// SEND that was then abandoned belongs to the QP until the next message
// uses it; when the QP enters ERR, Flush completes it with WR_FLUSH_ERR.
// Without an SRQ the WQE never left the QP's own queue, which the owner
// flushes, so Flush completes nothing.
func TestUnreliableFlushHeldSRQWQE(t *testing.T) {
	f, l := packet.UCSendFirst, packet.UCSendLast
	for _, tc := range []struct {
		name      string
		srq       bool
		pkts      []packet.Opcode // sent from PSN 100
		gap       bool            // the PSN after the first packet's is lost
		wantFlush bool
	}{
		{"SRQ, abandoned after FIRST", true, []packet.Opcode{f, l}, true, true},
		{"SRQ, completed", true, []packet.Opcode{f, l}, false, false},
		{"SRQ, nothing received", true, nil, false, false},
		{"own RQ, abandoned after FIRST", false, []packet.Opcode{f, l}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*UConfig)
			if tc.srq {
				mods = append(mods, withSRQ)
			}
			h := newUHarness(t, false, 2, mods...)
			psn := packet.PSN(100)
			for i, op := range tc.pkts {
				n := 256
				if op == l {
					n = 10
				}
				h.rx(op, psn, n)
				psn++
				if i == 0 && tc.gap {
					psn++ // the next packet is lost
				}
			}
			done := len(h.cq.wcs)
			h.u.Flush()
			flushed := h.cq.wcs[done:]
			if !tc.wantFlush {
				require.Empty(t, flushed)
				return
			}
			require.Len(t, flushed, 1)
			require.Equal(t, verbs.WC{ID: 0, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: ourQPN}, flushed[0])
			require.Equal(t, 1, h.rq.Len(), "the other WQE is left to the SRQ")
			h.u.Flush()
			require.Len(t, h.cq.wcs, done+1, "a second Flush completes nothing more")
		})
	}
}

// TestUDPayloadOverPMTU: a UD datagram is held to its receive buffer, GRH
// area included, not to the path MTU (rxe rxe_resp_check_length: the MTU
// rules are RC's and UC's), so one from a peer with a larger MTU is
// received when it fits.
func TestUDPayloadOverPMTU(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int    // payload bytes (the harness's PMTU is 256)
		buf    uint32 // receive buffer bytes
		srq    bool
		done   bool // the WQE completes, with status
		status verbs.WCStatus
	}{
		{"over the PMTU, fits the buffer", 300, 4096, false, true, verbs.WCSuccess},
		{"over the PMTU, fits the buffer exactly", 1000, GRHSize + 1000, false, true, verbs.WCSuccess},
		{"over the PMTU, fits the buffer, SRQ", 1000, 4096, true, true, verbs.WCSuccess},
		{"one byte over the buffer: class D", 1001, GRHSize + 1000, false, false, 0},
		{"one byte over the buffer, SRQ: class E", 1001, GRHSize + 1000, true, true, verbs.WCRemInvReqErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*UConfig)
			if tc.srq {
				mods = append(mods, withSRQ)
			}
			h := newUHarness(t, true, 0, mods...)
			h.buf = make([]byte, 4096)
			h.rq.post(verbs.RecvWR{ID: 5, SGList: []verbs.SGE{{Addr: 0x10000, Length: tc.buf, LKey: 1}}})
			h.rx(packet.UDSendOnly, 1, tc.n, udDETH)
			if !tc.done {
				require.Empty(t, h.cq.wcs)
				require.Equal(t, uint64(1), h.u.Counters().TooLong)
				return
			}
			require.Len(t, h.cq.wcs, 1)
			wc := h.cq.wcs[0]
			require.Equal(t, tc.status, wc.Status)
			require.Equal(t, uint64(5), wc.ID)
			if tc.status == verbs.WCSuccess {
				require.Equal(t, uint32(GRHSize+tc.n), wc.ByteLen)
				require.Equal(t, byte(1), h.loc.buf[GRHSize+tc.n-1], "the payload is placed behind the GRH area")
				require.Zero(t, h.u.Counters().TooLong)
			}
		})
	}
}

// TestUCInterruptedMessage: a UC SEND interrupted in sequence by a packet
// that does not continue it (a FIRST or ONLY, or the other operation's
// MIDDLE) is dropped with that packet (rxe check_op_seq); on an SRQ the
// receive WQE it had taken completes with REM_INV_REQ_ERR (rxe
// do_class_d1e_error, class E), without one the WQE is filled from its
// start by the next message (class D1). After a PSN gap the FIRST or ONLY
// starts a new message into the same WQE, SRQ or not.
func TestUCInterruptedMessage(t *testing.T) {
	type pkt struct {
		op  packet.Opcode
		psn packet.PSN
	}
	f, m, l, o := packet.UCSendFirst, packet.UCSendMiddle, packet.UCSendLast, packet.UCSendOnly
	type done struct {
		id     uint64
		status verbs.WCStatus
		n      uint32
	}
	for _, tc := range []struct {
		name       string
		pkts       []pkt
		rq, srq    []done
		dropped    uint64
		firstBytes byte // the first byte of the WQE the last message landed in
	}{
		{"a FIRST inside the message", []pkt{{f, 100}, {f, 101}, {l, 102}, {o, 103}},
			[]done{{0, verbs.WCSuccess, 256}},
			[]done{{0, verbs.WCRemInvReqErr, 0}, {1, verbs.WCSuccess, 256}}, 1, 103},
		{"an ONLY inside the message", []pkt{{f, 100}, {o, 101}, {o, 102}},
			[]done{{0, verbs.WCSuccess, 256}},
			[]done{{0, verbs.WCRemInvReqErr, 0}, {1, verbs.WCSuccess, 256}}, 1, 102},
		{"a WRITE MIDDLE inside the message", []pkt{{f, 100}, {m, 101}, {packet.UCRDMAWriteMiddle, 102}, {o, 103}},
			[]done{{0, verbs.WCSuccess, 256}},
			[]done{{0, verbs.WCRemInvReqErr, 0}, {1, verbs.WCSuccess, 256}}, 1, 103},
		{"a FIRST after a gap starts a new message", []pkt{{f, 100}, {f, 103}, {l, 104}},
			[]done{{0, verbs.WCSuccess, 512}},
			[]done{{0, verbs.WCSuccess, 512}}, 1, 103},
	} {
		for _, srq := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/srq=%v", tc.name, srq), func(t *testing.T) {
				var mods []func(*UConfig)
				want := tc.rq
				if srq {
					mods, want = append(mods, withSRQ), tc.srq
				}
				h := newUHarness(t, false, 4, mods...)
				for _, p := range tc.pkts {
					h.rx(p.op, p.psn, 256)
				}
				var got []done
				for _, wc := range h.cq.wcs {
					d := done{wc.ID, wc.Status, 0}
					if wc.Status == verbs.WCSuccess {
						d.n = wc.ByteLen
					}
					got = append(got, d)
				}
				require.Equal(t, want, got)
				require.Equal(t, tc.dropped, h.u.Counters().MessagesDropped)
				last := want[len(want)-1]
				require.Equal(t, tc.firstBytes, h.loc.buf[last.id*4096], "the message lands at its WQE's start")
			})
		}
	}
}

// TestUDReceiveGRHMixedFamilies: an IPv4 datagram whose known destination
// is not an IPv4 address (a device whose address is IPv6 on a netdev bound
// to IPv4, or no destination known) still completes, with the IPv4 header
// in the GRH area and a zero destination, instead of panicking in
// netip.Addr.As4.
func TestUDReceiveGRHMixedFamilies(t *testing.T) {
	for _, dst := range []netip.AddrPort{netip.MustParseAddrPort("[2001:db8::2]:4791"), {}} {
		h := newUHarness(t, true, 1)
		pkt := build(t, h.buf, packet.UDSendOnly, 1, []byte{1, 2, 3, 4}, func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 9, SrcQP: 5} })
		require.NotPanics(t, func() { h.u.Receive(t0, pkt, IPHeader{Src: uSrc, Dst: dst}) })
		require.Len(t, h.cq.wcs, 1)
		require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
		grh := h.loc.buf[:GRHSize]
		require.Equal(t, byte(0x45), grh[20])
		src := uSrc.Addr().As4()
		require.Equal(t, src[:], grh[32:36])
		require.Equal(t, make([]byte, 4), grh[36:40], "no IPv4 destination known")
	}
}

// TestUnreliableSolicitedCompletions: a UC or UD receive completion tells a
// CQ that wants it whether the message's last packet had the BTH SE bit
// (solicited events, IBA 11.4.2.2; rxe do_complete).
func TestUnreliableSolicitedCompletions(t *testing.T) {
	for _, tc := range []struct {
		name string
		ud   bool
		send func(h *uHarness, mods ...reqMod)
	}{
		{"UD SEND ONLY", true, func(h *uHarness, mods ...reqMod) {
			h.rx(packet.UDSendOnly, 100, 8, append(mods, udDETH)...)
		}},
		{"UC SEND ONLY", false, func(h *uHarness, mods ...reqMod) { h.rx(packet.UCSendOnly, 100, 8, mods...) }},
		{"UC SEND FIRST, LAST", false, func(h *uHarness, mods ...reqMod) {
			h.rx(packet.UCSendFirst, 100, 256)
			h.rx(packet.UCSendLast, 101, 8, mods...)
		}},
		{"UC WRITE ONLY with immediate", false, func(h *uHarness, mods ...reqMod) {
			h.rx(packet.UCRDMAWriteOnlyWithImm, 100, 8, append(mods, reth(0x80000, 2, 8), imm(1))...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, solicited := range []bool{true, false} {
				h := newUHarness(t, tc.ud, 1)
				cq := &seCQ{}
				h.u = NewUnreliable(UConfig{UD: tc.ud, QPN: ourQPN, PMTU: 256, RQPSN: 100, QKey: 9, Access: verbs.AccessRemoteWrite},
					Env{Mem: &fakeMem{mrs: []*fakeMR{h.loc, h.rem}}, RQ: h.rq, CQ: cq})
				var mods []reqMod
				if solicited {
					mods = append(mods, se)
				}
				tc.send(h, mods...)
				require.Equal(t, []bool{solicited}, cq.se)
			}
		})
	}
}

// TestUCImmediateCompletion: a UC SEND or RDMA WRITE with immediate data
// completes with IBV_WC_WITH_IMM and the immediate value (rxe do_complete).
func TestUCImmediateCompletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(h *uHarness)
		op   verbs.WCOpcode
	}{
		{"SEND ONLY with immediate", func(h *uHarness) { h.rx(packet.UCSendOnlyWithImmediate, 100, 8, imm(0xC0FFEE)) }, verbs.WCRecv},
		{"SEND LAST with immediate", func(h *uHarness) {
			h.rx(packet.UCSendFirst, 100, 256)
			h.rx(packet.UCSendLastWithImmediate, 101, 8, imm(0xC0FFEE))
		}, verbs.WCRecv},
		{"WRITE ONLY with immediate", func(h *uHarness) {
			h.rx(packet.UCRDMAWriteOnlyWithImm, 100, 8, reth(0x80000, 2, 8), imm(0xC0FFEE))
		}, verbs.WCRecvRDMAWithImm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUHarness(t, false, 1)
			tc.send(h)
			require.Len(t, h.cq.wcs, 1)
			wc := h.cq.wcs[0]
			require.Equal(t, verbs.WCSuccess, wc.Status)
			require.Equal(t, tc.op, wc.Opcode)
			require.Equal(t, verbs.WCFlagWithImm, wc.Flags)
			require.Equal(t, uint32(0xC0FFEE), wc.Imm)
		})
	}
}

// TestUnreliableSetters: a Modify QP in RTS changes the Q_Key a UD QP
// accepts and the remote access a UC QP grants, from the next packet on.
func TestUnreliableSetters(t *testing.T) {
	t.Run("SetQKey", func(t *testing.T) {
		h := newUHarness(t, true, 2)
		h.u.SetQKey(7)
		h.rx(packet.UDSendOnly, 1, 8, udDETH) // Q_Key 9
		require.Equal(t, uint64(1), h.u.Counters().QKeyMismatch)
		require.Empty(t, h.cq.wcs)
		h.rx(packet.UDSendOnly, 2, 8, func(hd *packet.Headers) { hd.DETH = packet.DETHFields{QKey: 7, SrcQP: 0x33} })
		require.Len(t, h.cq.wcs, 1)
	})
	t.Run("SetAccess", func(t *testing.T) {
		h := newUHarness(t, false, 0)
		h.u.SetAccess(verbs.AccessRemoteRead)
		h.rx(packet.UCRDMAWriteOnly, 100, 8, reth(0x80000, 2, 8))
		require.Equal(t, uint64(1), h.u.Counters().AccessErr)
		require.Equal(t, make([]byte, 8), h.rem.buf[:8], "nothing placed")
		h.u.SetAccess(verbs.AccessRemoteWrite)
		h.rx(packet.UCRDMAWriteOnly, 101, 8, reth(0x80000, 2, 8))
		require.Equal(t, uint64(1), h.u.Counters().AccessErr)
		require.Equal(t, byte(101), h.rem.buf[0])
	})
}
