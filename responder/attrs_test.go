package responder

import (
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestSetPath answers a request after a path change: the ACK carries an
// ICRC for the new pseudo-header (drain checks it against h.cfg.Pseudo);
// an invalid pseudo-header is refused and changes nothing.
func TestSetPath(t *testing.T) {
	h := newHarness(t)
	h.postRecv(1, 64)
	h.postRecv(2, 64)
	bad := h.cfg.Pseudo
	bad.Dst = netip.MustParseAddr("2001:db8::2")
	require.ErrorIs(t, h.r.SetPath(bad), packet.ErrPseudoHeader)
	h.rx(packet.RCSendOnly, 100, nil, ackReq)
	out := h.drain()
	require.Len(t, out, 1, "still built for the old path")
	require.Equal(t, packet.RCAcknowledge, out[0].Opcode())

	h.cfg.Pseudo.Dst, h.cfg.Pseudo.DstPort = netip.MustParseAddr("192.0.2.77"), 0xC077
	require.NoError(t, h.r.SetPath(h.cfg.Pseudo))
	h.rx(packet.RCSendOnly, 101, nil, ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	require.Error(t, respPseudo.CheckICRC(out[0].Bytes()), "not for the old path")
}
