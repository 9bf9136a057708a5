package ladder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/packet"
)

// rcPacket is a packet of the RC connection between a (QP 0x11) and b (QP
// 0x22), from b if fromB, captured at t0 + us µs as frame's segment seg (0
// for a datagram of one packet), with payload bytes and, on ACKs and READ
// responses, syndrome syn and MSN 1.
func rcPacket(t *testing.T, t0 time.Time, a, b netip.AddrPort, frame, seg, us int, fromB bool,
	op packet.Opcode, psn uint32, payload int, syn packet.Syndrome) flows.Packet {
	t.Helper()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: 0x22, PSN: packet.PSN(psn)}, AETH: packet.AETHFields{Syndrome: syn, MSN: 1}}
	src, dst := a, b
	if fromB {
		h.BTH.DestQP, src, dst = 0x11, b, a
	}
	buf := make([]byte, packet.PacketLen(op, payload))
	n, err := packet.Build(buf, &h, make([]byte, payload), nil)
	require.NoError(t, err)
	p, err := packet.Parse(buf[:n])
	require.NoError(t, err)
	return flows.Packet{Frame: frame, Segment: seg, Time: t0.Add(time.Duration(us) * time.Microsecond), Src: src, Dst: dst, Pkt: p}
}
