package dump

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestSplitSegmentsOfSeveralQPs: UDP GRO merges the datagrams of one UDP
// flow (addresses and ports), whatever their BTH says, and gorxe sends
// every QP from one port, so a merged datagram can hold packets of
// several QPs back to back: ACKs of three QPs, or full-size WRITE MIDDLE
// packets of two. Each is a RoCE packet with a valid ICRC and must come
// out as a segment of its own. So must they when one of them was
// corrupted: then a length of two packets, at which the first QP's BTH
// starts again, gives a split in which one segment checks, and the real
// length one in which two do.
func TestSplitSegmentsOfSeveralQPs(t *testing.T) {
	ph := packet.PseudoHeader{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"),
		SrcPort: packet.UDPPort, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	fixed := func(int) uint16 { return 0 }
	ack := func(qp uint32, psn int) gsoSegment {
		return gsoSegment{h: packet.Headers{
			BTH:  packet.BTHFields{Opcode: packet.RCAcknowledge, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn)},
			AETH: packet.AETHFields{Syndrome: packet.SyndromeACKUnlimited, MSN: uint32(psn)}}}
	}
	write := func(qp uint32, psn int) gsoSegment {
		payload := make([]byte, 1024)
		for j := range payload {
			payload[j] = byte(j*3 + psn)
		}
		return gsoSegment{h: packet.Headers{
			BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteMiddle, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn)}}, payload: payload}
	}
	// A payload of little-endian words 0xFFFF0000 reads, at every word,
	// as a BTH of opcode 0 and the default P_Key: it must not use up the
	// tries before the real segment length of a one-QP run.
	ffff := func(qp uint32, psn int) gsoSegment {
		payload := make([]byte, 4096)
		for j := 2; j < len(payload); j += 4 {
			payload[j], payload[j+1] = 0xFF, 0xFF
		}
		return gsoSegment{h: packet.Headers{
			BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteMiddle, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn)}}, payload: payload}
	}
	// A SEND without payload is the shortest RoCE packet: a BTH and the
	// ICRC.
	empty := func(qp uint32, psn int) gsoSegment {
		return gsoSegment{h: packet.Headers{
			BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn)}}}
	}
	// A payload whose first 40 words each read as a BTH of a known opcode
	// and the packet's own QP (06 00 00 11: RDMA WRITE FIRST at a word,
	// QPN 0x000011 in the next): they take 40 of the tries, and the
	// real segment length still comes within the bound.
	lookalike := func(qp uint32, psn int) gsoSegment {
		payload := make([]byte, 1024)
		for j := 0; j < 40*4; j += 4 {
			payload[j], payload[j+3] = 0x06, 0x11
		}
		return gsoSegment{h: packet.Headers{
			BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteMiddle, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn)}}, payload: payload}
	}
	tests := []struct {
		name    string
		segs    []gsoSegment
		corrupt int // segment (from 1) of which a payload byte is flipped, 0 for none
	}{
		{"two ACKs of one QP", []gsoSegment{ack(0x11, 7), ack(0x11, 8)}, 0},
		{"two SENDs without payload", []gsoSegment{empty(0x11, 1), empty(0x11, 2)}, 0},
		{"WRITE MIDDLEs of one QP, 40 BTH look-alikes first", []gsoSegment{lookalike(0x11, 1), lookalike(0x11, 2)}, 0},
		{"ACKs of three QPs", []gsoSegment{ack(0x11, 7), ack(0x22, 8), ack(0x33, 9)}, 0},
		{"WRITE MIDDLEs of two QPs", []gsoSegment{write(0x11, 1), write(0x22, 2), write(0x11, 3)}, 0},
		{"WRITE MIDDLEs of one QP, payloads of P_Key look-alikes", []gsoSegment{ffff(0x11, 1), ffff(0x11, 2), ffff(0x11, 3)}, 0},
		{"WRITE MIDDLEs of two QPs, the second corrupted", []gsoSegment{write(0x11, 1), write(0x22, 2), write(0x11, 3)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frame := gsoFrame(t, ph, tc.segs, fixed)
			if tc.corrupt > 0 {
				off := 14 + packet.IPv4HeaderSize + packet.UDPHeaderSize
				for _, sg := range tc.segs[:tc.corrupt-1] {
					off += packet.PacketLen(sg.h.BTH.Opcode, len(sg.payload))
				}
				frame[off+packet.BTHSize+10] ^= 0x08
			}
			var f Frame
			DecodeFrame(&f, frame, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, KindRoCE, f.Kind, "%v", f.Err)
			require.Equal(t, len(tc.segs), f.Segments)
			for i, sg := range tc.segs {
				f.setSegment(i)
				require.Equal(t, i+1 != tc.corrupt, f.ICRCOK, "segment %d", i+1)
				require.Equal(t, sg.h.BTH.DestQP, f.Packet.DestQP(), "segment %d", i+1)
				require.Equal(t, sg.h.BTH.PSN, f.Packet.PSN(), "segment %d", i+1)
				require.Equal(t, len(sg.payload), f.Packet.PayloadLen(), "segment %d", i+1)
				if i+1 != tc.corrupt {
					require.True(t, bytes.Equal(sg.payload, f.Packet.Payload()), "segment %d", i+1)
				}
			}
		})
	}
}
