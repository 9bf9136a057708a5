package rxe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestRCQPTakesOnlyItsPeersRCPackets: an RC QP in RTS takes only RC
// packets from its peer's address, as rxe_rcv's checks drop the others
// (check_addr: the source must be the QP's path's destination GID;
// check_type_state: an RC QP takes only RC opcodes). A SEND from a third
// host to the QP's number, and a UC SEND from its peer's address, are
// dropped and counted (BadSource, BadState), and complete no receive.
func TestRCQPTakesOnlyItsPeersRCPackets(t *testing.T) {
	for _, tc := range []struct {
		name string
		// sender returns a QP in RTS on a device other than b's that
		// sends to b's QP, and its end.
		sender func(t *testing.T, a, b *end) *end
		count  func(c QPCounters) uint64
	}{
		{"other-address", func(t *testing.T, a, b *end) *end {
			conn, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.3:0"), SocketOptions(Options{}))
			require.NoError(t, err)
			dc, err := Open(conn, Options{Name: "rxe-c", LinkMTU: 9000, OwnConn: true})
			require.NoError(t, err)
			t.Cleanup(func() { dc.Close() })
			c := newEnd(t, dc, 1<<16)
			ic := c.qp.Info(0x300)
			require.NoError(t, c.qp.Connect(ic, b.qp.Info(0x200), ConnectOptions{MTU: MTU1024}))
			return c
		}, func(c QPCounters) uint64 { return c.BadSource }},
		{"uc-opcode", func(t *testing.T, a, b *end) *end {
			c := newTypedEnd(t, a.dev, QPTypeUC)
			require.NoError(t, c.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite},
				QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
			require.NoError(t, c.qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: b.dev.GID(), UDPPort: b.dev.Addr().Port()},
				PathMTU: MTU1024, DestQPN: b.qp.QPN(), RQPSN: 0x200},
				QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN))
			require.NoError(t, c.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 0x200}, QPAttrState|QPAttrSQPSN))
			return c
		}, func(c QPCounters) uint64 { return c.BadState }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := newDevices(t, "udp")
			a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
			ia, ib := a.qp.Info(0x100), b.qp.Info(0x200)
			require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU1024}))
			require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU1024}))
			_, err := b.qp.PostRecv(RecvWR{ID: 7, SGList: []SGE{b.mr.SGE(0, 4096)}})
			require.NoError(t, err)
			c := tc.sender(t, a, b)
			_, err = c.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{c.mr.SGE(0, 64)}})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return tc.count(b.qp.Counters()) > 0 }, 2*time.Second, 100*time.Microsecond,
				"the packet was not dropped and counted")
			require.Empty(t, pollAll(b.cq), "the packet completed a receive")
			require.Zero(t, b.qp.Counters().RcvdPkts, "packets the QP took")
		})
	}
}
