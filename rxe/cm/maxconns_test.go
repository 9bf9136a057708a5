package cm

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestRefusalsAtMaxConns: while the agent tracks Config.MaxConns
// connections, a request it would refuse anyway is still answered, since
// the answer needs no entry in its table: a REQ for a service nobody
// listens on gets REJ 8, one for another transport REJ 9 and one from a QP
// another connection has REJ 10 (IBA 12.6.7), a SIDR_REQ for a service
// nobody serves status 1 (IBA 12.11.2). Only a request the agent would
// take is dropped for want of room (as kernel cm_req_handler and
// cm_sidr_req_handler drop one whose cm_id they cannot allocate), so a
// peer asking for a port nobody serves fails at once, not after all its
// retries.
func TestRefusalsAtMaxConns(t *testing.T) {
	s := newServer(t, Config{MaxConns: 1})
	require.NotZero(t, receiveREQ(t, s, t0, 0x31, 0x11, nil), "the one that fills the table")
	drain(s)
	for _, tc := range []struct {
		name   string
		edit   func(*packet.REQ)
		reason packet.REJReason
	}{
		{"unknown service", func(r *packet.REQ) { r.ServiceID++ }, packet.RejInvalidServiceID},
		{"RD transport", func(r *packet.REQ) { r.TransportServiceType = packet.CMTransportRD }, packet.RejInvalidTransportType},
		{"the first's QP", func(r *packet.REQ) { r.LocalQPN = 0x11 }, packet.RejStaleConn},
	} {
		require.Zero(t, receiveREQ(t, s, t0, 0x32, 0x12, tc.edit), tc.name)
		_, rej := pollREJ(t, s)
		require.Equal(t, tc.reason, rej.Reason, tc.name)
		require.Equal(t, uint32(0x32), rej.RemoteCommID, tc.name)
	}
	req := testSIDRREQ()
	req.RequestID = 0x41
	s.Receive(t0, clientAddr, cmMAD(0x78, req))
	_, attr, msg := pollMAD(t, s, "a SIDR_REP")
	require.Equal(t, packet.AttrSIDRREP, attr)
	var rep packet.SIDRREP
	require.NoError(t, rep.Decode(msg))
	require.Equal(t, uint8(packet.SIDRServiceIDNotSup), rep.Status)
	require.Equal(t, uint32(0x41), rep.RequestID)

	require.Zero(t, receiveREQ(t, s, t0, 0x33, 0x13, nil), "one it would take is dropped")
	_, ok := s.Poll()
	require.False(t, ok)
	c := s.Counters()
	require.Equal(t, uint64(1), c.Dropped)
	require.Equal(t, uint64(4), c.RejectsSent)
	require.Equal(t, 1, s.Len())
}
