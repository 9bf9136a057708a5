package flows

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

var (
	hostA = netip.MustParseAddrPort("10.0.0.1:49152")
	hostB = netip.MustParseAddrPort("10.0.0.2:4791")
	t0    = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

// pk is one packet of a hand-written fixture.
type pk struct {
	us      int  // time in microseconds
	fromB   bool // B→A (to QP 0x11) instead of A→B (to QP 0x22)
	op      packet.Opcode
	psn     uint32
	payload int
	ackReq  bool
	syn     packet.Syndrome
	dmaLen  uint32
	qp      uint32 // the BTH destination QP when not 0 (a corrupted one)
	bad     bool   // a packet with a bad ICRC (Packet.BadICRC)
}

// build turns a fixture into Packets, frame numbers from 1.
func build(t testing.TB, ps []pk) []Packet {
	t.Helper()
	var out []Packet
	for i, p := range ps {
		h := packet.Headers{BTH: packet.BTHFields{Opcode: p.op, PKey: 0xFFFF, DestQP: 0x22, PSN: packet.PSN(p.psn), AckReq: p.ackReq}}
		src, dst := hostA, hostB
		if p.fromB {
			h.BTH.DestQP, src, dst = 0x11, hostB, hostA
		}
		if p.qp != 0 {
			h.BTH.DestQP = p.qp
		}
		h.AETH = packet.AETHFields{Syndrome: p.syn, MSN: 1}
		h.RETH = packet.RETHFields{VA: 0x1000, RKey: 7, DMALen: p.dmaLen}
		b := make([]byte, packet.PacketLen(p.op, p.payload))
		// require only on failure: its t.Helper walks the stack, a cost
		// FuzzAnalyze would pay per packet.
		n, err := packet.Build(b, &h, make([]byte, p.payload), nil)
		if err != nil {
			require.NoError(t, err)
		}
		pkt, err := packet.Parse(b[:n])
		if err != nil {
			require.NoError(t, err)
		}
		out = append(out, Packet{Frame: i + 1, Time: t0.Add(time.Duration(p.us) * time.Microsecond), Src: src, Dst: dst, Pkt: pkt, BadICRC: p.bad})
	}
	return out
}

var (
	ack     = packet.SyndromeACKUnlimited
	seqNAK  = packet.NAKSyndrome(packet.NAKPSNSeqError)
	rnr12   = packet.RNRSyndrome(12)
	accNAK  = packet.NAKSyndrome(packet.NAKRemoteAccess)
	lossyRC = []pk{
		{us: 0, op: packet.RCSendFirst, psn: 100, payload: 1024},                   // 1
		{us: 1, op: packet.RCSendMiddle, psn: 101, payload: 1024},                  // 2
		{us: 2, op: packet.RCSendLast, psn: 103, payload: 1024, ackReq: true},      // 3: 102 lost
		{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: seqNAK},     // 4
		{us: 20, op: packet.RCSendMiddle, psn: 102, payload: 1024},                 // 5: rewind
		{us: 21, op: packet.RCSendLast, psn: 103, payload: 1024, ackReq: true},     // 6
		{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 103, syn: ack},        // 7
		{us: 40, op: packet.RCSendOnly, psn: 104, payload: 100, ackReq: true},      // 8
		{us: 50, fromB: true, op: packet.RCAcknowledge, psn: 104, syn: ack},        // 9: RTT 10 µs
		{us: 60, op: packet.RCSendOnly, psn: 105, payload: 100, ackReq: true},      // 10
		{us: 5060, op: packet.RCSendOnly, psn: 105, payload: 100, ackReq: true},    // 11: timeout
		{us: 5070, fromB: true, op: packet.RCAcknowledge, psn: 105, syn: ack},      // 12
		{us: 5100, op: packet.RCSendOnly, psn: 106, payload: 100, ackReq: true},    // 13
		{us: 5110, fromB: true, op: packet.RCAcknowledge, psn: 106, syn: rnr12},    // 14
		{us: 5800, op: packet.RCSendOnly, psn: 106, payload: 100, ackReq: true},    // 15: RNR retry
		{us: 5810, fromB: true, op: packet.RCAcknowledge, psn: 106, syn: ack},      // 16
		{us: 5900, op: packet.RCRDMAWriteOnly, psn: 107, payload: 8, ackReq: true}, // 17
		{us: 5910, fromB: true, op: packet.RCAcknowledge, psn: 107, syn: accNAK},   // 18
	}
	lossyRead = []pk{
		{us: 0, op: packet.RCRDMAReadRequest, psn: 10, dmaLen: 4096, ackReq: true},                  // 1: PSNs 10..13
		{us: 5, fromB: true, op: packet.RCRDMAReadResponseFirst, psn: 10, payload: 1024, syn: ack},  // 2: RTT 5 µs
		{us: 6, fromB: true, op: packet.RCRDMAReadResponseMiddle, psn: 11, payload: 1024},           // 3
		{us: 8, fromB: true, op: packet.RCRDMAReadResponseLast, psn: 13, payload: 1024, syn: ack},   // 4: 12 lost
		{us: 9, op: packet.RCRDMAReadRequest, psn: 12, dmaLen: 2048, ackReq: true},                  // 5: re-read
		{us: 15, fromB: true, op: packet.RCRDMAReadResponseFirst, psn: 12, payload: 1024, syn: ack}, // 6
		{us: 16, fromB: true, op: packet.RCRDMAReadResponseLast, psn: 13, payload: 1024, syn: ack},  // 7
		{us: 20, op: packet.RCSendOnly, psn: 14, payload: 64, ackReq: true},                         // 8
		{us: 25, fromB: true, op: packet.RCAcknowledge, psn: 14, syn: ack},                          // 9: RTT 5 µs
	}
)

func TestLossyRC(t *testing.T) {
	rep := analyse(build(t, lossyRC), Options{Interval: time.Millisecond})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	require.Len(t, c.Flows, 2)
	a, b := c.Flows[0], c.Flows[1]
	require.Equal(t, hostA, a.Src)
	require.Equal(t, 11, a.Packets)
	require.Equal(t, 7, b.Packets)
	require.Equal(t, 5, a.Messages, "FIRST 100, MIDDLE 101, MIDDLE 102, LAST 103; ONLY 104, 105, 106; WRITE 107")
	require.Equal(t, 0, b.Messages)
	require.Equal(t, []int{1, 1, 3, 3}, []int{a.PSNGaps, a.PSNMissing, a.FirstGapFrame, a.PSNRewinds})
	require.Equal(t, NAKs{SequenceError: 1, RNR: 1, RemoteAccess: 1, RNRTimers: []uint8{12}}, b.NAKs)
	require.Equal(t, NAKs{}, a.NAKs)
	us := func(n int) Duration { return Duration(time.Duration(n) * time.Microsecond) }
	require.Equal(t, []Recovery{
		{Cause: CauseSequenceNAK, Requester: hostA, FirstFrame: 3, LastFrame: 7, Duration: us(28), RewindFrame: 5, PSN: 102, HighPSN: 103, Rounds: 1, Resent: 2},
		{Cause: CauseTimeout, Requester: hostA, FirstFrame: 10, LastFrame: 12, Duration: us(5010), RewindFrame: 11, PSN: 105, HighPSN: 105, Rounds: 1, Resent: 1, Silence: us(5000), FirstSentFrame: 10},
		{Cause: CauseRNR, Requester: hostA, FirstFrame: 13, LastFrame: 16, Duration: us(710), RewindFrame: 15, PSN: 106, HighPSN: 106, Rounds: 1, Resent: 1, RNRTimer: 12, FirstSentFrame: 13},
	}, stripStart(c.Recoveries))
	require.Equal(t, RTT{Samples: 1, Min: us(10), Median: us(10), Max: us(10)}, c.RTT)
	require.Len(t, c.Goodput, 6)
	require.Equal(t, 4*1024+2*100, c.Goodput[0].Bytes, "100, 101, 103, 102 once each; 104; 105 once")
	require.Equal(t, 100+8, c.Goodput[5].Bytes)
	require.Equal(t, []string{
		"Requests lost before the capture point (1 PSN in 1 gap, first at frame 3); request PSN 105 (frame 10) sent again on a timer though the capture holds it: it or its ACK was lost after the capture point, or the ACK came after the requester's timer fired; recovered by 1 resend after PSN sequence error NAKs in 28 µs, 1 RNR wait (timer code 12) of 710 µs and 1 ACK timeout of 5.0 ms at frame 11.",
		"Remote access error NAK at frame 18 (PSN 107): the requester's QP goes to the error state and flushes its outstanding work requests.",
	}, c.Explain)
}

func TestLossyRead(t *testing.T) {
	rep := analyse(build(t, lossyRead), Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	require.Equal(t, 1024, c.PMTU, "inferred from FIRST and MIDDLE payloads")
	a, b := c.Flows[0], c.Flows[1]
	require.Equal(t, []int{2, 0, 0, 1}, []int{a.Messages, a.PSNGaps, a.PSNMissing, a.PSNRewinds}, "READ 10 and SEND 14; the re-read is behind ePSN")
	require.Equal(t, []int{1, 1, 1, 4, 1}, []int{b.Messages, b.PSNGaps, b.PSNMissing, b.FirstGapFrame, b.PSNRewinds})
	require.Equal(t, []Recovery{{Cause: CauseImpliedNAK, Requester: hostA, FirstFrame: 4, LastFrame: 7,
		Duration: Duration(8 * time.Microsecond), RewindFrame: 5, PSN: 12, HighPSN: 13, Rounds: 1, Resent: 1, Read: true}}, stripStart(c.Recoveries))
	require.Equal(t, 2, c.RTT.Samples)
	require.Equal(t, Duration(5*time.Microsecond), c.RTT.Max)
	require.Equal(t, []string{"1 READ response lost before the capture point (1 gap, first at frame 4); recovered by 1 re-read after implied NAKs in 8.0 µs."}, c.Explain)
}

func stripStart(eps []Recovery) []Recovery {
	out := make([]Recovery, len(eps))
	for i, ep := range eps {
		ep.start = time.Time{}
		out[i] = ep
	}
	return out
}

func TestCleanFlowHasNoExplanation(t *testing.T) {
	var ps []pk
	for i := range 10 {
		ps = append(ps, pk{us: 10 * i, op: packet.RCSendOnly, psn: uint32(packet.PSNMask - 4 + i), payload: 64, ackReq: true},
			pk{us: 10*i + 3, fromB: true, op: packet.RCAcknowledge, psn: uint32(packet.PSN(packet.PSNMask - 4).Add(i)), syn: ack})
	}
	ps[0].psn = packet.PSNMask - 4
	rep := analyse(build(t, ps), Options{})
	c := rep.Connections[0]
	require.Equal(t, 10, c.Flows[0].Messages, "PSNs wrap at 2^24 without a gap or rewind")
	require.Zero(t, c.Flows[0].PSNGaps+c.Flows[0].PSNRewinds+c.Flows[1].PSNGaps+c.Flows[1].PSNRewinds)
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
	require.Equal(t, 10, c.RTT.Samples)
}

func TestJSONIsValid(t *testing.T) {
	rep := analyse(build(t, lossyRC), Options{})
	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	var v map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &v))
	conn := v["connections"].([]any)[0].(map[string]any)
	require.Equal(t, "10.0.0.1:49152", conn["flows"].([]any)[0].(map[string]any)["src"])
	require.Equal(t, 0.000028, conn["recoveries"].([]any)[0].(map[string]any)["duration"])
}

