package requester

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// The fuzz requester: PMTU 256, PSNs near the wrap, and a send queue of
// every kind of WQE, all sent before the responses arrive.
const (
	fuzzPMTU = 256
	fuzzPSN  = packet.PSNMask - 4
)

// fuzzWritable are the byte ranges of region A that responses may write:
// the READ and atomic destinations.
var fuzzWritable = [][2]int{{1000, 1300}, {2000, 2400}, {3000, 3008}, {3100, 3108}, {3200, 3200}}

func fuzzSetup(t testing.TB, sr, reads bool, parts, window int) (*harness, *region, []byte) {
	cfg := baseConfig(fuzzPMTU, fuzzPSN)
	cfg.MaxReadPkts = parts
	cfg.Window = window
	cfg.SelectiveRepeat = sr
	cfg.MaxRdAtomic = 8
	cfg.Timeout = 8
	cfg.RetryCnt = 2
	cfg.RNRRetry = 2
	cfg.Credits = true
	h := newHarness(t, cfg)
	rg := h.mem.add(lkeyA, baseA, 8192, verbs.AccessLocalWrite, 5)
	orig := append([]byte(nil), rg.buf...)
	sge := func(off, n int) verbs.SGE {
		return verbs.SGE{Addr: baseA + uint64(off), Length: uint32(n), LKey: lkeyA}
	}
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{sge(0, 600)}},                                                           // PSN +0..+2
		{ID: 2, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(1000, 300), sge(2000, 400)}},     // +3..+5
		{ID: 3, Opcode: verbs.WRAtomicCmpAndSwp, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(3000, 8)}},                // +6
		{ID: 4, Opcode: verbs.WRRDMAWriteWithImm, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(4000, 300)}},             // +7..+8
		{ID: 5, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(3200, 0)}},                       // +9
		{ID: 6, Opcode: verbs.WRAtomicFetchAndAdd, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(3100, 8)}},              // +10
		{ID: 7, Opcode: verbs.WRAtomicWrite, RemoteAddr: rbase, RKey: rkey, Flags: verbs.SendInline, InlineData: make([]byte, 8)}, // +11
		{ID: 8, Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: []byte("tail")},                                        // +12
	}
	if reads {
		// READs only: go-back-N keeps the responses of the READs after
		// a gap and re-reads the holes (readahead.go).
		wrs = []verbs.SendWR{
			{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(1000, 300)}},                 // +0..+1
			{ID: 2, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(2000, 400)}},                 // +2..+3
			{ID: 3, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(3000, 8)}},                   // +4
			{ID: 4, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(3200, 0)}},                   // +5
			{ID: 5, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{sge(1000, 260), sge(2000, 250)}}, // +6..+7
		}
	}
	tm := &trackMem{fakeMem: h.mem, r: h.r, written: map[uint64]bool{}}
	tc := &trackCQ{fakeCQ: h.cq, mem: tm, wrs: map[uint64]verbs.SendWR{}}
	h.r.mem, h.r.cq, h.tm = tm, tc, tm
	for i := range wrs {
		wrs[i].Flags |= verbs.SendSignaled
		tc.wrs[wrs[i].ID] = wrs[i]
		h.post(&wrs[i])
	}
	h.r.unlimited = true // let all go; credits are still parsed
	for h.r.NextPacket(h.now, h.buf) > 0 {
	}
	return h, rg, orig
}

// fuzzInput frames response packets as the fuzz input: a 2-byte length,
// then the packet.
func fuzzInput(pkts ...[]byte) []byte {
	var b []byte
	for _, p := range pkts {
		b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
		b = append(b, p...)
	}
	return b
}

