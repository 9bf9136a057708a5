package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCQOverflow: a CQ that overflows raises CQ_ERR once and its QP goes
// to ERR (IBA 11.4.2.1; protocol.md §6.4; rxe responder class G).
func TestCQOverflow(t *testing.T) {
	t.Run("receive-cq", func(t *testing.T) {
		da, db := newDevices(t, "pipe")
		tiny, err := db.CreateCQ(2, -1)
		require.NoError(t, err)
		a := smallEnd(t, da, nil, qpOpts{})
		b := smallEnd(t, db, nil, qpOpts{})
		// b's receives complete on the tiny CQ, its sends on another.
		qp, err := b.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: b.cq, RecvCQ: tiny, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 8}})
		require.NoError(t, err)
		require.NoError(t, b.qp.Destroy())
		b.qp = qp
		oa := qpOpts{retryCnt: 1} // the unanswered SEND fails after 2 × 67 ms
		link(t, a, b, oa, qpOpts{})
		for i := range 8 {
			_, err := b.qp.PostRecv(RecvWR{ID: uint64(100 + i), SGList: []SGE{b.mr.SGE(0, 64)}})
			require.NoError(t, err)
		}
		post := func(i int) {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
		}
		// Two SENDs fill the CQ (nobody polls it), the third overflows it.
		post(0)
		post(1)
		require.Equal(t, []wcBrief{{0, WCSuccess, WCSend}, {1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 2)))
		post(2)
		post(3)
		ev, others := waitEvent(t, db, EventCQErr)
		require.Same(t, tiny, ev.CQ)
		waitState(t, b.qp, QPSErr)
		require.Empty(t, others)
		require.Empty(t, drainEvents(db, 10*time.Millisecond), "CQ_ERR once, no QP event")
		// The two completions that fit are there, in order.
		wcs := make([]WC, 4)
		require.Equal(t, 2, tiny.Poll(wcs))
		require.Equal(t, []wcBrief{{100, WCSuccess, WCRecv}, {101, WCSuccess, WCRecv}}, briefs(wcs[:2]))
		// The requester: the third SEND is never acknowledged (class G
		// sends no NAK), the fourth flushes.
		got := briefs(waitWCs(t, a.cq, 2))
		require.Equal(t, []wcBrief{{2, WCRetryExcErr, WCSend}, {3, WCWRFlushErr, WCSend}}, got)
		require.Equal(t, uint64(1), db.Counters().QPErrors)
	})

	t.Run("send-cq", func(t *testing.T) {
		da, db := newDevices(t, "pipe")
		tiny, err := da.CreateCQ(2, -1)
		require.NoError(t, err)
		a := smallEnd(t, da, nil, qpOpts{cq: tiny})
		b := smallEnd(t, db, nil, qpOpts{})
		link(t, a, b, qpOpts{}, qpOpts{})
		for i := range 5 {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			require.NoError(t, err)
		}
		requireSendCQOverflowed(t, da, tiny, a.qp, WCRDMAWrite)
		require.Empty(t, drainEvents(da, 10*time.Millisecond), "CQ_ERR once")
		require.Equal(t, uint64(3), a.qp.Counters().Requester.CQOverflow, "WR 2 and the flushes of WRs 3 and 4 found it full")
	})
}

// TestCQWait: Wait blocks for a completion, honours its context, and
// refuses an empty slice.
func TestCQWait(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQ(4, -1)
	require.NoError(t, err)
	_, err = cq.Wait(context.Background(), nil)
	require.ErrorIs(t, err, ErrInvalidArgument)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cq.Wait(ctx, make([]WC, 1))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the cancel", err)
	case <-time.After(10 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testutil.Bound()):
		t.Fatal("Wait ignored the cancel")
	}

	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err = cq.Wait(ctx, make([]WC, 1))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A Wait blocked when the CQ is destroyed returns ErrClosed.
	go func() {
		_, err := cq.Wait(context.Background(), make([]WC, 1))
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, cq.Destroy())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(testutil.Bound()):
		t.Fatal("Wait ignored Destroy")
	}
}

// notifyPair connects an RC end on da to one on db whose receive CQ rcq
// has the completion channel ch.
func notifyPair(t *testing.T, da, db *Device) (a, b *end, rcq *CQ, ch *CompChannel) {
	t.Helper()
	ch = NewCompChannel(4)
	rcq, err := db.CreateCQWith(CQAttr{CQE: 64, Vector: -1, Channel: ch})
	require.NoError(t, err)
	a = smallEnd(t, da, nil, qpOpts{})
	b = smallEnd(t, db, nil, qpOpts{cq: rcq})
	link(t, a, b, qpOpts{}, qpOpts{})
	return a, b, rcq, ch
}

