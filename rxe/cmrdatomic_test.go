package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// The READ/atomic depths of a CM connection, both directions, against
// peers that ask for more than the device's 128 (the REQ's and REP's
// 8-bit Responder Resources and Initiator Depth fields): the passive side
// uses the smaller of the REQ's offer and its own (CMOptions, bounded by
// the device's max_qp_rd_atom and max_qp_init_rd_atom), as librdmacm's
// rdma_accept bounds the REQ's values by the device's; the active side
// the REP's, bounded by the device's (cm_rep_handler); the QP's
// attributes and CMConn.Local/Remote.MaxRdAtomic say what is used.

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

// TestAcceptClampsREQRdAtomic: the passive side. A REQ whose initiator
// depth is 0 (its QP issues no READ) gets a REP with 0 responder resources
// and a QP with max_dest_rd_atomic 0, whatever the listener's options
// offer; a REQ with 0 responder resources, a QP that issues none.
func TestAcceptClampsREQRdAtomic(t *testing.T) {
	for _, tc := range []struct {
		reqRR, reqID     uint8 // the peer's REQ: its responder resources and initiator depth
		optRR, optID     int   // the listener's CMOptions
		wantRR, wantInit int   // ours: max_dest_rd_atomic (the REP's responder resources) and max_rd_atomic (its initiator depth)
	}{
		{255, 255, 0, 0, 16, 16},
		{200, 200, 200, 200, 128, 128},
		{16, 0, 0, 0, 0, 16},
		{16, 0, 128, 128, 0, 16},
		{0, 5, 0, 0, 5, 0},
		{0, 0, 4, 4, 0, 0},
		{255, 255, 255, 255, 128, 128},
		{255, 3, 128, 128, 3, 128},
		{2, 255, 128, 128, 128, 2},
		{0, 0, 0, 0, 0, 0}, // the peer takes and issues no READs: neither do we (cm_req_handler)
	} {
		t.Run(fmt.Sprintf("REQ %d-%d opts %d-%d", tc.reqRR, tc.reqID, tc.optRR, tc.optID), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const port = 34
			p, l := rawListener(t, port, CMOptions{ResponderResources: tc.optRR, InitiatorDepth: tc.optID})
			req := p.req(port, 0x81)
			req.ResponderResources, req.InitiatorDepth = tc.reqRR, tc.reqID
			p.send(1, req)
			res := async(func() (*CMConn, error) { return l.Accept(ctx) })
			var rep packet.REP
			p.recv(packet.AttrREP, &rep)
			require.Equal(t, tc.wantRR, int(rep.ResponderResources), "the REP's responder resources")
			require.Equal(t, tc.wantInit, int(rep.InitiatorDepth), "the REP's initiator depth")
			p.send(2, rtuFor(&rep))
			requireRdAtomic(t, awaitConn(ctx, t, res, "Accept"), tc.wantRR, tc.wantInit)
		})
	}
}

// TestDialClampsREPRdAtomic: the active side's QP takes the REP's
// initiator depth as its max_dest_rd_atomic and its responder resources as
// its max_rd_atomic, as kernel ib_cm's active side does (cm_rep_handler,
// and librdmacm's ucma_process_conn_resp, which overrides neither): 0
// stays 0, and a REP that answers more than the REQ offered is taken too,
// as a librdmacm application's rdma_accept with depths of its own sends
// one (librdmacm does not bound them by the REQ's) and configures its QP
// with them; only the device's maxima bound them.
func TestDialClampsREPRdAtomic(t *testing.T) {
	for _, tc := range []struct {
		optRR, optID     int   // the Dial's CMOptions
		sentRR, sentID   uint8 // what its REQ carries
		repRR, repID     uint8 // the peer's REP
		wantRR, wantInit int   // ours: max_dest_rd_atomic and max_rd_atomic
	}{
		{0, 0, 16, 16, 255, 255, 128, 128}, // the REP's, bounded by the device's (cm_rep_handler)
		{200, 200, 128, 128, 255, 255, 128, 128},
		{255, 255, 128, 128, 200, 200, 128, 128},
		{128, 128, 128, 128, 5, 7, 7, 5},
		{0, 0, 16, 16, 0, 0, 0, 0},
		{0, 0, 16, 16, 16, 0, 0, 16},
		{0, 0, 16, 16, 0, 16, 16, 0},
		{4, 4, 4, 4, 8, 8, 8, 8},
		{4, 4, 4, 4, 16, 2, 2, 16},
	} {
		t.Run(fmt.Sprintf("opts %d-%d REP %d-%d", tc.optRR, tc.optID, tc.repRR, tc.repID), func(t *testing.T) {
			d, p := newRawCM(t)
			client := newCMEnd(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := async(func() (*CMConn, error) {
				return Dial(ctx, d, fmt.Sprintf("%v:35", p.addr()), CMOptions{PD: client.pd, SendCQ: client.cq,
					ResponderResources: tc.optRR, InitiatorDepth: tc.optID})
			})
			var req packet.REQ
			tid := p.recv(packet.AttrREQ, &req)
			require.Equal(t, tc.sentRR, req.ResponderResources, "the REQ's responder resources")
			require.Equal(t, tc.sentID, req.InitiatorDepth, "the REQ's initiator depth")
			p.send(tid, &packet.REP{LocalCommID: 0x91, RemoteCommID: req.LocalCommID, LocalQPN: 0x91, StartingPSN: 7,
				ResponderResources: tc.repRR, InitiatorDepth: tc.repID, RNRRetryCount: 7, LocalCAGUID: 0xAB})
			var rtu packet.RTU
			p.recv(packet.AttrRTU, &rtu)
			r := <-res
			require.NoError(t, r.err)
			requireRdAtomic(t, r.c, tc.wantRR, tc.wantInit)
		})
	}
}

// requireRdAtomic requires c's QP to be in RTS with max_dest_rd_atomic
// wantRR and max_rd_atomic wantInit, and c's Local and Remote to record
// them.
func requireRdAtomic(t *testing.T, c *CMConn, wantRR, wantInit int) {
	t.Helper()
	require.Equal(t, wantRR, c.Local.MaxRdAtomic)
	require.Equal(t, wantInit, c.Remote.MaxRdAtomic)
	a := c.QP.Query()
	require.Equal(t, wantRR, a.MaxDestRdAtomic)
	require.Equal(t, wantInit, a.MaxRdAtomic)
	require.Equal(t, QPSRTS, a.State)
}
