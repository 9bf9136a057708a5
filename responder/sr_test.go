package responder

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// withSR turns selective repeat on with an out-of-order byte limit (0: the
// default).
func withSR(limit int) cfgMod {
	return func(c *Config) { c.SelectiveRepeat, c.OOOLimit = true, limit }
}

// srReq is one request packet of a script, kept as bytes so that it can be
// delivered in any order and more than once.
type srReq struct {
	psn packet.PSN
	b   []byte
}

// script builds request packets as a requester would number them.
type script struct {
	t    testing.TB
	mtu  int
	psn  packet.PSN
	reqs []srReq
	wqes int // receive WQEs the script's messages take
}

func (s *script) add(op packet.Opcode, payload []byte, mods ...reqMod) {
	b := make([]byte, 8192)
	p := build(s.t, b, op, s.psn, payload, mods...)
	s.reqs = append(s.reqs, srReq{psn: s.psn, b: b[:p.Len()]})
	s.psn = s.psn.Next()
}

// message segments data like harness.message.
func (s *script) message(ops msgOps, data []byte, mods ...reqMod) {
	if len(data) <= s.mtu {
		s.add(ops.only, data, append(mods, ackReq)...)
		return
	}
	for off := 0; off < len(data); off += s.mtu {
		end := min(off+s.mtu, len(data))
		op, ms := ops.middle, mods
		switch {
		case off == 0:
			op = ops.first
		case end == len(data):
			op, ms = ops.last, append(mods, ackReq)
		}
		s.add(op, data[off:end], ms...)
	}
}

// read adds a READ request, which uses as many PSNs as its responses.
func (s *script) read(va uint64, length uint32) {
	s.add(packet.RCRDMAReadRequest, nil, reth(va, rkey, length))
	s.psn = s.psn.Add(max(1, (int(length)+s.mtu-1)/s.mtu) - 1)
}

// mixedScript is a workload of every kind of request, 256-byte PMTU,
// starting at start: a 3-packet SEND, a 3-packet WRITE, a 3-PSN READ, two
// atomics, a WRITE WITH IMMEDIATE, a SEND with immediate and a 2-PSN READ.
func mixedScript(t testing.TB, start packet.PSN) *script {
	s := &script{t: t, mtu: 256, psn: start}
	s.mixed()
	return s
}

// mixed appends mixedScript's requests; they take three receive WQEs.
func (s *script) mixed() {
	s.wqes += 3
	s.message(sendOps, pattern(600, 1))
	s.message(writeOps, pattern(700, 2), reth(rva+1000, rkey, 700))
	s.read(rva+5000, 600)
	s.add(packet.RCFetchAdd, nil, atomicETH(rva+64, rkey, 5, 0), ackReq)
	s.add(packet.RCCompareSwap, nil, atomicETH(rva+72, rkey, 9, 0), ackReq)
	s.message(writeImmOps, pattern(100, 3), reth(rva+3000, rkey, 100), imm(0xABCD))
	s.message(sendImmOps, pattern(300, 4), imm(0x1234))
	s.read(rva+1000, 400)
}

// srOutcome is what a run leaves behind, independent of the order of
// arrival: memory, completions, expected PSN and MSN, and the data of each
// READ response and atomic ACK by PSN.
type srOutcome struct {
	remote, local []byte
	wcs           []verbs.WC
	epsn          packet.PSN
	msn           uint32
	reads         map[packet.PSN][]byte
	atomics       map[packet.PSN]uint64
	lastACK       packet.PSN // the newest PSN a response acknowledged
	acked         int
}

// srRun prepares a harness (remote memory seeded, three receive WQEs),
// delivers the script's packets in order idx, and returns the outcome.
func srRun(t *testing.T, s *script, idx []int, mods ...cfgMod) (*harness, srOutcome) {
	h, o := srStart(t, s, mods...)
	deliver(t, h, o, s, idx...)
	return h, o.end(t, h)
}

// srStart prepares a harness for a script.
func srStart(t *testing.T, s *script, mods ...cfgMod) (*harness, *srOutcome) {
	h := newHarness(t, append([]cfgMod{withPMTU(s.mtu), withPSN(s.reqs[0].psn)}, mods...)...)
	copy(h.remote.buf, pattern(len(h.remote.buf), 9))
	for i := range s.wqes {
		h.postRecv(uint64(i+1), 700)
	}
	return h, &srOutcome{reads: map[packet.PSN][]byte{}, atomics: map[packet.PSN]uint64{}}
}

// end completes the outcome with the harness's final state.
func (o *srOutcome) end(t *testing.T, h *harness) srOutcome {
	o.remote, o.local = h.remote.buf, h.local.buf
	o.wcs, o.epsn, o.msn = h.cq.wcs, h.r.EPSN(), h.r.MSN()
	_, failed := h.r.Failed()
	require.False(t, failed)
	return *o
}

func (o *srOutcome) record(t *testing.T, q packet.Packet) {
	if a := q.AETH(); (a == nil || a.Syndrome().IsACK()) && (o.acked == 0 || q.PSN().After(o.lastACK)) {
		o.lastACK, o.acked = q.PSN(), 1
	}
	switch {
	case q.Opcode() == packet.RCAtomicAcknowledge:
		if v, ok := o.atomics[q.PSN()]; ok {
			require.Equal(t, v, q.AtomicAckETH().Orig(), "replayed atomic ACK differs")
		}
		o.atomics[q.PSN()] = q.AtomicAckETH().Orig()
	case q.Opcode() != packet.RCAcknowledge:
		if b, ok := o.reads[q.PSN()]; ok {
			require.Equal(t, b, q.Payload(), "resent READ response differs")
		}
		o.reads[q.PSN()] = slices.Clone(q.Payload())
	case q.AETH().Syndrome() == packet.NAKSyndrome(packet.NAKSelectiveRepeat):
	default:
		require.True(t, q.AETH().Syndrome().IsACK(), "unexpected NAK %v", q.AETH().Syndrome())
	}
}

// orders returns delivery orders of n packets: in order, first last,
// reversed, adjacent pairs swapped, every third held back, with
// duplicates, and seeded shuffles.
func orders(n int) map[string][]int {
	seq := func() []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	}
	out := map[string][]int{"in_order": seq()}
	s := seq()
	out["first_last"] = append(s[1:], 0)
	s = seq()
	slices.Reverse(s)
	out["reversed"] = s
	s = seq()
	for i := 0; i+1 < n; i += 2 {
		s[i], s[i+1] = s[i+1], s[i]
	}
	out["pairs_swapped"] = s
	var kept, late []int
	for i := range n {
		if i%3 == 1 {
			late = append(late, i)
		} else {
			kept = append(kept, i)
		}
	}
	out["every_third_late"] = append(kept, late...)
	s = seq()
	out["duplicates"] = append(append(append([]int{}, s[2:]...), s...), s[:5]...)
	for seed := range uint64(6) {
		s = seq()
		rng := rand.New(rand.NewPCG(seed, 13))
		rng.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
		if seed%2 == 1 { // and some duplicated at random
			for range n / 3 {
				s = append(s, rng.IntN(n))
			}
		}
		out[fmt.Sprintf("shuffle_%d", seed)] = s
	}
	return out
}