// fuzzSeeds adds the seed corpus of the response fuzz targets.
func fuzzSeeds(f *testing.F, sr bool) {
	p := packet.PSN(fuzzPSN)
	rdata := bytes.Repeat([]byte{0x5A}, 700)
	good := [][]byte{ack(p.Add(2))}
	good = append(good, readResp(fuzzPMTU, p.Add(3), rdata, 0, false)...)
	good = append(good,
		respOrig(packet.RCAtomicAcknowledge, p.Add(6), packet.SyndromeACKUnlimited, 3, nil, 77),
		ack(p.Add(8)),
		resp(packet.RCRDMAReadResponseOnly, p.Add(9), packet.SyndromeACKUnlimited, 5, nil),
		respOrig(packet.RCAtomicAcknowledge, p.Add(10), packet.ACKSyndrome(3), 6, nil, 78),
		resp(packet.RCRDMAReadResponseOnly, p.Add(11), packet.SyndromeACKUnlimited, 7, nil),
		ack(p.Add(12)))
	f.Add(fuzzInput(good...))
	f.Add(fuzzInput(nak(p, packet.NAKPSNSeqError), ack(p.Add(2))))
	f.Add(fuzzInput(ack(p.Add(2)), readResp(fuzzPMTU, p.Add(3), rdata, 0, false)[0], nak(p.Add(4), packet.NAKPSNSeqError)))
	f.Add(fuzzInput(ack(p.Add(2)), readResp(fuzzPMTU, p.Add(3), rdata, 0, false)[0], readResp(fuzzPMTU, p.Add(3), rdata, 1, true)[0]))
	f.Add(fuzzInput(rnr(p.Add(1), 3), rnr(p.Add(1), 3), rnr(p.Add(1), 3)))
	f.Add(fuzzInput(ack(p.Add(7))))
	f.Add(fuzzInput(nak(p.Add(3), packet.NAKRemoteAccess)))
	f.Add(fuzzInput(resp(packet.RCRDMAReadResponseMiddle, p.Add(4), 0, 0, rdata[:fuzzPMTU])))
	if sr {
		hole := func(a, b packet.PSN) []byte {
			return resp(packet.RCAcknowledge, a, packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(b), nil)
		}
		rs := readResp(fuzzPMTU, p.Add(3), rdata, 0, false)
		f.Add(fuzzInput(hole(p, p.Add(2)), ack(p.Add(12))))
		f.Add(fuzzInput(hole(p.Add(3), p.Add(6)), rs[2], rs[1], rs[0]))
		f.Add(fuzzInput(rs[2], ack(p.Add(8)), hole(p.Add(6), p.Add(7)), rs[0]))
		f.Add(fuzzInput(hole(p.Add(1), p.Add(40)), hole(p.Add(12), p.Add(3))))
	}
}

// FuzzReceive feeds arbitrary responses to a requester with one WQE of
// every kind outstanding and checks the invariants after each.
func FuzzReceive(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, false, false, 0, 0) })
}

// FuzzReceiveReads is FuzzReceive with a send queue of READs only, where
// go-back-N places the responses of later READs and re-reads only the
// READs with holes (readahead.go); besides FuzzReceive's invariants, a
// step never sends more request packets than there are READs, plus a
// probe.
func FuzzReceiveReads(f *testing.F) {
	p := packet.PSN(fuzzPSN)
	rdata := bytes.Repeat([]byte{0x3C}, 510)
	r1 := readResp(fuzzPMTU, p, rdata[:300], 0, false)
	r2 := readResp(fuzzPMTU, p.Add(2), rdata[:400], 0, false)
	r3 := resp(packet.RCRDMAReadResponseOnly, p.Add(4), packet.SyndromeACKUnlimited, 3, rdata[:8])
	r4 := resp(packet.RCRDMAReadResponseOnly, p.Add(5), packet.SyndromeACKUnlimited, 4, nil)
	r5 := readResp(fuzzPMTU, p.Add(6), rdata, 0, false)
	f.Add(fuzzInput(r1[0], r1[1], r2[0], r2[1], r3, r4, r5[0], r5[1]))
	f.Add(fuzzInput(r1[0], r2[0], r2[1], r3, r4, r5[0], r5[1], readResp(fuzzPMTU, p, rdata[:300], 1, true)[0]))
	f.Add(fuzzInput(r1[0], r1[1], r2[1], r3, r5[1], r4, readResp(fuzzPMTU, p.Add(2), rdata[:400], 1, false)[0]))
	f.Add(fuzzInput(r2[0], r2[1], r1[0], r1[1], r3, r3, r4, r5[0]))
	f.Add(fuzzInput(r1[0], nak(p.Add(1), packet.NAKPSNSeqError), r1[1]))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, false, true, 0, 0) })
}

