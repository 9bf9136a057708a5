package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCQNotifyDroppedCounted: a notification that finds the CompChannel
// full is dropped, never blocks the device, and is counted in
// Counters.NotifyDropped (NewCompChannel).
func TestCQNotifyDroppedCounted(t *testing.T) {
	da, db := newDevices(t, "pipe")
	ch := NewCompChannel(1)
	rcq, err := db.CreateCQWith(CQAttr{CQE: 64, Vector: -1, Channel: ch})
	require.NoError(t, err)
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{cq: rcq})
	link(t, a, b, qpOpts{}, qpOpts{})

	send := func(id uint64) {
		t.Helper()
		require.NoError(t, rcq.ReqNotify(false))
		_, err := b.qp.PostRecv(RecvWR{ID: id, SGList: []SGE{b.mr.SGE(0, 64)}})
		require.NoError(t, err)
		_, err = a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{id, WCSuccess, WCRecv}}, briefs(waitWCs(t, rcq, 1)))
	}
	send(1)
	require.Eventually(t, func() bool { return len(ch.C) == 1 }, testutil.Bound(), time.Millisecond, "the first notification")
	require.Zero(t, db.Counters().NotifyDropped)
	send(2) // the channel is full: this notification is dropped
	require.Eventually(t, func() bool { return db.Counters().NotifyDropped == 1 }, testutil.Bound(), time.Millisecond)
	require.Len(t, ch.C, 1)
}

// TestCQDestroyInUseByOneQueue: a CQ that is the send CQ (or the receive
// CQ) of one QP only is still in use: Destroy fails with ErrInUse until the
// QP is destroyed (ibv_destroy_cq fails with EBUSY while a QP uses the CQ).
func TestCQDestroyInUseByOneQueue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sendSide bool
	}{{"send CQ", true}, {"receive CQ", false}} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newDevices(t, "pipe")
			pd, err := d.AllocPD()
			require.NoError(t, err)
			scq, err := d.CreateCQ(4, -1)
			require.NoError(t, err)
			rcq, err := d.CreateCQ(4, -1)
			require.NoError(t, err)
			qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: scq, RecvCQ: rcq,
				Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			cq := rcq
			if tc.sendSide {
				cq = scq
			}
			require.ErrorIs(t, cq.Destroy(), ErrInUse)
			require.NoError(t, qp.Destroy())
			require.NoError(t, cq.Destroy())
		})
	}
}

// TestCQDestroyReleasesVector: a destroyed CQ no longer counts on its
// completion vector (Device.Vectors), so the least-used pick of a later
// CreateCQ (vector -1) does not avoid it.
func TestCQDestroyReleasesVector(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQ(4, -1)
	require.NoError(t, err)
	v := cq.Vector()
	require.Equal(t, 1, d.Vectors()[v].CQs)
	require.NoError(t, cq.Destroy())
	require.Zero(t, d.Vectors()[v].CQs)
}