// Any order of arrival leaves the same memory, completions, READ data and
// atomic results as in-order delivery without selective repeat, executes
// each atomic once, and ends with an ACK of the last PSN.
func TestSRAnyOrderSameOutcome(t *testing.T) {
	for _, start := range []packet.PSN{100, 0xFFFFF8} {
		s := mixedScript(t, start)
		_, want := srRun(t, s, orders(len(s.reqs))["in_order"])
		require.Equal(t, s.psn, want.epsn)
		require.Len(t, want.wcs, 3)
		require.Len(t, want.atomics, 2)
		for name, idx := range orders(len(s.reqs)) {
			t.Run(fmt.Sprintf("start=%#x/%s", start, name), func(t *testing.T) {
				h, got := srRun(t, s, idx, withSR(0))
				sameOutcome(t, want, got)
				require.Equal(t, want.epsn.Add(-1), got.lastACK)
				c := h.r.Counters()
				require.Zero(t, c.OOOBuffered)
				require.Zero(t, c.OOODropped)
				require.Zero(t, h.r.ooo.n)
				require.LessOrEqual(t, h.r.ooo.allocated(), DefaultOOOLimit)
			})
		}
	}
}

// With selective repeat on and every packet in order, the wire is byte for
// byte what it is without it.
func TestSRInOrderByteIdentical(t *testing.T) {
	s := mixedScript(t, 100)
	var outs [2][][]byte
	for k, mods := range [][]cfgMod{nil, {withSR(0)}} {
		h := newHarness(t, append([]cfgMod{withPMTU(256)}, mods...)...)
		for i := range 3 {
			h.postRecv(uint64(i+1), 700)
		}
		for _, rq := range s.reqs {
			p, err := packet.Parse(rq.b)
			require.NoError(t, err)
			h.r.Receive(t0, p)
			for _, q := range h.drain() {
				outs[k] = append(outs[k], q.Bytes())
			}
		}
		require.Zero(t, h.r.ooo.allocated(), "nothing allocated for the buffer")
	}
	require.NotEmpty(t, outs[0])
	require.Equal(t, outs[0], outs[1])
}

// isProgress reports whether p is a progress report: a hole report naming
// no hole (queueProgress).
func isProgress(p packet.Packet) bool {
	return p.Opcode() == packet.RCAcknowledge && p.AETH().Syndrome() == packet.NAKSyndrome(packet.NAKSelectiveRepeat) &&
		p.AETH().MSN() == uint32(p.PSN())
}

func holeCheck(first, past packet.PSN) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		expect(t, p, opcode(packet.RCAcknowledge), psnIs(first),
			aeth(packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(past)))
	}
}

// One hole report per new hole, its BTH PSN the first missing PSN and its
// MSN field the first PSN held after it; a drain ends with an ACK of the
// new ePSN−1.
func TestSRHoleReports(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	w := func(psn packet.PSN) {
		h.rx(packet.RCRDMAWriteOnly, psn, []byte{byte(psn)}, reth(rva+uint64(psn), rkey, 1))
	}
	w(102) // hole 100..101
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], holeCheck(100, 102))
	w(103) // extends the run: no report
	w(101) // inside the hole: no report (three held, SRReorderPackets)
	require.Empty(t, h.drain())
	w(106) // new hole 104..105; the fourth request past the hole at 100
	// draws a progress report too (SRReorderPackets)
	w(110) // new hole 107..109
	out = h.drain()
	require.Len(t, out, 3)
	expect(t, out[0], holeCheck(104, 106))
	require.True(t, isProgress(out[1]))
	expect(t, out[1], holeCheck(107, 107))
	expect(t, out[2], holeCheck(107, 110))
	c := h.r.Counters()
	require.Equal(t, uint64(3), c.SRHolesReported)
	require.Equal(t, uint64(2+2+3), c.SRHolePSNs)
	require.Equal(t, uint64(5), c.OOOBuffered)
	require.Zero(t, c.OutOfSeqRequest, "no PSN Sequence Error NAK under selective repeat")
	require.Equal(t, c.SRHolesReported, h.r.LossSignals(), "each hole report sent is a sign of loss")

	w(100) // fills the first hole: 100..103 execute, ACK 103
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 103, 4)
	require.Equal(t, packet.PSN(104), h.r.EPSN())
	w(104)
	w(105) // 105 fills the hole before 106: 104..106 execute
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 106, 7)
	for _, p := range []packet.PSN{100, 101, 102, 103, 104, 105, 106} {
		require.Equal(t, byte(p), h.remoteBytes(rva+uint64(p), 1)[0])
	}
	require.Zero(t, h.remoteBytes(rva+110, 1)[0], "110 waits for its hole")
	c = h.r.Counters()
	require.Equal(t, uint64(1), c.OOOBuffered)
	require.Equal(t, uint64(5), c.OOOPeak)
	require.Equal(t, uint64(5), c.OOOHeld, "104 and 105 came in order and were not held")
}

// A hole report goes out next, ahead of a READ train still being sent.
func TestSRHoleReportAheadOfTrain(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 1024)) // 100..103
	require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))                 // 100 leaves
	h.rx(packet.RCRDMAWriteOnly, 105, []byte{1}, reth(rva+9000, rkey, 1), ackReq)
	out := h.drain()
	require.Len(t, out, 4)
	expect(t, out[0], holeCheck(104, 105))
	for i, p := range out[1:] {
		expect(t, p, psnIs(packet.PSN(101+i)))
	}
}

