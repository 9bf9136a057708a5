package flows

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// udSend returns a 64-byte UD SEND ONLY from QP srcQP to QP dqp at psn.
func udSend(t *testing.T, srcQP, dqp, psn uint32) packet.Packet {
	t.Helper()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: 0xFFFF, DestQP: dqp, PSN: packet.PSN(psn)},
		DETH: packet.DETHFields{QKey: 0x11111111, SrcQP: srcQP}}
	b := make([]byte, packet.PacketLen(packet.UDSendOnly, 64))
	n, err := packet.Build(b, &h, make([]byte, 64), nil)
	require.NoError(t, err)
	p, err := packet.Parse(b[:n])
	require.NoError(t, err)
	return p
}

// TestUDTwoSourceQPs checks that UD flows are keyed by source QP too. Two
// UD QPs of one host (each its own UDP source port, as kernel rxe and gorxe
// give every QP) send to one UD QP of another host, interleaved. Each
// source QP's PSNs are in order with no loss: two flows of four packets and
// four messages each, no gap, no rewind, no recovery. The analysis used to
// key UD flows by addresses and destination QP alone, merge the two into
// one flow, and report their interleaved PSNs as gaps, rewinds and
// recoveries.
func TestUDTwoSourceQPs(t *testing.T) {
	srcA := netip.MustParseAddrPort("10.0.0.1:50001")
	srcB := netip.MustParseAddrPort("10.0.0.1:50002")
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	mk := func(srcQP, psn uint32) packet.Packet { return udSend(t, srcQP, 0x30, psn) }
	var pkts []Packet
	for i := range 4 {
		pkts = append(pkts,
			Packet{Frame: 2*i + 1, Time: t0.Add(time.Duration(2*i) * time.Microsecond), Src: srcA, Dst: dst, Pkt: mk(0x17, 1000+uint32(i))},
			Packet{Frame: 2*i + 2, Time: t0.Add(time.Duration(2*i+1) * time.Microsecond), Src: srcB, Dst: dst, Pkt: mk(0x18, 500+uint32(i))})
	}
	rep := analyse(pkts, Options{})
	for _, c := range rep.Connections {
		for _, f := range c.Flows {
			t.Logf("flow %v → %v qp %#x: packets %d gaps %d missing %d rewinds %d", f.Src, f.Dst, f.DestQP, f.Packets, f.PSNGaps, f.PSNMissing, f.PSNRewinds)
		}
		t.Logf("recoveries %+v explain %q", c.Recoveries, c.Explain)
	}
	require.Len(t, rep.Connections, 2)
	var srcQPs []uint32
	for _, c := range rep.Connections {
		require.Len(t, c.Flows, 1)
		for _, f := range c.Flows {
			require.True(t, f.UD)
			srcQPs = append(srcQPs, f.SrcQP)
			require.Equal(t, 4, f.Packets)
			require.Equal(t, 4, f.Messages)
			require.Zero(t, f.PSNGaps, "gaps")
			require.Zero(t, f.PSNRewinds, "rewinds")
		}
		require.Empty(t, c.Recoveries)
		require.Empty(t, c.Explain)
	}
	require.Equal(t, []uint32{0x17, 0x18}, srcQPs)
	require.True(t, rep.Connections[0].Flows[0].Holds(pkts[0]))
	require.False(t, rep.Connections[0].Flows[0].Holds(pkts[1]), "the other source QP's packet")
}

// TestUDOneSourceTwoDests checks that a UD QP sending to two QPs shows no
// loss. It sends to two UD QPs of another host, alternately; a UD QP has
// one PSN sequence for everything it sends (kernel rxe: qp->req.psn), so
// each destination sees every other PSN: nothing was lost, and each flow
// counts its four messages and no gap. The analysis used to run RC's PSN
// checks on UD requests and report every other PSN as missing.
func TestUDOneSourceTwoDests(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.0.1:50001")
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	mk := func(dqp, psn uint32) packet.Packet { return udSend(t, 0x17, dqp, psn) }
	var pkts []Packet
	for i := range 8 {
		pkts = append(pkts, Packet{Frame: i + 1, Time: t0.Add(time.Duration(i) * time.Microsecond), Src: src, Dst: dst, Pkt: mk(0x30+uint32(i%2), 1000+uint32(i))})
	}
	rep := analyse(pkts, Options{})
	for _, c := range rep.Connections {
		for _, f := range c.Flows {
			t.Logf("flow %v → %v qp %#x: packets %d gaps %d missing %d rewinds %d", f.Src, f.Dst, f.DestQP, f.Packets, f.PSNGaps, f.PSNMissing, f.PSNRewinds)
		}
		t.Logf("explain %q", c.Explain)
	}
	require.Len(t, rep.Connections, 2)
	for _, c := range rep.Connections {
		for _, f := range c.Flows {
			require.Equal(t, 4, f.Messages)
			require.Zero(t, f.PSNGaps, "gaps")
			require.Zero(t, f.PSNMissing)
			require.Zero(t, f.PSNRewinds)
		}
		require.Empty(t, c.Recoveries)
		require.Empty(t, c.Explain)
	}
}

// TestUDFlowName: a UD flow is named by its source QP (DETH) on the
// sender's side and its destination QP on the receiver's.
func TestUDFlowName(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.0.1:50001")
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	rep := analyse([]Packet{{Frame: 1, Time: t0, Src: src, Dst: dst, Pkt: udSend(t, 0x17, 0x30, 5)}}, Options{})
	require.Equal(t, "10.0.0.1:50001 QP 0x000017 → 10.0.0.2:4791 QP 0x000030", rep.Connections[0].Title())
}
