package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// The READ/atomic depths of a CM connection when one of them is 0. Kernel
// ib_cm reads a REQ's responder resources as the passive side's initiator
// depth and its initiator depth as the passive side's responder resources
// (cm_req_handler, cm_format_req_event), and a REP's likewise for the
// active side (cm_rep_handler); cm_init_qp_rtr_attr and
// cm_init_qp_rts_attr make them the QP's max_dest_rd_atomic and
// max_rd_atomic as they are. librdmacm's rdma_accept bounds the REQ's
// values by the device's (or takes the application's), and perftest's
// server by its outstanding reads: nowhere does a 0 become 1. A QP whose
// max_dest_rd_atomic is 0 takes no READ or atomic: kernel rxe's responder
// answers one with an Invalid Request NAK (check_resource,
// RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).

// TestAcceptREQWithoutReads: a REQ whose initiator depth is 0 (its QP
// issues no READ) gets a REP with 0 responder resources and a QP with
// max_dest_rd_atomic 0, whatever the listener's options offer; a REQ with
// 0 responder resources, a QP that issues none.
func TestAcceptREQWithoutReads(t *testing.T) {
	for _, tc := range []struct {
		reqRR, reqID     uint8 // the peer's REQ
		optRR, optID     int   // the listener's CMOptions (0: the default, 16)
		wantRR, wantInit int   // the REP's responder resources and initiator depth, the QP's max_dest_rd_atomic and max_rd_atomic
	}{
		{16, 0, 0, 0, 0, 16},
		{16, 0, 128, 128, 0, 16},
		{0, 5, 0, 0, 5, 0},
		{0, 0, 4, 4, 0, 0},
	} {
		t.Run(fmt.Sprintf("REQ %d-%d opts %d-%d", tc.reqRR, tc.reqID, tc.optRR, tc.optID), func(t *testing.T) {
			d, p := newRawCM(t)
			server := newCMEnd(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const port = 36
			l, err := d.ListenCM(port, CMOptions{PD: server.pd, SendCQ: server.cq,
				ResponderResources: tc.optRR, InitiatorDepth: tc.optID})
			require.NoError(t, err)
			defer l.Close()
			req := p.req(port, 0x83)
			req.ResponderResources, req.InitiatorDepth = tc.reqRR, tc.reqID
			p.send(1, req)
			res := async(func() (*CMConn, error) { return l.Accept(ctx) })
			var rep packet.REP
			p.recv(packet.AttrREP, &rep)
			require.Equal(t, tc.wantRR, int(rep.ResponderResources), "the REP's responder resources")
			require.Equal(t, tc.wantInit, int(rep.InitiatorDepth), "the REP's initiator depth")
			p.send(2, rtuFor(&rep))
			r := <-res
			require.NoError(t, r.err)
			require.Equal(t, tc.wantRR, r.c.Local.MaxRdAtomic)
			require.Equal(t, tc.wantInit, r.c.Remote.MaxRdAtomic)
			a := r.c.QP.Query()
			require.Equal(t, tc.wantRR, a.MaxDestRdAtomic)
			require.Equal(t, tc.wantInit, a.MaxRdAtomic)
			require.Equal(t, QPSRTS, a.State)
		})
	}
}

// TestDialTakesREPRdAtomic: the active side's QP takes the REP's initiator
// depth as its max_dest_rd_atomic and its responder resources as its
// max_rd_atomic, as kernel ib_cm's active side does (cm_rep_handler, and
// librdmacm's ucma_process_conn_resp, which overrides neither): 0 stays 0,
// and a REP that answers more than the REQ offered is taken too, as a
// librdmacm application's rdma_accept with depths of its own sends one
// (librdmacm does not bound them by the REQ's) and configures its QP with
// them; only the device's maxima bound them (TestDialClampsREPRdAtomic).
func TestDialTakesREPRdAtomic(t *testing.T) {
	for _, tc := range []struct {
		optRR, optID     int   // the Dial's CMOptions (0: the default, 16)
		repRR, repID     uint8 // the peer's REP
		wantRR, wantInit int   // ours: max_dest_rd_atomic and max_rd_atomic
	}{
		{0, 0, 0, 0, 0, 0},
		{0, 0, 16, 0, 0, 16},
		{0, 0, 0, 16, 16, 0},
		{4, 4, 8, 8, 8, 8},
		{4, 4, 16, 2, 2, 16},
	} {
		t.Run(fmt.Sprintf("opts %d-%d REP %d-%d", tc.optRR, tc.optID, tc.repRR, tc.repID), func(t *testing.T) {
			d, p := newRawCM(t)
			client := newCMEnd(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := async(func() (*CMConn, error) {
				return Dial(ctx, d, fmt.Sprintf("%v:37", p.addr()), CMOptions{PD: client.pd, SendCQ: client.cq,
					ResponderResources: tc.optRR, InitiatorDepth: tc.optID})
			})
			var req packet.REQ
			tid := p.recv(packet.AttrREQ, &req)
			p.send(tid, &packet.REP{LocalCommID: 0x93, RemoteCommID: req.LocalCommID, LocalQPN: 0x93, StartingPSN: 7,
				ResponderResources: tc.repRR, InitiatorDepth: tc.repID, RNRRetryCount: 7, LocalCAGUID: 0xAB})
			var rtu packet.RTU
			p.recv(packet.AttrRTU, &rtu)
			r := <-res
			require.NoError(t, r.err)
			require.Equal(t, tc.wantRR, r.c.Local.MaxRdAtomic)
			require.Equal(t, tc.wantInit, r.c.Remote.MaxRdAtomic)
			a := r.c.QP.Query()
			require.Equal(t, tc.wantRR, a.MaxDestRdAtomic)
			require.Equal(t, tc.wantInit, a.MaxRdAtomic)
			require.Equal(t, QPSRTS, a.State)
		})
	}
}

// TestCMReadWithoutResponderResources: a Dial whose REQ has initiator
// depth 0 (an application that issues no READ, as perftest's WRITE and
// SEND tests) to a listener with the default depths: the accepted QP has
// max_dest_rd_atomic 0 and the dialer's max_rd_atomic 0, so a READ is
// refused at the post. A dialer that raises its max_rd_atomic anyway (in
// SQD) gets its READ answered with an Invalid Request NAK, as kernel rxe's
// responder answers it (check_resource): the READ completes with
// REM_INV_REQ_ERR and the accepting QP goes to ERR.
func TestCMReadWithoutResponderResources(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := db.ListenCM(38, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	defer l.Close()
	acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
	cc, err := Dial(ctx, da, fmt.Sprintf("%v:38", db.Addr().Addr()), CMOptions{PD: client.pd, SendCQ: client.cq,
		InitiatorDepth: 0, Explicit: QPAttrMaxQPRdAtomic})
	require.NoError(t, err)
	r := <-acc
	require.NoError(t, r.err)
	sc := r.c
	require.Zero(t, sc.QP.Query().MaxDestRdAtomic, "the accepted QP's responder resources")
	require.Equal(t, 16, sc.QP.Query().MaxRdAtomic)
	require.Zero(t, cc.QP.Query().MaxRdAtomic, "the dialer's max_rd_atomic")
	require.Equal(t, 16, cc.QP.Query().MaxDestRdAtomic)

	read := SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{client.mr.SGE(0, 64)},
		RemoteAddr: server.mr.Addr(), RKey: server.mr.RKey()}
	_, err = cc.QP.PostSend(read)
	require.ErrorIs(t, err, ErrInvalidArgument, "a READ with max_rd_atomic 0")

	toSQD(t, cc.QP)
	require.NoError(t, cc.QP.Modify(&QPAttr{MaxRdAtomic: 1}, QPAttrMaxQPRdAtomic))
	require.NoError(t, cc.QP.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	_, err = cc.QP.PostSend(read)
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemInvReqErr, WCRDMARead}}, briefs(waitWCs(t, client.cq, 1)))
	require.Eventually(t, func() bool { return sc.QP.State() == QPSErr }, 5*time.Second, time.Millisecond,
		"the accepting QP after the NAK")
	waitEvent(t, db, EventQPReqErr)
}
