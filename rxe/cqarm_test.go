package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCQNotifyArmNextCompletionWins: a CQ armed both for the next
// completion and for solicited completions only, in either order, before
// a notification fires, fires at the next completion of any kind (IBA
// 11.4.2.2, C11-31 and C11-32: the request that reports more wins; kernel
// rxe_req_notify_cq keeps or sets IB_CQ_NEXT_COMP). Narrowing the arm
// would leave an application that armed for every completion waiting for
// a solicited one.
func TestCQNotifyArmNextCompletionWins(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second bool // ReqNotify's solicitedOnly, in order
	}{
		{"next completion kept", false, true},
		{"solicited-only widened", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a, b, rcq, ch := notifyPair(t, da, db)

			require.NoError(t, rcq.ReqNotify(tc.first))
			require.NoError(t, rcq.ReqNotify(tc.second))
			_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 64)}})
			require.NoError(t, err)
			_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			select {
			case cq := <-ch.C:
				require.Same(t, rcq, cq)
			case <-time.After(testutil.Bound()):
				t.Fatal("no notification for the unsolicited receive: the arm for the next completion was lost")
			}
			require.Equal(t, []wcBrief{{1, WCSuccess, WCRecv}}, briefs(waitWCs(t, rcq, 1)))
		})
	}
}

// TestCQReqNotifyAfterClose: after Device.Close no completion can come, so
// arming a CQ fails with ErrClosed, as the other verbs that change state
// do (Device.Close), rather than leaving a notification loop waiting on
// the channel for ever. The flush completions of Close still notify a CQ
// armed before it.
func TestCQReqNotifyAfterClose(t *testing.T) {
	da, db := newDevices(t, "pipe")
	_, a, cq, ch := notifyPair(t, db, da) // a on da, with the channel's CQ
	_, err := a.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{a.mr.SGE(0, 64)}})
	require.NoError(t, err)
	require.NoError(t, cq.ReqNotify(false))

	require.NoError(t, da.Close())
	select {
	case got := <-ch.C:
		require.Same(t, cq, got)
	case <-time.After(testutil.Bound()):
		t.Fatal("no notification for the flush completion of Close")
	}
	require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCRecv}}, briefs(waitWCs(t, cq, 1)))
	require.ErrorIs(t, cq.ReqNotify(false), ErrClosed)
	require.ErrorIs(t, cq.ReqNotify(true), ErrClosed)
}

// TestCompChannelFromConstructorOnly: a CompChannel's C is receive-only
// (a user cannot close the channel the device sends on), so only
// NewCompChannel makes a usable one; a CQ with a zero CompChannel is
// refused and counts against no limit.
func TestCompChannelFromConstructorOnly(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	before := da.Attr()
	_, err := da.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: &CompChannel{}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, before, da.Attr())
	for _, v := range da.Vectors() {
		require.Zero(t, v.CQs, "a refused CQ counts on no vector")
	}
	cq, err := da.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: NewCompChannel(1)})
	require.NoError(t, err)
	require.NoError(t, cq.Destroy())
}