// While the hole at ePSN persists, it is reported again after every
// SRReReport further out-of-order arrivals, duplicates and drops
// included; a new ePSN starts the count afresh.
func TestSRReReportCadence(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	send := func(psn packet.PSN) { h.rx(packet.RCRDMAWriteOnly, psn, nil, reth(0, 0, 0)) }
	var reports, progress []packet.Packet
	pull := func() {
		for _, p := range h.drain() {
			switch {
			case isProgress(p):
				progress = append(progress, p)
			case p.AETH().Syndrome() == packet.NAKSyndrome(packet.NAKSelectiveRepeat):
				reports = append(reports, p)
			}
		}
	}
	arrivals := 0
	for psn := packet.PSN(101); psn <= 150; psn++ {
		send(psn)
		arrivals++
		pull()
		if psn == 110 {
			send(110) // a duplicate counts as an arrival
			arrivals++
			pull()
		}
	}
	// Arrival 1 opens the hole; arrivals 17, 33 and 49 re-report it.
	require.Equal(t, 51, arrivals)
	require.Len(t, reports, 4)
	for _, p := range reports {
		expect(t, p, holeCheck(100, 101))
	}
	require.Equal(t, uint64(1), h.r.Counters().OOODuplicates)
	require.Equal(t, uint64(1), h.r.Counters().SRHolePSNs)
	// The SRReorderPackets-th request held past the hole draws a progress
	// report, and so does every SRProgressEvery-th held after that (the
	// duplicate is not held): each names the PSN past the highest one
	// held.
	require.Len(t, progress, 1+(50-SRReorderPackets)/SRProgressEvery)
	for i, p := range progress {
		held := SRReorderPackets + i*SRProgressEvery
		expect(t, p, holeCheck(packet.PSN(101+held), packet.PSN(101+held)))
	}
	require.Equal(t, uint64(len(progress)), h.r.Counters().SRProgressReports)

	// Holes at 100 and 111; once 100 fills, the hole at the new ePSN 111
	// (reported when it opened) is re-reported after 16 further arrivals.
	h = newHarness(t, withPMTU(256), withSR(0))
	reports = nil
	for psn := packet.PSN(101); psn <= 120; psn++ {
		if psn != 111 {
			send(psn)
		}
	}
	pull()
	require.Len(t, reports, 3)
	expect(t, reports[0], holeCheck(100, 101))
	expect(t, reports[1], holeCheck(111, 112))
	expect(t, reports[2], holeCheck(100, 101)) // the 17th arrival, 118
	send(100)
	require.Equal(t, packet.PSN(111), h.r.EPSN())
	reports = nil
	for psn := packet.PSN(121); psn < 121+SRReReport; psn++ {
		send(psn)
		pull()
		require.Equal(t, psn == 120+SRReReport, len(reports) == 1, "psn %v", psn)
	}
	expect(t, reports[0], holeCheck(111, 112))
}

// A flood of future PSNs from a hostile peer: the memory never exceeds
// OOOLimit, the packets that do not fit are dropped and counted, the
// output queue stays bounded, and the hole still fills.
func TestSRFloodBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		mtu   int
	}{
		{"default_4096", 0, 4096},
		{"default_256", 0, 256},
		{"tiny", 3 * (1024 + oooOverhead), 1024},
		{"below_one_slot", 100, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withPMTU(tc.mtu), withSR(tc.limit))
			limit := tc.limit
			if limit == 0 {
				limit = DefaultOOOLimit
			}
			rng := rand.New(rand.NewPCG(1, 2))
			payload := pattern(tc.mtu, 1)
			sent := 0
			for i := range 20000 {
				var psn packet.PSN
				switch i % 3 {
				case 0: // anywhere ahead
					psn = packet.PSN(100).Add(1 + rng.IntN(packet.PSNWindow-1))
				case 1: // inside the window
					psn = packet.PSN(100).Add(1 + rng.IntN(2048))
				default: // a huge READ, spanning more PSNs than the window
					psn = packet.PSN(100).Add(1 + rng.IntN(64))
					h.rx(packet.RCRDMAReadRequest, psn, nil, reth(rva, rkey, 1<<31))
					sent++
					continue
				}
				h.rx(packet.RCRDMAWriteOnly, psn, payload, reth(rva, rkey, uint32(tc.mtu)))
				sent++
				require.LessOrEqual(t, h.r.ooo.allocated(), limit)
				require.LessOrEqual(t, h.r.q.Len(), h.r.q.Max())
				if i%97 == 0 {
					h.drain()
				}
			}
			c := h.r.Counters()
			require.LessOrEqual(t, h.r.ooo.allocated(), limit)
			require.LessOrEqual(t, c.OOOBytesPeak, uint64(limit))
			require.LessOrEqual(t, c.OOOPeak, uint64(limit/(tc.mtu+oooOverhead)))
			require.Equal(t, uint64(sent), c.OOODropped+c.OOODuplicates+c.OOOBuffered+c.Dropped)
			require.NotZero(t, c.OOODropped)
			require.Equal(t, packet.PSN(100), h.r.EPSN())
			// The hole at 100 still fills; the responder stays usable.
			h.drain()
			h.rx(packet.RCRDMAWriteOnly, 100, payload, reth(rva, rkey, uint32(tc.mtu)), ackReq)
			h.drain()
			require.True(t, h.r.EPSN().After(100))
		})
	}
}

// Atomics held out of order execute exactly once: a copy arriving while
// one is held is dropped, a copy arriving after execution is replayed.
func TestSRAtomicsOnce(t *testing.T) {
	h := newHarness(t, withSR(0))
	va := uint64(rva + 8)
	fa := func(psn packet.PSN) { h.rx(packet.RCFetchAdd, psn, nil, atomicETH(va, rkey, 1, 0)) }
	fa(101)
	fa(102)
	fa(101)
	fa(102)
	require.Equal(t, uint64(2), h.r.Counters().OOODuplicates)
	require.Zero(t, binary.NativeEndian.Uint64(h.remoteBytes(va, 8)))
	h.drain()
	fa(100)
	out := h.drain()
	require.Len(t, out, 3)
	for i, p := range out {
		expect(t, p, opcode(packet.RCAtomicAcknowledge), psnIs(packet.PSN(100+i)), atomicOrig(uint64(i)))
	}
	fa(101) // after execution: a duplicate, replayed from its resource
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCAtomicAcknowledge), psnIs(101), atomicOrig(1))
	require.Equal(t, uint64(3), binary.NativeEndian.Uint64(h.remoteBytes(va, 8)))
}

// A buffered request that turns out invalid when it executes is NAKed as
// IBTA NAKs it in order, for its own PSN, and the responder fails; the
// requests held behind it never execute.
func TestSRInvalidAtExecution(t *testing.T) {
	h := newHarness(t, withSR(0))
	h.rx(packet.RCRDMAWriteOnly, 101, []byte{7}, reth(rva, 0xBAD, 1), ackReq)
	h.rx(packet.RCRDMAWriteOnly, 102, []byte{8}, reth(rva+1, rkey, 1), ackReq)
	h.rx(packet.RCRDMAWriteFirst, 103, pattern(1024, 0), reth(rva+8, rkey, 2048)) // valid on its own
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], holeCheck(100, 101))
	_, failed := h.r.Failed()
	require.False(t, failed, "nothing is checked before execution")
	h.rx(packet.RCRDMAWriteOnly, 100, []byte{6}, reth(rva+2, rkey, 1), ackReq)
	out = h.drain()
	require.Len(t, out, 2)
	expectACK(t, out[0], 100, 1)
	expect(t, out[1], psnIs(101), syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
	status, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRemAccessErr, status)
	require.Equal(t, byte(6), h.remoteBytes(rva+2, 1)[0])
	require.Zero(t, h.remoteBytes(rva+1, 1)[0], "102 never executes")
	require.Zero(t, h.r.Counters().OOOBuffered, "failing empties the buffer")
	require.Equal(t, uint64(2), h.r.Counters().OOODropped)
	h.r.Flush()
	require.Zero(t, h.r.ooo.n)
	require.Zero(t, h.r.ooo.allocated(), "Flush frees the buffer")
	require.Zero(t, h.r.Counters().OOOBuffered)
}

