package flows

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// READ response fixtures: B answers A's READs, 1024 bytes a packet.
const (
	rFirst  = packet.RCRDMAReadResponseFirst
	rMiddle = packet.RCRDMAReadResponseMiddle
	rLast   = packet.RCRDMAReadResponseLast
	rOnly   = packet.RCRDMAReadResponseOnly
)

// readReq is a READ request of n packets at psn.
func readReq(us int, psn, n uint32) pk {
	return pk{us: us, op: packet.RCRDMAReadRequest, psn: psn, dmaLen: n * 1024, ackReq: true}
}

// readResp is a READ response at psn; FIRST, LAST and ONLY carry an AETH.
func readResp(us int, op packet.Opcode, psn uint32) pk {
	p := pk{us: us, fromB: true, op: op, psn: psn, payload: 1024}
	if op != rMiddle {
		p.syn = ack
	}
	return p
}

// TestReadResponseOrder checks how READ responses below the highest PSN
// seen are classified: a PSN new to the capture that fills a hole, with no
// re-read of it, is a late arrival (reordered: no gap, no rewind, no
// recovery); a PSN seen before is a retransmission (a rewind, no goodput);
// and the responder answering a re-read from inside the READ starts again
// (a rewind; the hole it fills stands as a loss before the capture point).
func TestReadResponseOrder(t *testing.T) {
	type counts struct {
		Messages, PSNGaps, PSNMissing, FirstGapFrame, PSNRewinds, PSNLate int
	}
	tests := []struct {
		name       string
		ps         []pk
		resp       counts  // the response flow's
		req        *counts // the request flow's, when it differs from no trouble
		goodput    int     // payload bytes counted once
		recoveries []Cause
		notes      map[int]Note // every note, by frame
		explain    string
		text       string // a line of WriteText
	}{{
		name: "in order",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), readResp(7, rMiddle, 12), readResp(8, rLast, 13)},
		resp:    counts{Messages: 1},
		goodput: 4 * 1024,
		text:    "messages 1, psn_gaps 0 (0 PSNs missing), psn_rewinds 0\n",
	}, {
		name: "single swap",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 12), readResp(7, rMiddle, 11), readResp(8, rLast, 13)},
		resp:    counts{Messages: 1, PSNLate: 1},
		goodput: 4 * 1024,
		text:    "messages 1, psn_gaps 0 (0 PSNs missing), psn_rewinds 0, psn_late 1\n",
	}, {
		name: "hole filled late",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rLast, 13), readResp(7, rMiddle, 12), readResp(8, rMiddle, 11)},
		resp:    counts{Messages: 1, PSNLate: 2},
		goodput: 4 * 1024,
		text:    "messages 1, psn_gaps 0 (0 PSNs missing), psn_rewinds 0, psn_late 2\n",
	}, {
		name: "hole partly filled late",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rLast, 13), readResp(7, rMiddle, 12)},
		resp:    counts{PSNGaps: 1, PSNMissing: 1, FirstGapFrame: 3, PSNLate: 1},
		goodput: 3 * 1024,
		notes:   map[int]Note{3: {Gap: 1, GapPSN: 11}},
		explain: "1 READ response lost before the capture point (1 gap, first at frame 3).",
	}, {
		name: "first response late",
		ps: []pk{readReq(0, 10, 2), readReq(1, 12, 2),
			readResp(5, rOnly, 9), // answers a READ from before the capture
			readResp(6, rMiddle, 11), readResp(7, rFirst, 10), readResp(8, rFirst, 12), readResp(9, rLast, 13)},
		resp:    counts{Messages: 3, PSNLate: 1},
		goodput: 5 * 1024,
	}, {
		name: "duplicate",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), readResp(7, rMiddle, 11), readResp(8, rMiddle, 12), readResp(9, rLast, 13)},
		resp:    counts{Messages: 1, PSNRewinds: 1},
		goodput: 4 * 1024,
		notes:   map[int]Note{4: {Resent: true}},
		text:    "messages 1, psn_gaps 0 (0 PSNs missing), psn_rewinds 1\n",
	}, {
		// Kernel rxe: the requester sees 13 without 12 (an implied NAK)
		// and reads again from 12 to the end of the READ; the responder
		// answers from 12 again.
		name: "rewind after a re-read",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), readResp(8, rLast, 13), // 12 lost
			readReq(9, 12, 2),
			readResp(15, rFirst, 12), readResp(16, rLast, 13)},
		resp:       counts{Messages: 1, PSNGaps: 1, PSNMissing: 1, FirstGapFrame: 4, PSNRewinds: 1},
		req:        &counts{Messages: 1, PSNRewinds: 1},
		goodput:    4 * 1024,
		recoveries: []Cause{CauseImpliedNAK},
		notes:      map[int]Note{4: {Gap: 1, GapPSN: 12}, 5: {Resent: true, Cause: CauseImpliedNAK}, 7: {Resent: true}},
		explain:    "1 READ response lost before the capture point (1 gap, first at frame 4); recovered by 1 re-read after implied NAKs in 8.0 µs.",
		text:       "messages 1, psn_gaps 1 (1 PSN missing), psn_rewinds 1, first gap at frame 4\n",
	}, {
		// The capture may record the re-read's answer before the request
		// (--pcap records a write once it returned): a FIRST inside the
		// READ's span can only answer a READ from there.
		name: "re-read answered before its request was captured",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), readResp(8, rLast, 13),
			readResp(15, rFirst, 12),
			readReq(15, 12, 2),
			readResp(16, rLast, 13)},
		resp:       counts{Messages: 1, PSNGaps: 1, PSNMissing: 1, FirstGapFrame: 4, PSNRewinds: 1},
		req:        &counts{Messages: 1, PSNRewinds: 1},
		goodput:    4 * 1024,
		recoveries: []Cause{CauseImpliedNAK},
		notes:      map[int]Note{4: {Gap: 1, GapPSN: 12}, 6: {Resent: true, Cause: CauseImpliedNAK}, 7: {Resent: true}},
		explain:    "1 READ response lost before the capture point (1 gap, first at frame 4); recovered by 1 re-read after implied NAKs in 8.0 µs.",
	}, {
		// READ 10 has 11 and 12 swapped and then a duplicate of 10 (the
		// stream goes on at 13, past the highest response: no gap); READ
		// 14 loses 15 before the capture point and is re-read from 15.
		name: "mixed",
		ps: []pk{readReq(0, 10, 4), readReq(1, 14, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 12), readResp(7, rMiddle, 11), readResp(8, rFirst, 10), readResp(9, rLast, 13),
			readResp(10, rFirst, 14), readResp(11, rMiddle, 16), readResp(12, rLast, 17),
			readReq(13, 15, 3),
			readResp(20, rFirst, 15), readResp(21, rMiddle, 16), readResp(22, rLast, 17)},
		resp:       counts{Messages: 2, PSNGaps: 1, PSNMissing: 1, FirstGapFrame: 9, PSNRewinds: 2, PSNLate: 1},
		req:        &counts{Messages: 2, PSNRewinds: 1},
		goodput:    8 * 1024,
		recoveries: []Cause{CauseImpliedNAK},
		notes: map[int]Note{6: {Resent: true}, 9: {Gap: 1, GapPSN: 15}, 11: {Resent: true, Cause: CauseImpliedNAK},
			13: {Resent: true}, 14: {Resent: true}},
		explain: "1 READ response lost before the capture point (1 gap, first at frame 9); recovered by 1 re-read after implied NAKs in 11 µs.",
		text:    "messages 2, psn_gaps 1 (1 PSN missing), psn_rewinds 2, first gap at frame 9, psn_late 1\n",
	}, {
		// Only the responses: the READs were sent before the capture
		// began. A MIDDLE that fills a hole came late; a responder
		// starts again with a FIRST once it finished the READ.
		name: "responses only, swap",
		ps: []pk{
			readResp(5, rFirst, 10), readResp(6, rMiddle, 12), readResp(7, rMiddle, 11), readResp(8, rLast, 13)},
		resp:    counts{PSNLate: 1},
		goodput: 4 * 1024,
	}, {
		name: "responses only, restart",
		ps: []pk{
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), readResp(8, rLast, 13),
			readResp(15, rFirst, 12), readResp(16, rLast, 13)},
		resp:       counts{Messages: 1, PSNGaps: 1, PSNMissing: 1, FirstGapFrame: 3, PSNRewinds: 1},
		goodput:    4 * 1024,
		recoveries: []Cause{CauseImpliedNAK},
		notes:      map[int]Note{3: {Gap: 1, GapPSN: 12}, 4: {Resent: true, Cause: CauseImpliedNAK}, 5: {Resent: true}},
		explain:    "1 READ response lost before the capture point (1 gap, first at frame 3); recovered by 1 re-read after implied NAKs in 8.0 µs.",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyse(build(t, tt.ps), Options{PMTU: 1024})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			var resp, req *Flow
			for _, f := range c.Flows {
				if f.Src == hostB {
					resp = f
				} else {
					req = f
				}
			}
			require.NotNil(t, resp)
			got := func(f *Flow) counts {
				return counts{f.Messages, f.PSNGaps, f.PSNMissing, f.FirstGapFrame, f.PSNRewinds, f.PSNLate}
			}
			require.Equal(t, tt.resp, got(resp), "responses")
			if req != nil {
				want := counts{Messages: req.Packets}
				if tt.req != nil {
					want = *tt.req
				}
				require.Equal(t, want, got(req), "requests")
			}
			var causes []Cause
			for _, ep := range c.Recoveries {
				causes = append(causes, ep.Cause)
				require.True(t, ep.Read)
			}
			require.Equal(t, tt.recoveries, causes)
			notes := map[int]Note{}
			for ref, n := range rep.Notes {
				if *n != (Note{}) {
					notes[ref.Frame] = *n
				}
			}
			if tt.notes == nil {
				tt.notes = map[int]Note{}
			}
			require.Equal(t, tt.notes, notes)
			total := 0
			for _, iv := range c.Goodput {
				total += iv.Bytes
			}
			require.Equal(t, tt.goodput, total)
			if tt.explain == "" {
				require.Empty(t, c.Explain)
			} else {
				require.Equal(t, []string{tt.explain}, c.Explain)
			}

			var text bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			if tt.text != "" {
				require.Contains(t, text.String(), "\n    "+tt.text)
			}
			var js bytes.Buffer
			require.NoError(t, rep.WriteJSON(&js))
			var v struct {
				Connections []struct {
					Flows []struct {
						Src        string `json:"src"`
						PSNGaps    int    `json:"psn_gaps"`
						PSNMissing int    `json:"psn_missing"`
						PSNRewinds int    `json:"psn_rewinds"`
						PSNLate    *int   `json:"psn_late"`
					} `json:"flows"`
				} `json:"connections"`
			}
			require.NoError(t, json.Unmarshal(js.Bytes(), &v))
			for _, f := range v.Connections[0].Flows {
				if f.Src != hostB.String() {
					continue
				}
				require.NotNil(t, f.PSNLate, "psn_late is always present")
				require.Equal(t, []int{tt.resp.PSNGaps, tt.resp.PSNMissing, tt.resp.PSNRewinds, tt.resp.PSNLate},
					[]int{f.PSNGaps, f.PSNMissing, f.PSNRewinds, *f.PSNLate})
			}
		})
	}
}

