package cm

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestSIDRREQRefused: a SIDR_REQ (an rdma_cm UD peer resolving a service,
// IBA 12.11) is answered at once with a SIDR_REP of status "service ID not
// supported", in its transaction, as kernel cm_sidr_req_handler answers one
// that no listener takes; the agent resolves no UD service. It used to be
// dropped, so the peer's rdma_connect waited out all its retries (about a
// minute with rdma_cm's 20 and 15) before it failed.
func TestSIDRREQRefused(t *testing.T) {
	for _, sid := range []uint64{
		packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7471), // nobody listens
		service, // a listened service ID: still no UD QP behind it
	} {
		a := NewAgent(Config{CAGUID: 0x5E, TIDHigh: 2})
		require.NoError(t, a.Listen(service))
		req := packet.SIDRREQ{RequestID: 0x1234abcd, PKey: 0xFFFF, ServiceID: sid}
		copy(req.PrivateData[:], "private")
		var mad [packet.MADSize]byte
		packet.EncodeCM(mad[:], 0x0000000702030405, &req)
		a.Receive(t0, clientAddr, mad[:])

		o, attr, msg := pollMAD(t, a, "a SIDR_REP")
		require.Equal(t, clientAddr, o.To)
		require.Equal(t, packet.AttrSIDRREP, attr)
		h, _, err := packet.DecodeCMHeader(o.MAD[:])
		require.NoError(t, err)
		require.Equal(t, uint64(0x0000000702030405), h.TID, "the SIDR_REQ's transaction")
		require.Equal(t, uint8(packet.MethodSend), h.Method)
		var rep packet.SIDRREP
		require.NoError(t, rep.Decode(msg))
		require.Equal(t, packet.SIDRREP{RequestID: 0x1234abcd, Status: packet.SIDRServiceIDNotSup, ServiceID: sid}, rep)
		_, more := a.Poll()
		require.False(t, more)
		_, ev := a.NextEvent()
		require.False(t, ev, "no event: nothing for the consumer")
		require.Zero(t, a.Len(), "no connection kept")
		require.Equal(t, uint64(1), a.Counters().RejectsSent)
	}
}