// An RNR at the execution of a buffered SEND: the RNR NAK is for that PSN,
// the buffer is emptied and later PSNs are dropped until the requester
// resends from the NAKed PSN, as after an RNR NAK without selective repeat.
func TestSRRNRAtExecution(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	h.postRecv(1, 100)
	h.rx(packet.RCSendOnly, 101, pattern(10, 1), ackReq) // no WQE left for it
	h.rx(packet.RCSendOnly, 102, pattern(10, 2), ackReq)
	h.drain()
	h.rx(packet.RCSendOnly, 100, pattern(10, 0), ackReq)
	out := h.drain()
	require.Len(t, out, 2)
	expectACK(t, out[0], 100, 1)
	expect(t, out[1], psnIs(101), syndrome(packet.RNRSyndrome(12)))
	require.Zero(t, h.r.ooo.n, "the buffer is emptied")
	require.Equal(t, uint64(1), h.r.Counters().OOODropped)
	h.rx(packet.RCSendOnly, 102, pattern(10, 2), ackReq) // in flight behind the NAK
	require.Empty(t, h.drain())
	require.Zero(t, h.r.ooo.n)
	// The requester resends from 101 after the RNR delay.
	h.postRecv(2, 100)
	s3 := h.postRecv(3, 100)
	h.rx(packet.RCSendOnly, 101, pattern(10, 1), ackReq)
	h.rx(packet.RCSendOnly, 102, pattern(10, 2), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 102, 3)
	require.Len(t, h.cq.wcs, 3)
	for i, wc := range h.cq.wcs {
		require.Equal(t, uint64(i+1), wc.ID)
		require.Equal(t, verbs.WCSuccess, wc.Status)
		require.Equal(t, uint32(10), wc.ByteLen)
	}
	require.Equal(t, pattern(10, 2), h.gather(s3, 10), "the last SEND's data")
}

// A drain that fills the output queue stops and resumes from NextPacket.
func TestSRDrainResumesWhenQueueFull(t *testing.T) {
	h := newHarness(t, withSR(0))
	const n = 60
	va := uint64(rva + 16)
	for i := 1; i < n; i++ {
		h.rx(packet.RCFetchAdd, packet.PSN(100+i), nil, atomicETH(va, rkey, 1, 0))
	}
	h.drain()
	h.rx(packet.RCFetchAdd, 100, nil, atomicETH(va, rkey, 1, 0))
	require.Less(t, h.r.EPSN().Diff(100+n), int32(0), "the queue bound stopped the drain")
	require.True(t, h.r.Pending())
	out := h.drain()
	require.Equal(t, packet.PSN(100+n), h.r.EPSN())
	var acks int
	for _, p := range out {
		if p.Opcode() == packet.RCAtomicAcknowledge {
			expect(t, p, atomicOrig(uint64(p.PSN().Diff(100))))
			acks++
		}
	}
	require.Equal(t, n, acks)
	require.Equal(t, uint64(n), binary.NativeEndian.Uint64(h.remoteBytes(va, 8)))
}

// Packets held inside a READ's PSN span, or executed from another copy,
// are passed over and counted.
func TestSRPassedOver(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva, rkey, 1024)) // 101..104
	h.rx(packet.RCRDMAWriteOnly, 103, []byte{1}, reth(rva+9000, rkey, 1), ackReq)
	h.rx(packet.RCRDMAWriteOnly, 105, []byte{2}, reth(rva+9001, rkey, 1), ackReq)
	h.drain()
	h.rx(packet.RCRDMAWriteOnly, 100, []byte{3}, reth(rva+9002, rkey, 1), ackReq)
	out := h.drain()
	require.Len(t, out, 6) // ACK 100, four READ responses, ACK 105
	expectACK(t, out[0], 100, 1)
	expectACK(t, out[5], 105, 3)
	require.Equal(t, packet.PSN(106), h.r.EPSN())
	require.Equal(t, []byte{0, 2, 3}, h.remoteBytes(rva+9000, 3))
	require.Equal(t, uint64(1), h.r.Counters().OOODropped)
	require.Zero(t, h.r.ooo.n)
}

// srReadMTU is the path MTU of srReadTrain.
const srReadMTU = 256

// srReadTrain returns a selective-repeat responder that has received a
// READ of 8 packets (PSNs 100..107) of a pattern drawn from seed, and the
// pattern.
func srReadTrain(t *testing.T, seed byte) (*harness, []byte) {
	h := newHarness(t, withPMTU(srReadMTU), withSR(0))
	data := pattern(8*srReadMTU, seed)
	copy(h.remoteBytes(rva, len(data)), data)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
	return h, data
}

// A duplicate READ under selective repeat is served as an extra stream of
// just its range, ahead of the train being sent, which continues where it
// was; a duplicate the train has still to answer is dropped.
func TestSRDuplicateReadSubRange(t *testing.T) {
	const mtu = srReadMTU
	h, data := srReadTrain(t, 5)
	h.rx(packet.RCRDMAWriteOnly, 108, []byte{1}, reth(rva+9000, rkey, 1), ackReq)
	var out []packet.Packet
	for range 4 { // 100..103 leave
		n := h.r.NextPacket(t0, h.rxbuf)
		p, err := packet.Parse(slices.Clone(h.rxbuf[:n]))
		require.NoError(t, err)
		out = append(out, p)
	}
	// Responses 101 and 102 were lost: re-read them.
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, 2*mtu))
	// A re-read of what the train has still to send is answered by it.
	h.rx(packet.RCRDMAReadRequest, 105, nil, reth(rva+5*mtu, rkey, mtu))
	out = append(out, h.drain()...)
	require.Len(t, out, 4+2+4+1)
	expect(t, out[4], opcode(packet.RCRDMAReadResponseFirst), psnIs(101), payloadIs(data[mtu:2*mtu]))
	expect(t, out[5], opcode(packet.RCRDMAReadResponseLast), psnIs(102), payloadIs(data[2*mtu:3*mtu]))
	expect(t, out[6], opcode(packet.RCRDMAReadResponseMiddle), psnIs(104), payloadIs(data[4*mtu:5*mtu]))
	expect(t, out[9], opcode(packet.RCRDMAReadResponseLast), psnIs(107), payloadIs(data[7*mtu:]))
	expectACK(t, out[10], 108, 2)
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.ReadReplays)
	require.Equal(t, uint64(1), c.ReadsCovered)
	require.Zero(t, c.ReadRestarts)
	require.Equal(t, packet.PSN(109), h.r.EPSN())
}

