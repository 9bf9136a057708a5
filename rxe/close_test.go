package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestVerbsAfterClose: after Device.Close every verbs call that changes
// state fails with ErrClosed, and the work requests outstanding at Close
// are not lost: they complete with WR_FLUSH_ERR on their CQs, which stay
// pollable.
func TestVerbsAfterClose(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	srq, err := a.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	// Outstanding at Close: two receives on a with no sender, and a SEND
	// that b keeps answering with RNR NAKs (b has no receive posted and a
	// retries RNR forever).
	_, err = a.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{a.mr.SGE(0, 64)}}, RecvWR{ID: 2, SGList: []SGE{a.mr.SGE(64, 64)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend(SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.qp.Counters().Responder.SendRNRErr > 0 }, testutil.Bound(), time.Millisecond,
		"b never refused the SEND")

	// A Wait on an empty CQ, blocked when the device closes, ends.
	idle, err := a.dev.CreateCQ(4, -1)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := idle.Wait(context.Background(), make([]WC, 1))
		waited <- err
	}()

	require.NoError(t, a.dev.Close())
	require.ErrorIs(t, a.dev.Close(), ErrClosed)
	select {
	case err := <-waited:
		require.ErrorIs(t, err, ErrClosed, "a Wait blocked at Close")
	case <-time.After(testutil.Bound()):
		t.Fatal("a Wait blocked at Close did not end")
	}

	got := briefs(waitWCs(t, a.cq, 3))
	require.ElementsMatch(t, []wcBrief{{1, WCWRFlushErr, WCRecv}, {2, WCWRFlushErr, WCRecv}, {3, WCWRFlushErr, WCSend}}, got,
		"the work requests outstanding at Close")
	require.Equal(t, QPSErr, a.qp.State())
	_, err = a.cq.Wait(context.Background(), make([]WC, 1))
	require.ErrorIs(t, err, ErrClosed, "Wait on a drained CQ of a closed device")

	wr := SendWR{ID: 4, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}}
	rwr := RecvWR{ID: 5, SGList: []SGE{a.mr.SGE(0, 64)}}
	cases := []struct {
		name string
		call func() error
	}{
		{"PostSend", func() error { _, err := a.qp.PostSend(wr); return err }},
		{"PostRecv", func() error { _, err := a.qp.PostRecv(rwr); return err }},
		{"Modify", func() error { return a.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState) }},
		{"MR.Dereg", a.mr.Dereg},
		{"SRQ.PostRecv", func() error { _, err := srq.PostRecv(rwr); return err }},
		{"SRQ.Modify", func() error { return srq.SetLimit(1) }},
		{"QP.Destroy", a.qp.Destroy},
		{"SRQ.Destroy", srq.Destroy},
		{"CQ.Destroy", a.cq.Destroy},
		{"PD.Dealloc", a.pd.Dealloc},
		{"AllocPD", func() error { _, err := a.dev.AllocPD(); return err }},
		{"RegMR", func() error { _, err := a.pd.RegMR(make([]byte, 8), AccessLocalWrite); return err }},
		{"CreateCQ", func() error { _, err := a.dev.CreateCQ(4, -1); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.call(), ErrClosed)
		})
	}
	require.Zero(t, a.cq.Poll(make([]WC, 4)), "completions after the calls refused")
}

// TestPostFullQueue: a full send queue refuses further work requests with
// ErrNoResources, as a full receive queue does (ibv_post_send and
// ibv_post_recv return ENOMEM), and the WRs before the refused one are
// posted.
func TestPostFullQueue(t *testing.T) {
	const depth = 4
	cases := []struct {
		name string
		post func(e *end, ids ...uint64) (int, error)
	}{
		{"send", func(e *end, ids ...uint64) (int, error) {
			wrs := make([]SendWR, len(ids))
			for i, id := range ids {
				wrs[i] = SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{e.mr.SGE(0, 8)}}
			}
			return e.qp.PostSend(wrs...)
		}},
		{"recv", func(e *end, ids ...uint64) (int, error) {
			wrs := make([]RecvWR, len(ids))
			for i, id := range ids {
				wrs[i] = RecvWR{ID: id, SGList: []SGE{e.mr.SGE(0, 64)}}
			}
			return e.qp.PostRecv(wrs...)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// b posts no receives: a's SENDs stay outstanding (RNR, retried
			// forever), and a's receives are never consumed.
			a, _ := smallPair(t, "pipe", qpOpts{sendWR: depth, recvWR: depth}, qpOpts{})
			n, err := c.post(a, 1, 2, 3)
			require.NoError(t, err)
			require.Equal(t, 3, n)
			n, err = c.post(a, 4, 5, 6)
			require.ErrorIs(t, err, ErrNoResources)
			require.Equal(t, 1, n, "the WR that fits is posted")
			n, err = c.post(a, 7)
			require.ErrorIs(t, err, ErrNoResources)
			require.Zero(t, n)
		})
	}
}