// TestHoleReport: a selective-repeat hole report (NAK code 0x10) is
// counted as such, and is not explained as a fatal NAK. It is the
// responder asking for the PSNs of a hole again, so the resend that
// follows it is a selective resend, with the report as its evidence,
// whether the requester then goes on at its frontier or has nothing more
// to send (a round that skips nothing); the explanation and the note the
// ladder labels the resent packet with say so.
func TestHoleReport(t *testing.T) {
	hole := packet.NAKSyndrome(packet.NAKSelectiveRepeat)
	rep := analyse(build(t, []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},                // 1
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64, ackReq: true},  // 2: 101 lost
		{us: 5, fromB: true, op: packet.RCAcknowledge, psn: 101, syn: hole},       // 3: hole [101, 102)
		{us: 10, op: packet.RCRDMAWriteOnly, psn: 101, payload: 64, ackReq: true}, // 4: resent
		{us: 15, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: ack},       // 5
	}), Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	require.Equal(t, NAKs{HoleReports: 1}, c.Flows[1].NAKs)
	require.Equal(t, 3, c.Flows[0].Messages, "102, held behind the hole, executes once 101 fills it")
	for _, e := range c.Explain {
		require.NotContains(t, e, "error state")
	}
	require.Len(t, c.Recoveries, 1)
	ep := c.Recoveries[0]
	require.Equal(t, CauseSelective, ep.Cause)
	require.Equal(t, []int{2, 4}, []int{ep.FirstFrame, ep.RewindFrame})
	require.Equal(t, CauseSelective, rep.Notes[Ref{Frame: 4}].Cause)
	require.Equal(t, []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 2); recovered by 1 selective resend in 14 µs."}, c.Explain)
}

