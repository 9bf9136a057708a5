package rxe

import (
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestMaxDestRdAtomicRoundedUp: kernel rxe rounds max_rd_atomic and
// max_dest_rd_atomic up to a power of two (rxe_qp_from_attr), so a kernel
// requester given max_rd_atomic 3 keeps 4 READs outstanding. A responder
// given max_dest_rd_atomic 3 must keep as many resources as rxe would, 4,
// or the oldest READ's resource is recycled by the fourth and its
// retransmission, after a lost response, is dropped for ever (a duplicate
// READ without a resource: rxe_resp.c, Class D), until the requester's
// retries run out.
func TestMaxDestRdAtomicRoundedUp(t *testing.T) {
	// db, the responder, loses its first READ response once.
	db, da, lc := newLossyDevices(t, "pipe")
	dropped := false
	lc.mu.Lock()
	lc.drop = func(p []byte) bool {
		if !dropped && packet.BTH(p).Opcode() == packet.RCRDMAReadResponseOnly {
			dropped = true
			return true
		}
		return false
	}
	lc.mu.Unlock()
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	gid := func(d *Device) netip.Addr { return netip.AddrFrom16(d.Addr().Addr().As16()) }
	for _, s := range []struct {
		me, peer *end
		rd, dest int
	}{{a, b, 4, 16}, {b, a, 16, 3}} { // a: the rounded-up requester; b: max_dest_rd_atomic 3
		o := qpOpts{}.withDefaults()
		require.NoError(t, s.me.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: o.access},
			QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		require.NoError(t, s.me.qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: gid(s.peer.dev), UDPPort: s.peer.dev.Addr().Port()},
			PathMTU: MTU1024, DestQPN: s.peer.qp.QPN(), RQPSN: 500, MaxDestRdAtomic: s.dest, MinRNRTimer: 1},
			QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
		require.NoError(t, s.me.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 500, Timeout: 10, RetryCnt: 3, RNRRetry: 7, MaxRdAtomic: s.rd},
			QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	}

	for i := range 4 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(64*i, 64)}, RemoteAddr: b.mr.Addr() + uint64(64*i), RKey: b.mr.RKey()})
		require.NoError(t, err)
	}
	require.Equal(t, []wcBrief{{0, WCSuccess, WCRDMARead}, {1, WCSuccess, WCRDMARead}, {2, WCSuccess, WCRDMARead}, {3, WCSuccess, WCRDMARead}},
		briefs(waitWCs(t, a.cq, 4)))
	require.True(t, dropped)
}