// fuzzReadPartsSeeds adds the seed corpus of the targets whose READs go
// in parts of one packet: READ_RESPONSE_ONLY responses in order, out of
// order, twice, after a sequence NAK, and past a missing part.
func fuzzReadPartsSeeds(f *testing.F) {
	p := packet.PSN(fuzzPSN)
	rdata := bytes.Repeat([]byte{0x5A}, 510)
	only := func(psn packet.PSN, b []byte, msn uint32) []byte {
		return resp(packet.RCRDMAReadResponseOnly, psn, packet.SyndromeACKUnlimited, msn, b)
	}
	f.Add(fuzzInput(only(p, rdata[:256], 0), only(p.Add(1), rdata[:44], 1), only(p.Add(2), rdata[:256], 1),
		only(p.Add(3), rdata[:144], 2), only(p.Add(4), rdata[:8], 3)))
	f.Add(fuzzInput(only(p.Add(1), rdata[:44], 1), only(p.Add(3), rdata[:144], 2), only(p, rdata[:256], 2),
		only(p.Add(2), rdata[:256], 2), only(p.Add(4), rdata[:8], 3)))
	f.Add(fuzzInput(only(p.Add(1), rdata[:44], 1), only(p.Add(1), rdata[:44], 1), nak(p.Add(2), packet.NAKPSNSeqError),
		only(p, rdata[:256], 1)))
	f.Add(fuzzInput(only(p.Add(2), rdata[:256], 1), only(p.Add(5), rdata[:256], 1), only(p, rdata[:256], 0)))
}

// FuzzReceiveReadParts is FuzzReceiveReads with every READ asked for in
// parts of one packet, so that the oldest READ keeps the responses after a
// hole and re-reads the hole's part (readparts.go); besides FuzzReceive's
// invariants, a step never sends more requests than there are PSNs
// outstanding, plus a probe.
func FuzzReceiveReadParts(f *testing.F) {
	fuzzReadPartsSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, false, true, 1, 0) })
}

// FuzzReceiveReadPartsWindow is FuzzReceiveReadParts with a window of 3
// PSNs, so that the oldest READ keeps responses after a hole while it is
// still asking for its parts (readFits lets more out as they are placed).
func FuzzReceiveReadPartsWindow(f *testing.F) {
	fuzzReadPartsSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, false, true, 1, 3) })
}

// FuzzReceiveSR is FuzzReceive with selective repeat on: hole reports,
// READ responses in any order, re-reads. Besides FuzzReceive's
// invariants, a step never sends more than twice the PSNs outstanding
// (a go-back-N after an RNR NAK plus the resend list) and a probe, and
// the selective-repeat bookkeeping stays consistent (srCheck).
func FuzzReceiveSR(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, true, false, 0, 0) })
}