// TestMessagesUnderSelectiveRepeat: a responder that sends
// selective-repeat reports executes the requests it held behind a hole
// once the hole is filled, so they count as messages; one that does not
// (go-back-N) drops them, and they count only when sent again.
func TestMessagesUnderSelectiveRepeat(t *testing.T) {
	hole := packet.NAKSyndrome(packet.NAKSelectiveRepeat)
	stream := func(report packet.Syndrome) []pk {
		return []pk{
			{us: 0, op: packet.RCSendFirst, psn: 100, payload: 1024},                // 1
			{us: 1, op: packet.RCSendLast, psn: 102, payload: 10},                   // 2: 101 lost
			{us: 2, op: packet.RCRDMAReadRequest, psn: 103, dmaLen: 3000},           // 3: PSNs 103..105
			{us: 3, op: packet.RCSendOnly, psn: 106, payload: 10},                   // 4
			{us: 4, op: packet.RCSendOnly, psn: 106, payload: 10},                   // 5: a second copy
			{us: 5, op: packet.RCRDMAWriteOnly, psn: 108, payload: 8, ackReq: true}, // 6: 107 lost
			{us: 9, fromB: true, op: packet.RCAcknowledge, psn: 101, syn: report},   // 7
			{us: 20, op: packet.RCSendMiddle, psn: 101, payload: 1024},              // 8: 101 resent
			{us: 21, op: packet.RCSendOnly, psn: 107, payload: 10, ackReq: true},    // 9: 107 resent
			{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 108, syn: ack},     // 10
		}
	}
	for _, tc := range []struct {
		name   string
		report packet.Syndrome
		want   int
	}{
		// SEND 100..102, READ 103, SEND 106, SEND 107, WRITE 108.
		{"selective repeat", hole, 5},
		// Only 100 and the resent 101 are accepted in order: 102 and all
		// after it were dropped and never sent again in this capture.
		{"go-back-N", seqNAK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, stream(tc.report)), Options{PMTU: 1024})
			require.Len(t, rep.Connections, 1)
			require.Equal(t, tc.want, rep.Connections[0].Flows[0].Messages)
		})
	}
}

