package flows

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestTwoDevicesOneAddress: two RoCE devices on one address and two UDP
// ports (rxectl --loopback --ipv6 puts both on ::1), each with its first
// QP 0x11, talk over two flows: the requests to one port, the ACKs to the
// other, paired into one connection.
func TestTwoDevicesOneAddress(t *testing.T) {
	a := netip.MustParseAddrPort("[::1]:4791")
	b := netip.MustParseAddrPort("[::1]:49153")
	var pkts []Packet
	add := func(fromB bool, op packet.Opcode, psn uint32, payload int, syn packet.Syndrome) {
		h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: 0x11, PSN: packet.PSN(psn), AckReq: true},
			AETH: packet.AETHFields{Syndrome: syn, MSN: 1}}
		src, dst := a, b
		if fromB {
			src, dst = b, a
		}
		buf := make([]byte, packet.PacketLen(op, payload))
		n, err := packet.Build(buf, &h, make([]byte, payload), nil)
		require.NoError(t, err)
		p, err := packet.Parse(buf[:n])
		require.NoError(t, err)
		pkts = append(pkts, Packet{Frame: len(pkts) + 1, Time: t0.Add(time.Duration(10*len(pkts)) * time.Microsecond), Src: src, Dst: dst, Pkt: p})
	}
	add(false, packet.RCSendOnly, 100, 64, 0)
	add(true, packet.RCAcknowledge, 100, 0, ack)
	add(false, packet.RCSendOnly, 101, 64, 0)
	add(true, packet.RCAcknowledge, 101, 0, ack)
	rep := analyse(pkts, Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	require.Len(t, c.Flows, 2)
	require.Equal(t, []netip.AddrPort{a, b}, []netip.AddrPort{c.Flows[0].Src, c.Flows[0].Dst})
	require.Equal(t, 2, c.Flows[0].Packets)
	require.Equal(t, 2, c.Flows[1].Packets)
	require.Equal(t, "[::1]:4791 QP 0x000011 ⇄ [::1]:49153 QP 0x000011", c.Title())
	require.True(t, c.Flows[0].Holds(pkts[0]))
	require.False(t, c.Flows[0].Holds(pkts[1]))
	require.True(t, c.Flows[1].Holds(pkts[1]))
}
