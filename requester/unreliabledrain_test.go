package requester

import (
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestUnreliableDrain: while draining (SQD) a UC send queue finishes the
// message it has started and starts no other (rxe req_next_wqe in
// QP_STATE_DRAIN takes only a WQE in processing); it is drained once no
// message is under way, and sends the waiting ones when the drain ends.
func TestUnreliableDrain(t *testing.T) {
	u, _, cq := newUnreliable(false)
	require.False(t, u.Drained(), "not draining")
	require.NoError(t, u.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: 0x1000, Length: 2500, LKey: 1}}}))
	require.NoError(t, u.Post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: 0x1000, Length: 10, LKey: 1}}}))
	buf := make([]byte, 2048)
	n, _, _ := u.NextPacket(t0, buf)
	require.NotZero(t, n)
	u.Sent(1)
	u.SetDraining(true)
	require.False(t, u.Drained(), "a message is under way")
	ps := drain(t, u)
	require.Len(t, ps, 2, "the started message's MIDDLE and LAST, nothing of the next")
	require.Equal(t, packet.UCSendLast, ps[1].Opcode())
	require.True(t, u.Drained())
	require.False(t, u.Pending())
	require.Len(t, cq.wcs, 1)
	u.SetDraining(false)
	require.False(t, u.Drained())
	ps = drain(t, u)
	require.Len(t, ps, 1)
	require.Equal(t, packet.UCSendOnly, ps[0].Opcode())
	require.Len(t, cq.wcs, 2)
}

// TestUnreliableSetDest: a UC QP's new address vector (SQD→SQD) takes the
// packets built from then on, of work requests posted before it too.
func TestUnreliableSetDest(t *testing.T) {
	u, _, _ := newUnreliable(false)
	require.NoError(t, u.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: 0x1000, Length: 10, LKey: 1}}}))
	to := netip.MustParseAddrPort("192.0.2.77:4791")
	ph := pseudo
	ph.Dst, ph.DstPort = to.Addr(), to.Port()
	u.SetDest(to, ph)
	buf := make([]byte, 2048)
	n, dst, _ := u.NextPacket(t0, buf)
	require.NotZero(t, n)
	require.Equal(t, to, dst)
	require.NoError(t, ph.CheckICRC(buf[:n]))
}

// TestUnreliableCompletesWhenSent: a UC or UD work request completes only
// once the owner reports its last packet gone (rxe_xmit_packet marks the
// WQE done once the packet is handed to IP), in posting order whatever the
// order of the reports; one whose packets never leave completes with
// WR_FLUSH_ERR (Unsent), and a work request holds its send queue slot until
// it completes.
func TestUnreliableCompletesWhenSent(t *testing.T) {
	t.Run("sent", func(t *testing.T) {
		u, _, cq := newUnreliable(false)
		require.NoError(t, u.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 2500, LKey: 1}}}))
		buf := make([]byte, 2048)
		for range 3 {
			n, _, _ := u.NextPacket(t0, buf)
			require.NotZero(t, n)
		}
		require.Empty(t, cq.ids(), "no packet has left")
		u.Sent(2)
		require.Empty(t, cq.ids(), "the last packet has not left")
		u.SetDraining(true)
		require.False(t, u.Drained(), "drained before the last packet left")
		u.Sent(5) // one more than built: the rest is ignored
		require.Equal(t, []uint64{1}, cq.ids())
		require.Equal(t, verbs.WCSuccess, cq.wcs[0].Status)
		require.True(t, u.Drained())
	})
	t.Run("failed-behind-unsent", func(t *testing.T) {
		u, _, cq := newUnreliable(true)
		require.NoError(t, u.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: udDest,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}))
		require.NoError(t, u.Post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: udDest,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 77}}}))
		require.NoError(t, u.Post(&verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: udDest,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}))
		buf := make([]byte, 2048)
		n, _, _ := u.NextPacket(t0, buf)
		require.NotZero(t, n)
		n, _, _ = u.NextPacket(t0, buf)
		require.Zero(t, n, "WR 2's L_Key is bad")
		_, failed := u.Failed()
		require.True(t, failed)
		u.Flush()
		require.Empty(t, cq.ids(), "WR 2 and 3 complete after WR 1, whose packet has not left")
		u.Sent(1)
		require.Equal(t, []uint64{1, 2, 3}, cq.ids())
		require.Equal(t, []verbs.WCStatus{verbs.WCSuccess, verbs.WCLocProtErr, verbs.WCWRFlushErr},
			[]verbs.WCStatus{cq.wcs[0].Status, cq.wcs[1].Status, cq.wcs[2].Status})
	})
	t.Run("unsent", func(t *testing.T) {
		u, _, cq := newUnreliable(true)
		wr := verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: udDest,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
		for i := range 8 {
			wr.ID = uint64(i)
			require.NoError(t, u.Post(&wr))
		}
		buf := make([]byte, 2048)
		n, _, _ := u.NextPacket(t0, buf)
		require.NotZero(t, n)
		require.ErrorIs(t, u.Post(&wr), ErrQueueFull, "WR 0 holds its slot until it completes")
		u.Flush()
		require.Empty(t, cq.ids(), "WR 0's packet is not reported yet")
		u.Unsent()
		require.Len(t, cq.wcs, 8)
		for i, wc := range cq.wcs {
			require.Equal(t, uint64(i), wc.ID)
			require.Equal(t, verbs.WCWRFlushErr, wc.Status, "WR %d", i)
		}
		u.Sent(1) // a report after the flush changes nothing
		require.Len(t, cq.wcs, 8)
	})
}
