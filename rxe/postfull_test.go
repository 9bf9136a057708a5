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

// TestPostRecvFullQueueBadWR: rxe post_one_recv (and rdma-core's
// rxe_post_one_recv) looks for room in the receive queue (ENOMEM) before it
// checks the WR's SGE count (EINVAL), the reverse of the send side, so a
// WR with too many SGEs posted to a full queue, a QP's own or an SRQ, is
// refused with ErrNoResources; to a queue with room, with
// ErrInvalidArgument.
func TestPostRecvFullQueueBadWR(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 2, MaxSGE: 1})
	require.NoError(t, err)
	qp := smallEnd(t, d, pd, qpOpts{recvWR: 2}).qp
	require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	for _, tc := range []struct {
		name string
		post func(...RecvWR) (int, error)
		sges int // more than the queue's max SGEs
	}{
		{"qp", qp.PostRecv, 5},
		{"srq", srq.PostRecv, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := RecvWR{ID: 9, SGList: make([]SGE, tc.sges)}
			n, err := tc.post(bad)
			require.Zero(t, n)
			require.ErrorIs(t, err, ErrInvalidArgument, "room left: malformed")
			n, err = tc.post(RecvWR{ID: 1}, RecvWR{ID: 2}, bad)
			require.Equal(t, 2, n)
			require.ErrorIs(t, err, ErrNoResources, "the queue is full first")
			require.NotErrorIs(t, err, ErrInvalidArgument)
		})
	}
}