// A re-read that starts before the train's next PSN and runs to the end
// of the READ (a requester that heard nothing for its recovery timeout
// while the responder's train waited) is served only up to where the
// train takes over: every PSN goes out once more at most.
func TestSRDuplicateReadClippedToTrain(t *testing.T) {
	const mtu = srReadMTU
	h, data := srReadTrain(t, 7)
	for range 3 { // 100..102 leave
		h.r.NextPacket(t0, h.rxbuf)
	}
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, uint32(len(data)-mtu)))
	out := h.drain()
	require.Len(t, out, 2+5, "101..102 again, then the train's 103..107")
	expect(t, out[0], opcode(packet.RCRDMAReadResponseFirst), psnIs(101), payloadIs(data[mtu:2*mtu]))
	expect(t, out[1], opcode(packet.RCRDMAReadResponseLast), psnIs(102), payloadIs(data[2*mtu:3*mtu]))
	for i, p := range out[2:] {
		expect(t, p, psnIs(packet.PSN(103+i)), payloadIs(data[(3+i)*mtu:(4+i)*mtu]))
	}
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.ReadReplays)
	require.Equal(t, uint64(1), c.ReadsClipped)
	require.Equal(t, uint64(2), c.ReadResponsesResent)

	// A re-read that ends before the train's next PSN is served whole.
	h2, data2 := srReadTrain(t, 8)
	for range 3 {
		h2.r.NextPacket(t0, h2.rxbuf)
	}
	h2.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu))
	out = h2.drain()
	require.Len(t, out, 1+5)
	expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(101), payloadIs(data2[mtu:2*mtu]))
	require.Zero(t, h2.r.Counters().ReadsClipped)
}

// Re-reads of several ranges that arrive before the first one's extra
// stream left are each served: an extra stream covers only its own range,
// so a later re-read past its end is not taken as covered by it (and
// dropped, which left the requester waiting for its recovery timer). A
// re-read inside a queued extra stream's range is covered.
func TestSRDuplicateReadsBurst(t *testing.T) {
	const mtu = srReadMTU
	h, data := srReadTrain(t, 9)
	require.Len(t, h.drain(), 8)
	// Responses 101, 103..104 and 106 were lost: three re-reads at once,
	// and one inside the second's range.
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu))
	h.rx(packet.RCRDMAReadRequest, 103, nil, reth(rva+3*mtu, rkey, 2*mtu))
	h.rx(packet.RCRDMAReadRequest, 104, nil, reth(rva+4*mtu, rkey, mtu))
	h.rx(packet.RCRDMAReadRequest, 106, nil, reth(rva+6*mtu, rkey, mtu))
	out := h.drain()
	got := map[packet.PSN][]byte{}
	for _, p := range out {
		require.NotContains(t, got, p.PSN(), "PSN answered twice")
		got[p.PSN()] = p.Payload()
	}
	require.Len(t, got, 4, "PSNs answered")
	for _, k := range []int{1, 3, 4, 6} {
		require.Equal(t, data[k*mtu:(k+1)*mtu], got[packet.PSN(100+k)], "response %d", 100+k)
	}
	c := h.r.Counters()
	require.Equal(t, uint64(3), c.ReadReplays)
	require.Equal(t, uint64(4), c.ReadResponsesResent, "one per PSN served again")
	require.Equal(t, uint64(1), c.ReadsCovered)
	require.Zero(t, c.DuplicateDropped)
}

// A duplicate of a whole READ while its train is being sent (a requester
// that heard none of its responses took the request for lost) is covered
// by the train: the responses already sent are not sent twice. Once the
// train has left, the first duplicate of the whole READ is dropped (its
// responses are taken to be on their way) and the second is served.
func TestSRDuplicateWholeReadDuringTrain(t *testing.T) {
	const mtu = srReadMTU
	h, data := srReadTrain(t, 3)
	// 100..102 leave.
	for range 3 {
		h.r.NextPacket(t0, h.rxbuf)
	}
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
	out := h.drain()
	require.Equal(t, 5, len(out), "the train's rest, nothing twice")
	for i, p := range out {
		expect(t, p, psnIs(packet.PSN(103+i)), payloadIs(data[(3+i)*mtu:(4+i)*mtu]))
	}
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.ReadsCovered)
	require.Zero(t, c.ReadReplays)
	require.Zero(t, c.ReadResponsesResent)

	// The train has left: the first duplicate of the whole READ is
	// dropped (its responses are taken to be on their way), the second
	// is served.
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
	require.Empty(t, h.drain())
	require.Equal(t, uint64(2), h.r.Counters().ReadsCovered)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
	out = h.drain()
	require.Len(t, out, 8)
	expect(t, out[0], opcode(packet.RCRDMAReadResponseFirst), psnIs(100), payloadIs(data[:mtu]))
	require.Equal(t, uint64(1), h.r.Counters().ReadReplays)
	require.Equal(t, uint64(8), h.r.Counters().ReadResponsesResent)
}

// The first duplicate of a whole single-packet READ after its response
// left is served, not dropped as a multi-packet READ's is: one response
// lost is as likely as one on its way (a whole duplicate of a longer READ
// needs all of them lost), and serving it costs one packet. A requester
// that lost the response and found it lost from the answers after it
// asks once, and gets it a round trip later instead of after another
// interval. Two-packet READs keep the drop.
func TestSRDuplicateWholeSinglePacketRead(t *testing.T) {
	const mtu = srReadMTU
	for _, tc := range []struct {
		name   string
		pkts   int
		served bool
	}{
		{name: "one-packet", pkts: 1, served: true},
		{name: "two-packet", pkts: 2, served: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withPMTU(mtu), withSR(0))
			data := pattern(tc.pkts*mtu, 4)
			copy(h.remoteBytes(rva, len(data)), data)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
			require.Len(t, h.drain(), tc.pkts, "the train")
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
			out := h.drain()
			c := h.r.Counters()
			if !tc.served {
				require.Empty(t, out)
				require.Equal(t, uint64(1), c.ReadsCovered)
				require.Zero(t, c.ReadReplays)
				return
			}
			require.Len(t, out, 1)
			expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(100), payloadIs(data))
			require.Zero(t, c.ReadsCovered)
			require.Equal(t, uint64(1), c.ReadReplays)
			require.Equal(t, uint64(1), c.ReadResponsesResent)
		})
	}
}