// TestCQNotify: ReqNotify arms one notification (ibv_req_notify_cq); with
// solicitedOnly it fires only for a solicited receive or an error
// completion (IBA 11.4.2.2).
func TestCQNotify(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b, rcq, ch := notifyPair(t, da, db)

	plain, err := db.CreateCQ(4, -1)
	require.NoError(t, err)
	require.ErrorIs(t, plain.ReqNotify(false), ErrInvalidState, "no channel")

	// notified counts the notifications: it waits for the first one up to
	// wait (it is sent just after the completion is queued), then briefly
	// for more.
	notified := func(wait time.Duration) int {
		n := 0
		for {
			select {
			case cq := <-ch.C:
				require.Same(t, rcq, cq)
				n++
				wait = 5 * time.Millisecond
			case <-time.After(wait):
				return n
			}
		}
	}
	// one only stops a hung test; none is how long no notification must come.
	one, none := testutil.Bound(), 5*time.Millisecond
	send := func(id uint64, flags SendFlags) {
		t.Helper()
		_, err := b.qp.PostRecv(RecvWR{ID: id, SGList: []SGE{b.mr.SGE(0, 64)}})
		require.NoError(t, err)
		_, err = a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled | flags, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{id, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
		require.Equal(t, []wcBrief{{id, WCSuccess, WCRecv}}, briefs(waitWCs(t, rcq, 1)))
	}

	send(1, 0)
	require.Zero(t, notified(none), "not armed")
	require.NoError(t, rcq.ReqNotify(false))
	send(2, 0)
	send(3, 0)
	require.Equal(t, 1, notified(one), "one notification per arm")
	require.NoError(t, rcq.ReqNotify(false))
	send(4, SendSolicited)
	require.Equal(t, 1, notified(one), "re-armed")

	require.NoError(t, rcq.ReqNotify(true))
	send(5, 0)
	require.Zero(t, notified(none), "solicited only: an unsolicited SEND does not fire")
	send(6, SendSolicited)
	require.Equal(t, 1, notified(one), "a solicited SEND fires")
	send(7, SendSolicited)
	require.Zero(t, notified(none), "disarmed")

	// An error completion fires a solicited-only arm: a bad-rkey WRITE
	// fails b, whose posted receive then flushes into rcq.
	require.NoError(t, rcq.ReqNotify(true))
	_, err = b.qp.PostRecv(RecvWR{ID: 8, SGList: []SGE{b.mr.SGE(0, 64)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend(SendWR{ID: 8, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 1})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{8, WCRemAccessErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	require.Equal(t, []wcBrief{{8, WCWRFlushErr, WCRecv}}, briefs(waitWCs(t, rcq, 1)))
	require.Equal(t, 1, notified(one), "an error completion fires")
	require.Zero(t, db.Counters().NotifyDropped)
}

// TestCQDestroyWakesEveryWaiter: every goroutine asleep in CQ.Wait returns
// ErrClosed when the CQ is destroyed. Destroy used to put one token in the
// one-slot wake channel, which woke one waiter; the others slept until
// their context ended or the device closed.
func TestCQDestroyWakesEveryWaiter(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQ(4, -1)
	require.NoError(t, err)
	const waiters = 3
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := cq.Wait(context.Background(), make([]WC, 1))
			done <- err
		}()
	}
	time.Sleep(20 * time.Millisecond) // the waiters are asleep in Wait (were they not, each would return at its check of destroyed)
	require.NoError(t, cq.Destroy())
	for i := range waiters {
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrClosed)
		case <-time.After(testutil.Bound()):
			t.Fatalf("%d of %d waiters still in Wait after CQ.Destroy", waiters-i, waiters)
		}
	}
}

// TestVerbsOnDestroyedObjects: CQ.ReqNotify on a destroyed CQ and
// QP.SetPeerReceiveBuffer on a destroyed QP fail with ErrClosed, as Poll,
// Modify, PostSend and PostRecv do; both used to return nil.
func TestVerbsOnDestroyedObjects(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	cq, err := d.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: NewCompChannel(1)})
	require.NoError(t, err)
	require.NoError(t, cq.Destroy())
	require.ErrorIs(t, cq.ReqNotify(false), ErrClosed)

	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq2, err := d.CreateCQ(4, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq2, RecvCQ: cq2, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	require.NoError(t, err)
	require.NoError(t, qp.Destroy())
	require.ErrorIs(t, qp.SetPeerReceiveBuffer(1<<20, 1), ErrClosed)
}

// requireSendCQOverflowed checks what a two-entry send CQ of qp on d
// leaves once a third signaled completion found it full: a CQ_ERR event
// for it and no other event, the QP in ERR, and the first two completions,
// of WRs 0 and 1, successful with opcode op.
func requireSendCQOverflowed(t *testing.T, d *Device, cq *CQ, qp *QP, op WCOpcode) {
	t.Helper()
	ev, others := waitEvent(t, d, EventCQErr)
	require.Same(t, cq, ev.CQ)
	require.Empty(t, others)
	waitState(t, qp, QPSErr)
	wcs := make([]WC, 4)
	require.Equal(t, 2, cq.Poll(wcs))
	require.Equal(t, []wcBrief{{0, WCSuccess, op}, {1, WCSuccess, op}}, briefs(wcs[:2]))
}

// TestCreateCQSizeOutsideDeviceLimits: CreateCQWith refuses a CQ of fewer
// than 1 or more than the device's MaxCQE entries with ErrInvalidArgument,
// as rxe_cq_chk_attr refuses cqe <= 0 and cqe > max_cqe with EINVAL.
func TestCreateCQSizeOutsideDeviceLimits(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	limit := da.Attr().MaxCQE
	cases := []struct {
		name string
		cqe  int
	}{{"negative", -1}, {"zero", 0}, {"one-above-max", limit + 1}, {"far-above-max", limit + 1000}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cq, err := da.CreateCQWith(CQAttr{CQE: c.cqe, Vector: -1})
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Nil(t, cq)
		})
	}
	cq, err := da.CreateCQWith(CQAttr{CQE: 1, Vector: -1})
	require.NoError(t, err)
	require.NoError(t, cq.Destroy())
}
