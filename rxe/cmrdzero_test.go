package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCMReadWithoutResponderResources: a Dial whose REQ has initiator
// depth 0 (an application that issues no READ, as perftest's WRITE and
// SEND tests) to a listener with the default depths: the accepted QP has
// max_dest_rd_atomic 0 and the dialer's max_rd_atomic 0, so a READ is
// refused at the post. A dialer that raises its max_rd_atomic anyway (in
// SQD) gets its READ answered with an Invalid Request NAK, as kernel rxe's
// responder answers it (check_resource): the READ completes with
// REM_INV_REQ_ERR and the accepting QP goes to ERR.
func TestCMReadWithoutResponderResources(t *testing.T) {
	s := listenCM(t, 38, CMOptions{})
	client, server := s.client, s.server
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, sc := s.connect(ctx, t, CMOptions{InitiatorDepth: 0, Explicit: QPAttrMaxQPRdAtomic})
	require.Zero(t, sc.QP.Query().MaxDestRdAtomic, "the accepted QP's responder resources")
	require.Equal(t, 16, sc.QP.Query().MaxRdAtomic)
	require.Zero(t, cc.QP.Query().MaxRdAtomic, "the dialer's max_rd_atomic")
	require.Equal(t, 16, cc.QP.Query().MaxDestRdAtomic)

	read := SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{client.mr.SGE(0, 64)},
		RemoteAddr: server.mr.Addr(), RKey: server.mr.RKey()}
	_, err := cc.QP.PostSend(read)
	require.ErrorIs(t, err, ErrInvalidArgument, "a READ with max_rd_atomic 0")

	toSQD(t, cc.QP)
	require.NoError(t, cc.QP.Modify(&QPAttr{MaxRdAtomic: 1}, QPAttrMaxQPRdAtomic))
	require.NoError(t, cc.QP.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	_, err = cc.QP.PostSend(read)
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemInvReqErr, WCRDMARead}}, briefs(waitWCs(t, client.cq, 1)))
	require.Eventually(t, func() bool { return sc.QP.State() == QPSErr }, 5*time.Second, time.Millisecond,
		"the accepting QP after the NAK")
	waitEvent(t, s.db, EventQPReqErr)
}