// TestSelectiveRepeatAheadPassed: a request kept past the expected PSN
// that a READ's span then covers is forgotten, so that the PSN 2^24 later
// (the same map key) is not taken for it.
func TestSelectiveRepeatAheadPassed(t *testing.T) {
	h := &half{sr: true, started: true, ePSN: 10}
	f := &Flow{}
	only := packet.MaskStart | packet.MaskEnd
	h.message(f, &rec{psn: 12, mask: only}, 12) // kept: 10 and 11 missing
	h.message(f, &rec{psn: 10, mask: only}, 15) // a READ of PSNs 10..15 covers 12
	require.Equal(t, packet.PSN(16), h.ePSN)
	require.Empty(t, h.ahead, "12 is behind ePSN")
	require.Equal(t, 1, f.Messages)
	// 2^24 PSNs later ePSN is at 11 again; 12 arrives only after 11.
	h.ePSN = 11
	h.message(f, &rec{psn: 11, mask: only}, 11)
	require.Equal(t, 2, f.Messages)
	require.Equal(t, packet.PSN(12), h.ePSN, "no request kept for 12 in the PSNs' last turn")
	for q := packet.PSN(20); q < 20+5000; q++ {
		h.message(f, &rec{psn: q, mask: only}, q)
	}
	require.Len(t, h.ahead, 5000)
	h.message(f, &rec{psn: 12, mask: only}, 20+4999) // a READ whose span covers them all
	require.Empty(t, h.ahead)
	require.Equal(t, packet.PSN(20+5000), h.ePSN)
	require.Equal(t, 3, f.Messages)
}

