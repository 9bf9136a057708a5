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