// PSN wrap-around: holes and buffered packets across 2^24.
func TestSRWrap(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0), withPSN(0xFFFFFD))
	w := func(psn packet.PSN) {
		h.rx(packet.RCRDMAWriteOnly, psn, []byte{byte(psn) | 0x80}, reth(rva+uint64(psn&0xF), rkey, 1), ackReq)
	}
	w(1)
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], holeCheck(0xFFFFFD, 1))
	w(0xFFFFFF)
	w(2)
	w(0xFFFFFE) // the fourth held: a progress report (SRReorderPackets)
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], holeCheck(3, 3))
	w(0xFFFFFD) // FFFFFD..FFFFFF execute; 0 is missing
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 0xFFFFFF, 3)
	w(0)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 2, 6)
	require.Equal(t, packet.PSN(3), h.r.EPSN())
	for _, p := range []packet.PSN{0xFFFFFD, 0xFFFFFE, 0xFFFFFF, 0, 1, 2} {
		require.Equal(t, byte(p)|0x80, h.remoteBytes(rva+uint64(p&0xF), 1)[0])
	}
}

// lossyRequester models a selective-repeat requester driving the
// responder over a link that loses and reorders requests and loses ACKs
// and hole reports (READ responses and atomic ACKs arrive): it sends in
// PSN order within a 64-PSN window, resends the requests of each hole
// report it receives, and on a timeout (no progress for 30 ticks) resends
// the oldest unacknowledged request.
type lossyRequester struct {
	t             *testing.T
	s             *script
	h             *harness
	o             *srOutcome
	rng           *rand.Rand
	loss, reorder float64

	byPSN   map[packet.PSN]int
	next    int        // the next new request
	acked   packet.PSN // newest PSN acknowledged
	resend  []int
	delayed []byte // a request the link delivers after the next one
	idle    int

	lost, resent, timeouts, delays int
}

func (l *lossyRequester) tick() {
	var i int
	switch {
	case len(l.resend) > 0:
		i, l.resend = l.resend[0], l.resend[1:]
		l.resent++
	case l.next < len(l.s.reqs) && l.s.reqs[l.next].psn.Diff(l.acked) <= 64:
		i = l.next
		l.next++
	default:
		if l.delayed != nil {
			l.deliver(l.delayed)
			l.delayed = nil
		}
		if l.idle++; l.idle >= 30 {
			l.idle, l.timeouts = 0, l.timeouts+1
			for k, rq := range l.s.reqs {
				if rq.psn.After(l.acked) {
					l.resend = append(l.resend, k)
					break
				}
			}
		}
		return
	}
	switch b := l.s.reqs[i].b; {
	case l.rng.Float64() < l.loss:
		l.lost++
	case l.delayed == nil && l.rng.Float64() < l.reorder:
		l.delayed = b
		l.delays++
	default:
		l.deliver(b)
		if l.delayed != nil {
			l.deliver(l.delayed)
			l.delayed = nil
		}
	}
}

func (l *lossyRequester) deliver(b []byte) {
	p, err := packet.Parse(b)
	require.NoError(l.t, err)
	l.h.r.Receive(t0, p)
	for _, q := range l.h.drain() {
		a := q.AETH()
		if q.Opcode() == packet.RCAcknowledge && l.rng.Float64() < l.loss {
			continue // an ACK or hole report lost
		}
		l.o.record(l.t, q)
		switch {
		case a != nil && a.Syndrome() == packet.NAKSyndrome(packet.NAKSelectiveRepeat):
			for psn := q.PSN(); psn.Before(packet.PSN(a.MSN())); psn = psn.Next() {
				if k, ok := l.byPSN[psn]; ok && !slices.Contains(l.resend, k) {
					l.resend = append(l.resend, k)
				}
			}
		case q.PSN().After(l.acked):
			l.acked, l.idle = q.PSN(), 0
		}
	}
}

// Over a lossy, reordering link a requester that resends only what the
// hole reports name (and the oldest request on a timeout) completes, with
// the outcome of in-order delivery.
func TestSRLossyLink(t *testing.T) {
	s := &script{t: t, mtu: 256, psn: 0xFFFF00}
	for range 20 {
		s.mixed()
	}
	_, want := srRun(t, s, orders(len(s.reqs))["in_order"])
	for _, tc := range []struct{ loss, reorder float64 }{
		{0.01, 0}, {0.05, 0}, {0.2, 0}, {0.01, 0.02}, {0.05, 0.1}, {0.2, 0.2},
	} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("loss=%v/reorder=%v/seed=%d", tc.loss, tc.reorder, seed), func(t *testing.T) {
				h, o := srStart(t, s, withSR(0))
				l := &lossyRequester{t: t, s: s, h: h, o: o, rng: rand.New(rand.NewPCG(seed, 7)),
					loss: tc.loss, reorder: tc.reorder, byPSN: map[packet.PSN]int{}, acked: s.reqs[0].psn.Add(-1)}
				for k, rq := range s.reqs {
					l.byPSN[rq.psn] = k
				}
				last := s.psn.Add(-1)
				for n := 0; l.acked != last; n++ {
					require.Less(t, n, 100*len(s.reqs), "no completion")
					l.tick()
				}
				got := o.end(t, h)
				require.Equal(t, want.remote, got.remote)
				require.Equal(t, want.local, got.local)
				require.Equal(t, want.wcs, got.wcs)
				require.Equal(t, want.reads, got.reads)
				require.Equal(t, want.atomics, got.atomics)
				c := h.r.Counters()
				require.Zero(t, c.OutOfSeqRequest)
				require.Zero(t, c.OOODropped)
				// Each resend answers a loss (the hole reports name only
				// lost PSNs), a reordered packet or a timeout.
				require.LessOrEqual(t, l.resent, l.lost+l.delays+l.timeouts)
				t.Logf("requests %d lost %d resent %d timeouts %d; holes %d (%d PSNs), peak %d",
					len(s.reqs), l.lost, l.resent, l.timeouts, c.SRHolesReported, c.SRHolePSNs, c.OOOPeak)
			})
		}
	}
}