// TestGoBackNLossInResendRound: a go-back-N requester resends in PSN
// order, so a PSN that a resend round skips was lost before the capture
// point; its copy from before the rewind (which the responder discarded
// behind the first hole) does not make it a loss after the capture point.
// A selective-repeat round skips what arrived, and is no gap.
func TestGoBackNLossInResendRound(t *testing.T) {
	rounds := func(report packet.Syndrome) []pk {
		return []pk{
			{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 8},                // 1
			{us: 1, op: packet.RCRDMAWriteOnly, psn: 101, payload: 8},                // 2
			{us: 2, op: packet.RCRDMAWriteOnly, psn: 103, payload: 8},                // 3: 102 lost
			{us: 3, op: packet.RCRDMAWriteOnly, psn: 104, payload: 8, ackReq: true},  // 4
			{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: report},   // 5
			{us: 20, op: packet.RCRDMAWriteOnly, psn: 102, payload: 8},               // 6: resend round
			{us: 21, op: packet.RCRDMAWriteOnly, psn: 104, payload: 8, ackReq: true}, // 7: 103 skipped
			{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 103, syn: report},   // 8
			{us: 40, op: packet.RCRDMAWriteOnly, psn: 103, payload: 8},               // 9
			{us: 41, op: packet.RCRDMAWriteOnly, psn: 104, payload: 8, ackReq: true}, // 10
			{us: 50, fromB: true, op: packet.RCAcknowledge, psn: 104, syn: ack},      // 11
		}
	}
	c := analyse(build(t, rounds(seqNAK)), Options{}).Connections[0]
	a := c.Flows[0]
	require.Equal(t, []int{2, 2, 3}, []int{a.PSNGaps, a.PSNMissing, a.FirstGapFrame}, "102 in the first round, 103 in the resend")
	require.Len(t, c.Recoveries, 2)
	for _, ep := range c.Recoveries {
		require.Equal(t, CauseSequenceNAK, ep.Cause)
		require.Zero(t, ep.FirstSentFrame, "%+v", ep)
	}
	require.Len(t, c.Explain, 1)
	require.Contains(t, c.Explain[0], "Requests lost before the capture point (2 PSNs in 2 gaps, first at frame 3); recovered by 2 resends after PSN sequence error NAKs")
	require.NotContains(t, c.Explain[0], "after the capture point")

	// Under selective repeat a resend round sends only the holes, so the
	// same skip of 103 in frame 7 is no gap.
	c = analyse(build(t, rounds(packet.NAKSyndrome(packet.NAKSelectiveRepeat))), Options{}).Connections[0]
	require.Equal(t, 1, c.Flows[0].PSNGaps)
}