// TestAcksOutOfOrder checks that ACKs and atomic acknowledgements that
// come out of order are no gap, rewind or late arrival: they acknowledge
// cumulatively and legitimately skip PSNs, and only READ responses are
// checked for order.
func TestAcksOutOfOrder(t *testing.T) {
	w := func(us int, psn uint32) pk {
		return pk{us: us, op: packet.RCRDMAWriteOnly, psn: psn, payload: 8, ackReq: true}
	}
	atomic := func(us int, op packet.Opcode, psn uint32) pk { return pk{us: us, op: op, psn: psn} }
	a := func(us int, op packet.Opcode, psn uint32) pk {
		return pk{us: us, fromB: true, op: op, psn: psn, syn: ack}
	}
	rep := analyse(build(t, []pk{
		w(0, 100), w(1, 101), w(2, 102), w(3, 103),
		a(10, packet.RCAcknowledge, 101), a(11, packet.RCAcknowledge, 100), a(12, packet.RCAcknowledge, 103), a(13, packet.RCAcknowledge, 102),
		atomic(20, packet.RCCompareSwap, 104), atomic(21, packet.RCFetchAdd, 105),
		a(30, packet.RCAtomicAcknowledge, 105), a(31, packet.RCAtomicAcknowledge, 104),
		a(32, packet.RCAtomicAcknowledge, 105), // a duplicate
	}), Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	for _, f := range c.Flows {
		require.Zero(t, f.PSNGaps+f.PSNMissing+f.PSNRewinds+f.PSNLate, "%s", f.Name())
	}
	require.Equal(t, 6, c.Flows[0].Messages)
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
	require.Empty(t, rep.Notes)
}

// TestReorderUDAndUC checks the other transports with packets out of
// order: a UD flow is not checked for order at all (no gap, rewind or late
// packet), and a UC flow, which has no responses, is judged as RC requests
// are: the swapped WRITE came late.
func TestReorderUDAndUC(t *testing.T) {
	src := hostA
	var pkts []Packet
	for i, psn := range []uint32{1000, 1002, 1001, 1003} {
		pkts = append(pkts, Packet{Frame: i + 1, Time: t0.Add(time.Duration(i) * time.Microsecond), Src: src, Dst: hostB, Pkt: udSend(t, 0x17, 0x30, psn)})
	}
	rep := analyse(pkts, Options{})
	require.Len(t, rep.Connections, 1)
	f := rep.Connections[0].Flows[0]
	require.True(t, f.UD)
	require.Equal(t, []int{4, 0, 0, 0, 0}, []int{f.Messages, f.PSNGaps, f.PSNMissing, f.PSNRewinds, f.PSNLate})

	w := func(us int, psn uint32) pk { return pk{us: us, op: packet.UCRDMAWriteOnly, psn: psn, payload: 64} }
	rep = analyse(build(t, []pk{w(0, 100), w(1, 102), w(2, 101), w(3, 103)}), Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	f = c.Flows[0]
	require.Equal(t, []int{4, 0, 0, 0, 1}, []int{f.Messages, f.PSNGaps, f.PSNMissing, f.PSNRewinds, f.PSNLate})
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
}
