package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAcceptTakesREQPathMTU: an accepted connection's QP takes the REQ's
// path MTU, as kernel ib_cm has the passive side do (cm_req_handler,
// cm_init_qp_rtr_attr): the REP carries no MTU, so the active side sends
// packets of the MTU it asked for, and a passive QP on a smaller one
// refused them (the responder's length check) once the connection was up.
// The listener's CMOptions.MTU used to cap it: a 4 KiB SEND from a Dial at
// 4096 to a listener at 1024 failed after both ends reported success.
func TestAcceptTakesREQPathMTU(t *testing.T) {
	s := listenCM(t, 7471, CMOptions{MTU: MTU1024})
	client, server := s.client, s.server
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc, sc := s.connect(ctx, t, CMOptions{MTU: MTU4096})
	require.Equal(t, MTU4096, cc.Local.MTU)
	require.Equal(t, MTU4096, sc.Local.MTU, "the REQ's path MTU")
	require.Equal(t, MTU4096, sc.Remote.MTU)

	_, err := sc.QP.PostRecv(RecvWR{ID: 1, SGList: []SGE{{Addr: server.mr.Addr(), Length: 4096, LKey: server.mr.LKey()}}})
	require.NoError(t, err)
	_, err = cc.QP.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: client.mr.Addr(), Length: 4096, LKey: client.mr.LKey()}}})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, client.cq).Status)
	wc := waitWC(t, server.cq)
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, uint32(4096), wc.ByteLen)
	require.NoError(t, cc.Disconnect(ctx))
}