// TestGoBackNJumpToNAK: a resend round that goes on at the PSN of a
// sequence NAK that came during it went there on the NAK (rxe req_retry
// starts over at the NAK's PSN): the PSNs it passed are not counted lost.
func TestGoBackNJumpToNAK(t *testing.T) {
	c := analyse(build(t, []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 8},                // 1
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 101, payload: 8},                // 2
		{us: 2, op: packet.RCRDMAWriteOnly, psn: 103, payload: 8},                // 3: 102 lost
		{us: 3, op: packet.RCRDMAWriteOnly, psn: 104, payload: 8},                // 4
		{us: 4, op: packet.RCRDMAWriteOnly, psn: 105, payload: 8, ackReq: true},  // 5
		{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: seqNAK},   // 6
		{us: 20, op: packet.RCRDMAWriteOnly, psn: 102, payload: 8},               // 7: the round
		{us: 21, op: packet.RCRDMAWriteOnly, psn: 103, payload: 8},               // 8
		{us: 25, fromB: true, op: packet.RCAcknowledge, psn: 105, syn: seqNAK},   // 9
		{us: 26, op: packet.RCRDMAWriteOnly, psn: 105, payload: 8, ackReq: true}, // 10: on at 105
		{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 105, syn: ack},      // 11
	}), Options{}).Connections[0]
	a := c.Flows[0]
	require.Equal(t, []int{1, 1}, []int{a.PSNGaps, a.PSNMissing}, "only 102, lost in the first round")
}

// TestSelectiveRepeatReads: a selective-repeat requester places READ
// responses in any order and re-reads only the holes, one at a time, then
// goes on at the frontier (docs/sr-requester.md). Its re-reads and the
// jumps back to the frontier are no gaps in the request stream, and a
// READ is one response message however its responses came, whether the
// capture holds the lost response (lost after the capture point: the
// re-read's answer is a copy) or not.
func TestSelectiveRepeatReads(t *testing.T) {
	resp := func(us int, op packet.Opcode, psn uint32) pk {
		return pk{us: us, fromB: true, op: op, psn: psn, payload: 1024, syn: ack}
	}
	const (
		first, middle, last, only = packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle,
			packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly
	)
	rd := func(us int, psn, n uint32) pk {
		return pk{us: us, op: packet.RCRDMAReadRequest, psn: psn, dmaLen: n * 1024, ackReq: true}
	}
	for _, tc := range []struct {
		name      string
		ps        []pk
		lostAfter bool // the capture holds a response that was re-read
	}{
		{"two holes lost before the capture point", []pk{
			rd(0, 10, 4), rd(1, 14, 4), // PSNs 10..13, 14..17
			resp(5, first, 10), resp(6, middle, 11), resp(7, last, 13), // 12 lost
			resp(8, first, 14), resp(9, last, 17), resp(9, middle, 16), // 15 lost; 17 before 16
			rd(10, 12, 1), rd(11, 15, 1), // the two holes
			rd(12, 18, 2), // on at the frontier
			resp(15, only, 12), resp(16, only, 15), resp(17, first, 18), resp(18, last, 19),
		}, false},
		{"a response lost after the capture point", []pk{
			rd(0, 10, 4), rd(1, 14, 4),
			resp(5, first, 10), resp(6, middle, 11), resp(6, middle, 12), resp(7, last, 13),
			resp(8, first, 14), resp(8, middle, 15), resp(8, middle, 16), resp(9, last, 17),
			rd(10, 12, 1), // 12 was lost after the capture point
			rd(12, 18, 2),
			resp(15, only, 12), resp(17, first, 18), resp(18, last, 19),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, tc.ps), Options{PMTU: 1024})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			req, res := c.Flows[0], c.Flows[1]
			require.Equal(t, 3, req.Messages, "READs 10, 14 and 18")
			require.Zero(t, req.PSNGaps, "the re-reads and the frontier are no gaps: %+v", req)
			require.Equal(t, 3, res.Messages, "one per READ: %+v", res)
			for _, e := range c.Explain {
				require.NotContains(t, e, "Requests lost before the capture point")
			}
			if tc.lostAfter {
				require.Contains(t, strings.Join(c.Explain, " "), "lost after the capture point")
			}
		})
	}
}