// fuzzResponses is the body of the response fuzz targets.
func fuzzResponses(t *testing.T, data []byte, sr, reads bool, parts, window int) {
	h, rg, orig := fuzzSetup(t, sr, reads, parts, window)
	// end is the PSN after the last WQE's (fuzzSetup's comments).
	end := packet.PSN(fuzzPSN).Add(13)
	if reads {
		end = packet.PSN(fuzzPSN).Add(8)
	}
	for len(data) >= 2 {
		n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
		chunk := data[2 : 2+n]
		data = data[2+n:]
		if p, err := packet.Parse(chunk); err == nil {
			h.r.Receive(h.now, p)
		}
		out := int(h.r.highPSN.Diff(h.r.compPSN))
		sent := 0
		for {
			comp := h.r.compPSN
			k := h.r.NextPacket(h.now, h.buf)
			if k == 0 {
				break
			}
			// A request's PSN lies in the send window: not yet
			// acknowledged, and belonging to a posted WQE; without
			// selective repeat, less than Window PSNs past the oldest
			// unacknowledged one (rxe's
			// RXE_MAX_UNACKED_PSNS check in rxe_req.c).
			if p, err := packet.Parse(h.buf[:k]); err != nil {
				t.Fatalf("sent packet does not parse: %v", err)
			} else if psn := p.PSN(); psn.Before(comp) || !psn.Before(end) ||
				!sr && int(psn.Diff(comp)) >= h.r.cfg.Window {
				t.Fatalf("sent PSN %v outside [%v, %v) or window %d", psn, comp, end, h.r.cfg.Window)
			}
			sent++
			if sent > 4*out+64 {
				t.Fatalf("NextPacket does not stop: %d packets for %d PSNs outstanding", sent, out)
			}
		}
		if sr && sent > 2*out+2 {
			t.Fatalf("%d packets sent for %d PSNs outstanding", sent, out)
		}
		if reads && parts == 0 && sent > h.r.Outstanding()+1 {
			t.Fatalf("%d READ requests sent for %d READs outstanding", sent, h.r.Outstanding())
		}
		if parts > 0 && sent > out+1 {
			t.Fatalf("%d READ requests sent for %d PSNs outstanding", sent, out)
		}
		if err := h.r.srCheck(); err != nil {
			t.Fatal(err)
		}
		if h.tm.err != nil {
			t.Fatal(h.tm.err)
		}
		// Without selective repeat every step passes the IB timeout;
		// with it, steps of 50 µs explore the reorder window, the resend
		// intervals and the recovery timer before the IB budget runs out.
		step := 100 * time.Millisecond
		if sr {
			step = 50 * time.Microsecond
		}
		h.now = h.now.Add(step)
		h.r.OnTimeout(h.now)
		if h.r.rdInUse < 0 || h.r.rdInUse > 8 || h.r.Outstanding() < 0 || h.r.Outstanding() > 8 {
			t.Fatalf("rdInUse %d outstanding %d", h.r.rdInUse, h.r.Outstanding())
		}
		if w := h.r.Counters().Recovery.Window; w < 1 || w > h.r.cfg.Window {
			t.Fatalf("window %d outside [1, %d]", w, h.r.cfg.Window)
		}
		if due := h.r.rec.due.When(); !due.IsZero() && due.After(h.now.Add(h.r.ack)) {
			t.Fatalf("recovery timer %v beyond the IB timeout %v", due.Sub(h.now), h.r.ack)
		}
	}
	// Nothing outside the READ and atomic destinations changed.
	for i := range rg.buf {
		writable := false
		for _, w := range fuzzWritable {
			writable = writable || i >= w[0] && i < w[1]
		}
		if !writable && rg.buf[i] != orig[i] {
			t.Fatalf("byte %d of the region written", i)
		}
	}
	h.r.Flush()
	if h.tm.err != nil {
		t.Fatal(h.tm.err)
	}
	if h.r.Outstanding() != 0 {
		t.Fatal("Flush left WQEs")
	}
	// Every WQE (all signaled, IDs 1 to posted) completed once, in order:
	// before the Flush or by it.
	if len(h.cq.wcs) != h.posted {
		t.Fatalf("%d completions for %d WQEs: %v", len(h.cq.wcs), h.posted, h.cq.ids())
	}
	for i, wc := range h.cq.wcs {
		if wc.ID != uint64(i+1) {
			t.Fatalf("completions out of order: %v", h.cq.ids())
		}
	}
}

// FuzzReceiveSRParts is FuzzReceiveSR with every READ asked for in parts
// of one packet, so that the responses of a READ come from several
// requests, each a part the responder may answer with FIRST/ONLY.
func FuzzReceiveSRParts(f *testing.F) {
	fuzzSeeds(f, true)
	fuzzReadPartsSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzResponses(t, data, true, false, 1, 0) })
}
