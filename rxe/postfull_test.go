package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPostSendFullQueueBadWR: rxe post_one_send validates a work request
// (validate_send_wr: EINVAL) before it looks for room in the send queue
// (ENOMEM), so a malformed WR posted to a full queue is refused as
// malformed, with ErrInvalidArgument, not ErrNoResources.
func TestPostSendFullQueueBadWR(t *testing.T) {
	// The peer is silent (RESET) and the timeout long: the two WRITEs stay
	// in the 2-deep send queue.
	a, b := smallPair(t, "pipe", qpOpts{timeout: 20, sendWR: 2}, qpOpts{})
	require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
	w := SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	n, err := a.qp.PostSend(w, w)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, bad := range []SendWR{
		{Opcode: WRSend, SGList: make([]SGE, 5)},
		{Opcode: WRSend, Flags: SendInline, InlineData: make([]byte, 65)},
		{Opcode: WRAtomicCmpAndSwp, SGList: []SGE{a.mr.SGE(0, 4)}},
	} {
		n, err = a.qp.PostSend(bad)
		require.Zero(t, n)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.NotErrorIs(t, err, ErrNoResources)
	}
	n, err = a.qp.PostSend(w)
	require.Zero(t, n)
	require.ErrorIs(t, err, ErrNoResources, "a well-formed WR finds the queue full")
}