// TestProbes: a requester that resends one packet and goes on at the PSN
// after the highest it sent is probing (docs/recovery.md): the PSNs it
// passed are no loss once an ACK acknowledges them with no NAK into them,
// and a resend of a request that an ACK in the capture had acknowledged
// is not blamed on the request.
func TestProbes(t *testing.T) {
	w := func(us int, psn uint32) pk {
		return pk{us: us, op: packet.RCRDMAWriteOnly, psn: psn, payload: 8, ackReq: true}
	}
	a := func(us int, psn uint32, syn packet.Syndrome) pk {
		return pk{us: us, fromB: true, op: packet.RCAcknowledge, psn: psn, syn: syn}
	}
	tests := []struct {
		name         string
		ps           []pk
		gaps         []int // PSNGaps, PSNMissing, FirstGapFrame
		cause        Cause
		acked, first int // AckedFrame, FirstSentFrame
		lostAfter    bool
		explain      string
	}{{
		name: "slow answer",
		ps: []pk{w(0, 100), a(10, 100, ack), w(20, 101), w(21, 102), w(22, 103),
			w(500, 101), // 6: a probe after 478 µs, below the 1 ms timeout threshold
			w(501, 104), // 7: on at the frontier, past 102 and 103
			a(700, 103, ack), a(710, 104, ack)},
		gaps: []int{0, 0, 0}, cause: CauseProbe, first: 3, lostAfter: true,
		explain: "Request PSN 101 (frame 3) sent again on a timer though the capture holds it: it or its ACK was lost after the capture point, or the ACK came after the requester's timer fired; recovered by 1 probe (one packet sent again, then on at the highest PSN; at frame 6).",
	}, {
		name: "acknowledged before",
		ps: []pk{w(0, 100), a(10, 100, ack), w(20, 101), w(21, 102), a(30, 102, ack),
			w(900, 101), // 6: acknowledged at frame 5
			w(901, 103), a(910, 103, ack)},
		gaps: []int{0, 0, 0}, cause: CauseProbe, acked: 5, first: 3,
		explain: "Request PSN 101 (frame 6) sent again though the capture holds its ACK (frame 5): the ACK was lost after the capture point or came after the requester's timer fired; recovered by 1 probe (one packet sent again, then on at the highest PSN; at frame 6).",
	}, {
		name: "NAK into the skipped PSNs",
		ps: []pk{w(0, 100), a(10, 100, ack), w(20, 101), w(21, 102), w(22, 103),
			w(500, 101), w(501, 104),
			a(510, 102, seqNAK), // 8: the responder never had 102
			w(520, 102), w(521, 103), w(522, 104), a(530, 104, ack)},
		gaps: []int{1, 2, 7}, cause: CauseProbe, first: 3, lostAfter: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyse(build(t, tt.ps), Options{})
			c := rep.Connections[0]
			f := c.Flows[0]
			require.Equal(t, tt.gaps, []int{f.PSNGaps, f.PSNMissing, f.FirstGapFrame})
			require.NotEmpty(t, c.Recoveries)
			ep := c.Recoveries[0]
			require.Equal(t, tt.cause, ep.Cause)
			require.True(t, ep.Probe)
			require.Equal(t, []int{tt.acked, tt.first}, []int{ep.AckedFrame, ep.FirstSentFrame})
			require.Equal(t, tt.lostAfter, rep.Notes[Ref{Frame: tt.first}] != nil && rep.Notes[Ref{Frame: tt.first}].LostAfter)
			if n := rep.Notes[Ref{Frame: 7}]; tt.gaps[0] == 0 && n != nil {
				require.Zero(t, n.Gap, "no lost PSNs drawn before frame 7")
			}
			if tt.explain != "" {
				require.Equal(t, []string{tt.explain}, c.Explain)
			}
		})
	}
}