// With the default limit a whole 128-PSN window of full 4096-byte packets
// behind one lost packet is held, in slots allocated as they are needed.
func TestSRFullWindowFits(t *testing.T) {
	h := newHarness(t, withPMTU(4096), withSR(0))
	payload := pattern(4096, 3)
	for i := 127; i > 0; i-- { // the worst order: everything waits for 100
		h.rx(packet.RCRDMAWriteOnly, packet.PSN(100+i), payload, reth(rva, rkey, 4096))
	}
	out := h.drain()
	// Progress reports, each brought up to date while it was the newest
	// report queued, so never two in a row.
	var holes []packet.Packet
	progress := 0
	for i, p := range out {
		if isProgress(p) {
			expect(t, p, holeCheck(228, 228))
			require.False(t, i > 0 && isProgress(out[i-1]), "two progress reports in a row")
			progress++
			continue
		}
		holes = append(holes, p)
	}
	require.Positive(t, progress)
	require.LessOrEqual(t, progress, 127/SRProgressEvery)
	out = holes
	require.Len(t, out, 1+126/SRReReport) // the report, then re-reports
	expect(t, out[0], holeCheck(100, 227))
	expect(t, out[1], holeCheck(100, 227-SRReReport))
	h.rx(packet.RCRDMAWriteOnly, 100, payload, reth(rva, rkey, 4096))
	out = h.drain()
	require.Len(t, out, 1)
	c := h.r.Counters()
	require.Zero(t, c.OOODropped)
	require.Equal(t, uint64(127), c.OOOPeak)
	require.Equal(t, uint64(127), c.OOOHeld)
	require.Equal(t, uint64(127*(packet.BTHSize+packet.RETHSize+4096+packet.ICRCSize)), c.OOOBytesPeak)
	require.Equal(t, 127*(4096+oooOverhead), h.r.ooo.allocated(), "slots allocated as needed")
	require.Equal(t, packet.PSN(228), h.r.EPSN())
	expectACK(t, out[0], 227, 128)
}

// A hole report still queued when its hole fills (reordering within one
// receive batch) is withdrawn; one for a hole still open stays.
func TestSRHoleReportWithdrawn(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	w := func(psn packet.PSN) {
		h.rx(packet.RCRDMAWriteOnly, psn, []byte{byte(psn)}, reth(rva+uint64(psn), rkey, 1), ackReq)
	}
	w(101) // hole [100, 101)
	w(103) // hole [102, 103)
	w(100) // fills the first: 100, 101 execute
	out := h.drain()
	require.Len(t, out, 2)
	expect(t, out[0], holeCheck(102, 103))
	expectACK(t, out[1], 101, 2)
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.SRHolesReported)
	require.Equal(t, uint64(1), c.SRHolesFilled)
	w(102)
	out = h.drain()
	require.Len(t, out, 1)
	expectACK(t, out[0], 103, 4)
}

// A held request that fails when a drain resumed by NextPacket executes
// it fails the responder there; its NAK is the last packet.
func TestSRFailureInResumedDrain(t *testing.T) {
	h := newHarness(t, withSR(0))
	const n = 40
	va := uint64(rva + 16)
	for i := 1; i < n; i++ {
		h.rx(packet.RCFetchAdd, packet.PSN(100+i), nil, atomicETH(va, rkey, 1, 0))
	}
	h.rx(packet.RCRDMAWriteOnly, 100+n, []byte{1}, reth(rva, 0xBAD, 1), ackReq)
	h.rx(packet.RCFetchAdd, 101+n, nil, atomicETH(va, rkey, 1, 0))
	h.drain()
	h.rx(packet.RCFetchAdd, 100, nil, atomicETH(va, rkey, 1, 0))
	_, failed := h.r.Failed()
	require.False(t, failed, "the drain stopped before the bad request")
	out := h.drain()
	status, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRemAccessErr, status)
	expect(t, out[len(out)-1], psnIs(100+n), syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
	require.Equal(t, uint64(n), binary.NativeEndian.Uint64(h.remoteBytes(va, 8)), "the atomic after it never runs")
	require.Zero(t, h.r.Counters().OOOBuffered)
}

// TestSRDrainStopsOnRNR: under selective repeat, SENDs 101–103 are held
// behind a hole at 100 with two receive WQEs posted. When 100 arrives the
// drain executes 100 and 101, and 102 finds no WQE: the responder answers
// the hole report, the ACK of 101 and the RNR NAK of 102, and nothing
// after it. It used to queue a second ACK of 101 behind the RNR NAK.
func TestSRDrainStopsOnRNR(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	h.postRecv(1, 100)
	h.postRecv(2, 100)
	h.rx(packet.RCSendOnly, 101, pattern(10, 1), ackReq)
	h.rx(packet.RCSendOnly, 102, pattern(10, 2), ackReq)
	h.rx(packet.RCSendOnly, 103, pattern(10, 3), ackReq)
	h.drain()
	h.rx(packet.RCSendOnly, 100, pattern(10, 0), ackReq)
	out := h.drain()
	require.NotEmpty(t, out)
	last := out[len(out)-1]
	require.Equal(t, packet.RCAcknowledge, last.Opcode())
	require.Equal(t, packet.SyndromeTypeRNR, last.AETH().Syndrome().Type(), "the last packet is the RNR NAK")
	require.Equal(t, packet.PSN(102), last.PSN())
	acks := 0
	for _, p := range out {
		if p.Opcode() == packet.RCAcknowledge && p.AETH().Syndrome().IsACK() && p.PSN() == 101 {
			acks++
		}
	}
	require.Equal(t, 1, acks, "one ACK of 101")
	require.Equal(t, packet.PSN(102), h.r.EPSN())
}

// TestSRWithdrawnReportKeepsReadCount: withdrawing a filled hole report
// (withdrawFilled) keeps the count of READ response streams queued right,
// whatever is kept: here the ACK of the request that filled the hole and
// the train of the READ held behind it, which the drain executed. While
// the train is queued the responder reports StateReadReply and a SEND's
// completion waits for it; once it has gone a SEND completes at once.
func TestSRWithdrawnReportKeepsReadCount(t *testing.T) {
	const mtu = 1024
	h := newHarness(t, withSR(0))
	h.postRecv(7, 64)
	h.postRecv(8, 64)
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva, rkey, 2*mtu)) // a hole at 100
	h.rx(packet.RCRDMAWriteOnly, 100, pattern(8, 0), reth(rva+8192, rkey, 8), ackReq)
	require.Equal(t, packet.PSN(103), h.r.EPSN())
	require.Equal(t, uint64(1), h.r.Counters().SRHolesFilled, "the hole report was withdrawn")
	require.Equal(t, StateReadReply, h.r.State())
	h.rx(packet.RCSendOnly, 103, pattern(20, 0), ackReq)
	require.Empty(t, h.cq.wcs, "the SEND's completion waits for the train")
	out := h.drain()
	require.Len(t, out, 4)
	expectACK(t, out[0], 100, 1)
	expect(t, out[1], opcode(packet.RCRDMAReadResponseFirst), psnIs(101))
	expect(t, out[2], opcode(packet.RCRDMAReadResponseLast), psnIs(102))
	expectACK(t, out[3], 103, 3)
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, StateGetReq, h.r.State())
	h.rx(packet.RCSendOnly, 104, pattern(20, 0), ackReq)
	require.Len(t, h.cq.wcs, 2, "no READ response stream queued: completed at once")
	for i, wc := range h.cq.wcs {
		require.Equal(t, uint64(7+i), wc.ID)
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
}

