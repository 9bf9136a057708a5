package cm

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestDuplicateREP: the active side answers a repeat of the REP it
// received as kernel cm_dup_rep_handler does for an rdma_cm connection:
// before its consumer has confirmed the REP, with an MRA for the REP
// (rdma_cm's handler of the REP puts the connection in MRA REP sent with
// a delayed MRA, ib_prepare_cm_mra, formerly ib_send_cm_mra with
// IB_CM_MRA_FLAG_DELAY), so that the passive side waits the MRA's service
// timeout instead of using up its retries; once established, with the RTU
// again; and a REP that names another connection of the peer's, not at
// all. The MRA stretches the passive side's wait for the RTU.
func TestDuplicateREP(t *testing.T) {
	w, cid, sid := repReceived(t)
	rep := *w.events["client"][0].REP
	dup := func(r *packet.REP) { w.client.Receive(w.now, serverAddr, cmMAD(0x99, r)) }

	for i := 1; i <= 2; i++ {
		dup(&rep)
		o, attr, msg := pollMAD(t, w.client, "an MRA")
		require.Equal(t, packet.AttrMRA, attr, "duplicate %d", i)
		require.Equal(t, serverAddr, o.To)
		var mra packet.MRA
		require.NoError(t, mra.Decode(msg))
		require.Equal(t, packet.MRA{LocalCommID: uint32(cid), RemoteCommID: uint32(sid), MessageMRAed: packet.MsgREP,
			ServiceTimeout: w.client.cfg.ServiceTimeout}, mra)
		w.server.Receive(w.now, clientAddr, o.MAD[:])
		require.Equal(t, StateREPRcvd, w.client.State(cid))
	}
	require.Equal(t, uint64(2), w.client.Counters().Duplicates)
	require.Equal(t, uint64(1), w.server.Counters().Duplicates, "the server takes the first MRA")

	other := rep
	other.LocalCommID++
	dup(&other)
	_, ok := w.client.Poll()
	require.False(t, ok, "no answer to another connection's REP")

	require.NoError(t, w.client.ConfirmREP(cid, nil))
	_, attr, _ := pollMAD(t, w.client, "the RTU")
	require.Equal(t, packet.AttrRTU, attr)
	dup(&rep)
	_, attr, msg := pollMAD(t, w.client, "the RTU again")
	require.Equal(t, packet.AttrRTU, attr)
	var rtu packet.RTU
	require.NoError(t, rtu.Decode(msg))
	require.Equal(t, uint32(cid), rtu.LocalCommID)
	require.Equal(t, uint32(sid), rtu.RemoteCommID)
	require.Equal(t, uint64(3), w.client.Counters().Duplicates)
}
