package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// A WRITE packet placed ahead needs the QP's remote write access as it
// would in order (rxe check_op_valid runs on every packet): once the
// access is taken away after the FIRST, a later packet of the message is
// not written on arrival, and when the hole fills the message fails with
// an Invalid Request NAK without any of its later bytes in memory.
func TestPlaceAheadQPAccessRevoked(t *testing.T) {
	h := newHarness(t, withPMTU(256), withSR(0))
	before := append([]byte(nil), h.remote.buf...)
	// A WRITE of 1000 bytes at rva+100: FIRST, MIDDLE, MIDDLE, LAST.
	h.rx(packet.RCRDMAWriteFirst, 100, pattern(256, 1), reth(rva+100, rkey, 1000))
	h.drain()
	h.cfg.Access = verbs.AccessRemoteRead
	h.r.SetAccess(h.cfg.Access)
	h.rx(packet.RCRDMAWriteMiddle, 102, pattern(256, 3))
	h.drain()
	require.Zero(t, h.r.Counters().OOOPlaced)
	require.Equal(t, before[356:], h.remote.buf[356:], "written past the FIRST without remote write access")

	h.rx(packet.RCRDMAWriteMiddle, 101, pattern(256, 2))
	out := h.drain()
	require.NotEmpty(t, out)
	expect(t, out[len(out)-1], opcode(packet.RCAcknowledge), psnIs(101),
		syndrome(packet.NAKSyndrome(packet.NAKInvalidRequest)))
	require.Equal(t, before[356:], h.remote.buf[356:])
}
