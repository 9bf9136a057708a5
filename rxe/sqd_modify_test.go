package rxe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// toSQD moves qp from RTS to SQD and waits until its send queue has drained.
func toSQD(t *testing.T, qp *QP) {
	t.Helper()
	require.NoError(t, qp.Modify(&QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify))
	waitEvent(t, qp.dev, EventSQDrained)
}

// TestSQDModifyRetryAttributes changes timeout, retry_cnt and rnr_retry in
// SQD (IBA 10.3.1 allows it for SQD→SQD; kernel rxe applies them): the
// retransmissions after SQD→RTS follow the new values, not those of
// RTR→RTS.
func TestSQDModifyRetryAttributes(t *testing.T) {
	t.Run("retry_cnt and timeout", func(t *testing.T) {
		// RTS with timeout 14 (67 ms) and retry_cnt 3; in SQD: timeout 1
		// (8 µs) and retry_cnt 0. The peer is silent (its QP back in
		// RESET), so the WRITE fails after exactly one timeout.
		a, b := smallPair(t, "pipe", qpOpts{timeout: 14, retryCnt: 3}, qpOpts{})
		toSQD(t, a.qp)
		require.NoError(t, a.qp.Modify(&QPAttr{Timeout: 1, RetryCnt: 0}, QPAttrTimeout|QPAttrRetryCnt))
		q := a.qp.Query()
		require.Equal(t, uint8(1), q.Timeout)
		require.Zero(t, q.RetryCnt)
		require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
		require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
		_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{1, WCRetryExcErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
		c := a.qp.Counters().Requester
		require.Equal(t, uint64(1), c.Timeouts, "retry_cnt 0: the first timeout fails the WQE")
		require.Equal(t, uint64(1), c.RetryExceededErr)
	})
	t.Run("timeout lengthened", func(t *testing.T) {
		// RTS with timeout 8 (1 ms) and retry_cnt 1; in SQD: timeout 31
		// (2.4 hours). Toward a silent peer nothing completes for a while.
		a, b := smallPair(t, "pipe", qpOpts{timeout: 8, retryCnt: 1}, qpOpts{})
		toSQD(t, a.qp)
		require.NoError(t, a.qp.Modify(&QPAttr{Timeout: 31}, QPAttrTimeout))
		require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
		require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
		_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		noWC(t, a.cq, 200*time.Millisecond)
		require.Zero(t, a.qp.Counters().Requester.Timeouts)
	})
	t.Run("rnr_retry", func(t *testing.T) {
		// RTS with rnr_retry 7 (infinite); in SQD: rnr_retry 0. A SEND to
		// a peer with no receive WQE then fails at the first RNR NAK.
		a, b := smallPair(t, "pipe", qpOpts{rnrRetry: 7}, qpOpts{})
		toSQD(t, a.qp)
		require.NoError(t, a.qp.Modify(&QPAttr{RNRRetry: 0}, QPAttrRNRRetry))
		require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
		_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{1, WCRNRRetryExcErr, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
		require.Equal(t, uint64(1), b.qp.Counters().Responder.SendRNRErr)
	})
}

// TestSQDModifyAV moves a QP's path to another host in SQD (IBA 10.3.1):
// after SQD→RTS its packets, requests and responses, go to the new address
// with an ICRC computed for it, and the new peer accepts them.
func TestSQDModifyAV(t *testing.T) {
	open := func(ip string) *Device {
		c, err := netdev.ListenUDP(netip.MustParseAddrPort(ip+":0"), netdev.Options{BlockingWrite: true})
		require.NoError(t, err)
		d, err := Open(c, Options{LinkMTU: 9000, OwnConn: true})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	da, db, dc := open("127.0.0.1"), open("127.0.0.2"), open("127.0.0.3")
	o := qpOpts{}
	a, b, c := smallEnd(t, da, nil, o), smallEnd(t, db, nil, o), smallEnd(t, dc, nil, o)
	require.Equal(t, b.qp.QPN(), c.qp.QPN(), "fresh devices number their QPs alike")
	link(t, a, b, o, o)

	write := func(id uint64, to *end, seed uint64) {
		t.Helper()
		fill(a.buf[:4096], seed)
		_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 4096)},
			RemoteAddr: to.mr.Addr(), RKey: to.mr.RKey()})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{id, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
		syncMem(a, to)
		require.Equal(t, a.buf[:4096], to.buf[:4096])
	}
	write(1, b, 1)

	// c takes b's place: RTR toward a, expecting a's next PSN.
	toSQD(t, a.qp)
	atB := db.Counters().RcvdPkts
	q := a.qp.Query()
	rtr(t, c.qp, a.qp, q.SQPSN, o)
	rts(t, c.qp, q.RQPSN, o)
	ca := dc.Addr()
	require.NoError(t, a.qp.Modify(&QPAttr{AH: AH{DGID: netip.AddrFrom16(ca.Addr().As16()), UDPPort: ca.Port()}}, QPAttrAV))
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	write(2, c, 2)
	require.Zero(t, dc.Counters().BadICRC, "the ICRC covers the new address")
	require.Equal(t, atB, db.Counters().RcvdPkts, "nothing more goes to the old address")

	// a's responder answers c on the new path too: its ACK's ICRC covers
	// c's address (rxe computes each packet's ICRC from the QP's current
	// AV), so c's WRITE into a completes.
	_, err := c.qp.PostSend(SendWR{ID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{c.mr.SGE(0, 64)},
		RemoteAddr: a.mr.Addr() + 8192, RKey: a.mr.RKey()}) // past the bytes the test read
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{3, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, c.cq, 1)))
	require.Zero(t, dc.Counters().BadICRC, "a's ACK has the ICRC of the new path")
}

// TestSQDModifyMaxDestRdAtomic changes max_dest_rd_atomic in SQD (IBA
// 10.3.1 allows it for SQD→SQD; kernel rxe reallocates its responder
// resources): with none left, the peer's next READ is refused with a NAK
// invalid request, where before it succeeded.
func TestSQDModifyMaxDestRdAtomic(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	read := func(id uint64) {
		_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
	}
	read(1)
	require.Equal(t, []wcBrief{{1, WCSuccess, WCRDMARead}}, briefs(waitWCs(t, a.cq, 1)))
	toSQD(t, b.qp)
	require.NoError(t, b.qp.Modify(&QPAttr{MaxDestRdAtomic: 0}, QPAttrMaxDestRdAtomic))
	require.Zero(t, b.qp.Query().MaxDestRdAtomic)
	require.NoError(t, b.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	read(2)
	require.Equal(t, []wcBrief{{2, WCRemInvReqErr, WCRDMARead}}, briefs(waitWCs(t, a.cq, 1)))
}
