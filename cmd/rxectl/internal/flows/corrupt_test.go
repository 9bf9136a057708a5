package flows

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// corrupt marks p as a packet with a bad ICRC.
func corrupt(p pk) pk {
	p.bad = true
	return p
}

// send is a SEND ONLY of A at psn.
func send(us int, psn uint32) pk {
	return pk{us: us, op: packet.RCSendOnly, psn: psn, payload: 100}
}

// TestBadICRC checks how packets with a bad ICRC are counted and used: in
// the flow their addresses and QP name (or none), and a gap PSN such a
// packet of the same flow carried, between the flow's packet before the gap
// and the one that opened it, is explained as corrupted, not lost before
// the capture point; any other gap keeps that wording.
func TestBadICRC(t *testing.T) {
	type counts struct {
		BadICRC                         int
		BadICRCFrames                   []int
		PSNGaps, PSNMissing, PSNCorrupt int
		PSNLate                         int
	}
	onQP := func(p pk, qp uint32) pk {
		p.qp = qp
		return p
	}
	tests := []struct {
		name    string
		ps      []pk
		flows   []counts // every flow of the report, in order
		noFlow  []int    // Report.BadICRCNoFlowFrames
		explain []string // of every connection, in order
		text    string   // a line of WriteText
		json    string   // a line of WriteJSON
	}{{
		name: "bad ICRC fills the gap",
		ps: []pk{send(0, 10), corrupt(send(1, 11)), send(2, 12), // 1-3
			{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 11, syn: seqNAK}, // 4
			send(20, 11), send(21, 12), // 5-6
			{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 12, syn: ack}},
		flows: []counts{{BadICRC: 1, BadICRCFrames: []int{2}, PSNGaps: 1, PSNMissing: 1, PSNCorrupt: 1}, {}},
		explain: []string{"Requests corrupted before the capture point (1 PSN in 1 gap, first at frame 2): the capture holds them with a bad ICRC, " +
			"and the receiver dropped them; recovered by 1 resend after PSN sequence error NAKs in 28 µs."},
		text: "    bad_icrc 1, psn_corrupt 1 (dropped by the receiver), frame 2\n",
		json: `"psn_corrupt": 1`,
	}, {
		name:  "one of two missing PSNs corrupted",
		ps:    []pk{send(0, 10), corrupt(send(1, 11)), send(2, 13)},
		flows: []counts{{BadICRC: 1, BadICRCFrames: []int{2}, PSNGaps: 1, PSNMissing: 2, PSNCorrupt: 1}},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 3); requests corrupted before the capture point " +
			"(1 PSN in 1 gap, first at frame 2): the capture holds them with a bad ICRC, and the receiver dropped them."},
	}, {
		name: "the rest of the gap came late",
		ps: []pk{send(0, 10), corrupt(send(1, 11)), corrupt(send(2, 13)), send(3, 14), // 1-4: gap 11..13
			send(4, 12)}, // 5: late
		flows: []counts{{BadICRC: 2, BadICRCFrames: []int{2, 3}, PSNGaps: 1, PSNMissing: 2, PSNCorrupt: 2, PSNLate: 1}},
		explain: []string{"Requests corrupted before the capture point (2 PSNs in 1 gap, first at frame 2): the capture holds them with a bad ICRC, " +
			"and the receiver dropped them."},
	}, {
		name:    "corrupted BTH names no QP of the capture",
		ps:      []pk{send(0, 10), onQP(corrupt(send(1, 11)), 0x33), send(2, 12)},
		flows:   []counts{{PSNGaps: 1, PSNMissing: 1}},
		noFlow:  []int{2},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 3)."},
		text:    "bad_icrc 1 naming no flow of the capture (dropped by the receiver; their addresses or QP may be what was corrupted), frame 2\n",
		json:    `"bad_icrc_no_flow": 1`,
	}, {
		name: "corrupted BTH names another QP's flow",
		ps: []pk{onQP(send(0, 500), 0x33), send(1, 10), // 1-2
			onQP(corrupt(send(2, 11)), 0x33), send(3, 12), onQP(send(4, 501), 0x33)}, // 3-5
		flows:   []counts{{BadICRC: 1, BadICRCFrames: []int{3}}, {PSNGaps: 1, PSNMissing: 1}},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 4)."},
		text:    "    bad_icrc 1 (dropped by the receiver), frame 3\n",
		json:    `"bad_icrc": 1`,
	}, {
		name:    "corrupted PSN outside the gap",
		ps:      []pk{send(0, 10), corrupt(send(1, 700)), send(2, 12)},
		flows:   []counts{{BadICRC: 1, BadICRCFrames: []int{2}, PSNGaps: 1, PSNMissing: 1}},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 3)."},
	}, {
		name:    "bad ICRC after the packet that opened the gap",
		ps:      []pk{send(0, 10), send(1, 12), corrupt(send(2, 11))},
		flows:   []counts{{BadICRC: 1, BadICRCFrames: []int{3}, PSNGaps: 1, PSNMissing: 1}},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 2)."},
	}, {
		// A go-back-N round after a timeout skips 11: its copy then was
		// lost before the capture point; the corrupted copy of the first
		// gap lies before the round.
		name: "a resend round's skip is not the earlier corrupted copy",
		ps: []pk{send(0, 10), corrupt(send(1, 11)), send(2, 12), // 1-3: gap 11
			{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 11, syn: seqNAK}, // 4
			send(20, 11), send(21, 12), // 5-6
			send(5000, 10), send(5001, 12)}, // 7-8: timeout, 11 skipped
		flows: []counts{{BadICRC: 1, BadICRCFrames: []int{2}, PSNGaps: 2, PSNMissing: 2, PSNCorrupt: 1}, {}},
		explain: []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 8); requests corrupted before the capture point " +
			"(1 PSN in 1 gap, first at frame 2): the capture holds them with a bad ICRC, and the receiver dropped them; request PSN 10 (frame 1) " +
			"sent again on a timer though the capture holds it: it or its ACK was lost after the capture point, or the ACK came after the " +
			"requester's timer fired; recovered by 1 resend after PSN sequence error NAKs in 19 µs and 1 ACK timeout of 5.0 ms at frame 7."},
	}, {
		name: "READ response corrupted",
		ps: []pk{readReq(0, 10, 4),
			readResp(5, rFirst, 10), readResp(6, rMiddle, 11), corrupt(readResp(7, rMiddle, 12)), readResp(8, rLast, 13), // 2-5
			readReq(9, 12, 2), readResp(15, rFirst, 12), readResp(16, rLast, 13)},
		flows: []counts{{}, {BadICRC: 1, BadICRCFrames: []int{4}, PSNGaps: 1, PSNMissing: 1, PSNCorrupt: 1}},
		explain: []string{"1 READ response corrupted before the capture point (frame 4): the capture holds it with a bad ICRC, " +
			"and the receiver dropped it; recovered by 1 re-read after implied NAKs in 8.0 µs."},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyse(build(t, tt.ps), Options{PMTU: 1024})
			var got []counts
			var explain []string
			packets := 0
			for _, c := range rep.Connections {
				for _, f := range c.Flows {
					got = append(got, counts{f.BadICRC, f.BadICRCFrames, f.PSNGaps, f.PSNMissing, f.PSNCorrupt, f.PSNLate})
					packets += f.Packets
				}
				explain = append(explain, c.Explain...)
			}
			require.Equal(t, tt.flows, got)
			require.Equal(t, tt.noFlow, rep.BadICRCNoFlowFrames)
			require.Equal(t, len(tt.noFlow), rep.BadICRCNoFlow)
			bad := 0
			for _, p := range tt.ps {
				if p.bad {
					bad++
				}
			}
			require.Equal(t, len(tt.ps)-bad, packets, "a packet with a bad ICRC is no packet of its flow")
			if tt.explain != nil {
				require.Equal(t, tt.explain, explain)
			}
			var text, js bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			require.NoError(t, rep.WriteJSON(&js))
			require.Contains(t, text.String(), tt.text)
			require.Contains(t, js.String(), tt.json)
		})
	}
}
