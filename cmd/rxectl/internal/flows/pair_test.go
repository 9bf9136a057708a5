package flows

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// pairPackets appends n packets of opcode op from src to dst (to QP qp),
// with PSNs from psn.
func pairPackets(t *testing.T, pkts []Packet, src, dst netip.AddrPort, qp uint32, op packet.Opcode, psn uint32, n int) []Packet {
	t.Helper()
	for i := range n {
		h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: qp, PSN: packet.PSN(psn + uint32(i))},
			AETH: packet.AETHFields{Syndrome: ack, MSN: 1}}
		pl := 8
		if op == packet.RCAcknowledge {
			pl = 0
		}
		buf := make([]byte, packet.PacketLen(op, pl))
		m, err := packet.Build(buf, &h, make([]byte, pl), nil)
		require.NoError(t, err)
		p, err := packet.Parse(buf[:m])
		require.NoError(t, err)
		pkts = append(pkts, Packet{Frame: len(pkts) + 1, Time: t0.Add(time.Duration(len(pkts)) * time.Microsecond), Src: src, Dst: dst, Pkt: p})
	}
	return pkts
}

// TestPairing: flows in opposite directions are one connection when one
// of them carries responses, even when they answer no request the
// capture holds (the only candidate, on one address too); two flows of
// requests only (UC both ways) stay two.
func TestPairing(t *testing.T) {
	a := netip.MustParseAddrPort("[::1]:4791")
	b := netip.MustParseAddrPort("[::1]:49153")
	pkts := pairPackets(t, nil, a, b, 0x11, packet.RCSendOnly, 100, 2)
	pkts = pairPackets(t, pkts, b, a, 0x11, packet.RCAcknowledge, 500, 2) // ACKs of requests before the capture
	rep := analyse(pkts, Options{})
	require.Len(t, rep.Connections, 1)
	require.Len(t, rep.Connections[0].Flows, 2)

	pkts = pairPackets(t, nil, hostA, hostB, 0x22, packet.UCSendOnly, 100, 2)
	pkts = pairPackets(t, pkts, hostB, hostA, 0x11, packet.UCSendOnly, 700, 2)
	rep = analyse(pkts, Options{})
	require.Len(t, rep.Connections, 2)
}