// TestSRHeldCompletionsAfterWithdrawnReport: a completion held behind a
// re-read's extra stream is posted as the stream leaves, ahead of the hole
// report queued after the stream (TestSRHeldCompletionsPassReports); a
// drain that fills the hole withdraws the report, and the requests it runs
// complete at once, after it. Their ACKs replace the one queued (ACKs are
// cumulative, IBA 9.7.5.1.1): one ACK goes out, and the completions are
// posted in the order their WQEs were taken.
func TestSRHeldCompletionsAfterWithdrawnReport(t *testing.T) {
	const mtu = srReadMTU
	h, data := srReadTrain(t, 3)
	for id := uint64(7); id < 11; id++ {
		h.postRecv(id, 64)
	}
	require.Len(t, h.drain(), 8)
	h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu)) // re-read of a lost response
	h.rx(packet.RCSendOnly, 108, pattern(20, 0), ackReq)               // held behind the extra stream
	h.rx(packet.RCSendOnly, 110, pattern(20, 0), ackReq)               // a hole at 109
	n := h.r.NextPacket(t0, h.rxbuf)
	require.NotZero(t, n)
	p, err := packet.Parse(h.rxbuf[:n])
	require.NoError(t, err)
	expect(t, p, opcode(packet.RCRDMAReadResponseOnly), psnIs(101), payloadIs(data[mtu:2*mtu]))
	require.Len(t, h.cq.wcs, 1, "posted as the extra stream leaves, ahead of the hole report")
	h.rx(packet.RCSendOnly, 109, pattern(20, 0), ackReq) // fills the hole; 110 runs
	require.Equal(t, uint64(1), h.r.Counters().SRHolesFilled)
	h.rx(packet.RCSendOnly, 111, pattern(20, 0), ackReq)
	out := h.drain()
	require.Len(t, out, 1, "one ACK")
	expectACK(t, out[0], 111, h.r.MSN())
	require.Len(t, h.cq.wcs, 4)
	for i, wc := range h.cq.wcs {
		require.Equal(t, uint64(7+i), wc.ID)
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
}

// TestSRReReadFloodBound: the extra streams of re-reads queued at once
// are bounded by the output queue (4 × max_dest_rd_atomic + 16 items),
// not by max_dest_rd_atomic (docs/sr-responder.md, "Duplicate READ"):
// every re-read of a hole that finds room is served, here twenty at once
// with one responder resource, and one that finds the queue full is
// dropped before it changes anything and counted (Dropped), as any
// request is. A flood of re-reads of distinct holes grows the queue to
// its bound and no further; a re-read dropped in the flood is served once
// the streams have gone.
func TestSRReReadFloodBound(t *testing.T) {
	const mtu = srReadMTU
	const npsn = 64
	h := newHarness(t, withPMTU(mtu), withSR(0), func(c *Config) { c.MaxDestRdAtomic = 1 })
	data := pattern(npsn*mtu, 9)
	copy(h.remoteBytes(rva, len(data)), data)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, uint32(len(data))))
	require.Len(t, h.drain(), npsn)
	bound := h.r.q.Max()
	require.Equal(t, 4*1+16, bound)
	reread := func(k int) {
		h.rx(packet.RCRDMAReadRequest, packet.PSN(100+k), nil, reth(rva+uint64(k*mtu), rkey, mtu))
	}
	for k := 1; k < npsn; k++ {
		reread(k)
		require.LessOrEqual(t, h.r.q.Len(), bound)
	}
	require.Equal(t, bound, h.r.q.Len(), "one extra stream per re-read, up to the bound")
	require.LessOrEqual(t, h.r.q.Slots(), bound, "the queue's memory stays within its bound")
	c := h.r.Counters()
	require.Equal(t, uint64(bound), c.ReadReplays)
	require.Equal(t, uint64(npsn-1-bound), c.Dropped)
	require.Zero(t, c.DuplicateDropped)
	out := h.drain()
	require.Len(t, out, bound, "every re-read queued is served, once")
	for i, p := range out {
		k := 1 + i
		expect(t, p, opcode(packet.RCRDMAReadResponseOnly), psnIs(packet.PSN(100+k)), payloadIs(data[k*mtu:(k+1)*mtu]))
	}
	reread(npsn - 1)
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCRDMAReadResponseOnly), psnIs(100+npsn-1), payloadIs(data[(npsn-1)*mtu:]))
}

// The SRReorderPackets-th request held past a new hole draws a progress
// report, whatever PSNs the requests span: READ requests of 4 PSNs each
// after a lost one are four packets past it at the fourth, not at the
// first (whose PSNs already reach past three). Fewer draw only the hole
// report.
func TestSRProgressAtReorderThreshold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads int // READ requests sent after the missing one at 100
		lost  int // the one of them missing too (-1: none)
	}{
		{"one", 1, -1}, {"three", 3, -1}, {"four", 4, -1}, {"five", 5, -1},
		// The second READ after the missing one is missing too: the
		// requests past it still count for the hole at 100.
		{"four-second-hole", 5, 1}, {"three-second-hole", 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withPMTU(256), withSR(0))
			var out []packet.Packet
			var sent []packet.PSN
			for i := range tc.reads {
				if i == tc.lost {
					continue
				}
				psn := packet.PSN(104 + 4*i)
				sent = append(sent, psn)
				h.rx(packet.RCRDMAReadRequest, psn, nil, reth(rva+uint64(1024*i), rkey, 1024))
				out = append(out, h.drain()...)
			}
			require.NotEmpty(t, out)
			expect(t, out[0], holeCheck(100, 104))
			var progress []packet.Packet
			for _, p := range out[1:] {
				if !isProgress(p) {
					require.GreaterOrEqual(t, tc.lost, 0, "only the hole report and progress reports")
					expect(t, p, holeCheck(packet.PSN(104+4*tc.lost), packet.PSN(108+4*tc.lost)))
					continue
				}
				progress = append(progress, p)
			}
			if len(sent) < SRReorderPackets {
				require.Empty(t, progress)
				return
			}
			require.Len(t, progress, 1, "one per hole")
			past := sent[SRReorderPackets-1].Add(4) // past the fourth request's responses
			expect(t, progress[0], holeCheck(past, past))
		})
	}
}
