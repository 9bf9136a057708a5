package rxe

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
	"github.com/stretchr/testify/require"
)

// TestWithdrawnREQLeavesBacklog: a request its peer withdraws while it
// waits in the listener's backlog (a REJ with reason timeout naming it by
// the peer's comm ID and CA GUID: the peer's Dial gave up, or its REQ's
// retries ran out; kernel cm_rej_handler ends a REQ received so) leaves
// the backlog at once: its slot is free for the next request, it is
// counted as withdrawn, and Accept neither returns it nor sets up a QP
// for it. A full backlog of withdrawn requests used to refuse the next
// one with "no resources", and Accept made a QP for each only to find
// it gone.
func TestWithdrawnREQLeavesBacklog(t *testing.T) {
	for _, msg := range []uint8{packet.MsgOther, packet.MsgREQ} { // Dial's Abort, a REQ's last retry
		t.Run(map[uint8]string{packet.MsgOther: "peer aborts", packet.MsgREQ: "peer's REQ times out"}[msg], func(t *testing.T) {
			const port = 35
			p, l := rawListener(t, port, CMOptions{})
			var qps atomic.Int32
			l.newQP = func(o *CMOptions) (*QP, error) {
				qps.Add(1)
				return newCMQP(o)
			}
			const backlog = 64
			for i := range uint32(backlog) {
				p.send(uint64(i), p.req(port, 0x100+i))
			}
			require.Eventually(t, func() bool { return len(l.reqs) == backlog }, testutil.Bound(), time.Millisecond, "the backlog is full")
			for i := range uint32(backlog) {
				rej := packet.REJ{LocalCommID: 0x100 + i, MessageRejected: msg, RejectedInfoLen: 8, Reason: packet.RejTimeout}
				binary.BigEndian.PutUint64(rej.ARI[:], 0xAB) // the raw peer's CA GUID
				p.send(uint64(i), &rej)
			}
			// Withdrawn counts a request once unqueue has taken it out and
			// put the others back; the backlog's length alone is 0 for a
			// moment inside each unqueue, and an Accept started then could
			// take a request whose REJ is still to come.
			require.Eventually(t, func() bool { return l.Counters().Withdrawn == backlog && len(l.reqs) == 0 },
				testutil.Bound(), time.Millisecond, "the withdrawn requests leave the backlog")

			ctx := testutil.Context(t)
			acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
			next := p.req(port, 0x200)
			p.send(1000, next)
			var rep packet.REP
			p.recv(packet.AttrREP, &rep) // not a REJ with "no resources"
			require.Equal(t, next.LocalCommID, rep.RemoteCommID)
			p.send(1001, rtuFor(&rep))
			c := awaitConn(ctx, t, acc, "Accept")
			require.Equal(t, next.LocalQPN, c.Remote.QPN, "Accept returns the live request")
			require.Equal(t, int32(1), qps.Load(), "no QP for a withdrawn request")
			require.Equal(t, CMListenerCounters{Accepted: 1, Withdrawn: backlog}, l.Counters())
		})
	}
}

// TestAcceptDuringDeviceClose: an Accept whose request's QP setup meets
// the device's Close (CreateQP or the moves to RTS then fail with
// ErrClosed) returns ErrClosed itself, as Dial does and as Accept does
// when the close comes before or after the setup, and counts no failure:
// it used to return an *AcceptError, which says that the listener still
// serves and that the accept loop should call Accept again.
func TestAcceptDuringDeviceClose(t *testing.T) {
	for name, closeAt := range map[string]func(t *testing.T, d *Device, o *CMOptions) (*QP, error){
		"before CreateQP": func(t *testing.T, d *Device, o *CMOptions) (*QP, error) {
			require.NoError(t, d.Close())
			return newCMQP(o)
		},
		"before RTR": func(t *testing.T, d *Device, o *CMOptions) (*QP, error) {
			qp, err := newCMQP(o)
			require.NoError(t, d.Close())
			return qp, err
		},
	} {
		t.Run(name, func(t *testing.T) {
			const port = 36
			p, l := rawListener(t, port, CMOptions{})
			l.newQP = func(o *CMOptions) (*QP, error) { return closeAt(t, p.dev, o) }
			p.send(1, p.req(port, 0x301))
			ctx := testutil.Context(t)
			_, err := l.Accept(ctx)
			require.True(t, err == ErrClosed, "Accept returned %v, not ErrClosed itself", err)
			require.Zero(t, l.Counters().Failed)
		})
	}
}

// markerREQ sends p's device a REQ for a port nobody listens on and waits
// for its REJ (invalid service ID) as the next MAD the device sends: the
// device answers MADs in the order they come, so nothing it sent for the
// MADs before the marker comes after the marker's REJ.
func markerREQ(t *testing.T, p *rawCM, id uint32) {
	t.Helper()
	p.send(uint64(id), p.req(9, id))
	r := p.next()
	require.Equal(t, packet.AttrREJ, r.attr, "the marker's REJ, and nothing before it")
	var rej packet.REJ
	require.NoError(t, rej.Decode(r.msg))
	require.Equal(t, packet.REJ{RemoteCommID: id, MessageRejected: packet.MsgREQ, Reason: packet.RejInvalidServiceID}, rej)
}

// TestListenBacklogFullDrops: a REQ that finds the listener's backlog full
// (64 requests no Accept took) is dropped unanswered, neither rejected nor
// told to wait, and counted as dropped, as kernel rdma_cm drops one beyond
// its listener's backlog: ucma_connect_event_handler fails with -ENOMEM,
// and ib_cm's cm_destroy_id does not reject a REQ received so ("allow
// future retries": cm_reset_to_idle), forgetting it. A repeat of it while
// the backlog is full is dropped too (no MRA: nothing of it is kept); once
// a slot frees, the repeat is a new request, queued for Accept.
func TestListenBacklogFullDrops(t *testing.T) {
	const port = 37
	p, l := rawListener(t, port, CMOptions{})
	const backlog = 64
	require.Equal(t, backlog, cap(l.reqs))
	for i := range uint32(backlog) {
		p.send(uint64(i), p.req(port, 0x100+i))
	}
	require.Eventually(t, func() bool { return len(l.reqs) == backlog }, testutil.Bound(), time.Millisecond, "the backlog is full")

	late := p.req(port, 0x200)
	for try := range 2 { // the REQ, then its retransmission (same transaction)
		p.send(0x2000, late)
		markerREQ(t, p, 0x300+uint32(try))
		require.Equal(t, CMListenerCounters{Dropped: uint64(try + 1)}, l.Counters(), "try %d", try)
	}
	require.Equal(t, backlog, len(l.reqs))
	require.Equal(t, backlog, cmAgentLen(p.dev), "the agent keeps nothing of the dropped REQ")

	// The peer of the first queued request withdraws it (its REQ timed
	// out): its slot frees, and the late REQ's next retransmission takes it.
	rej := packet.REJ{LocalCommID: 0x100, MessageRejected: packet.MsgREQ, RejectedInfoLen: 8, Reason: packet.RejTimeout}
	binary.BigEndian.PutUint64(rej.ARI[:], 0xAB) // the raw peer's CA GUID
	p.send(0, &rej)
	require.Eventually(t, func() bool { return len(l.reqs) == backlog-1 }, testutil.Bound(), time.Millisecond)
	p.send(0x2000, late)
	markerREQ(t, p, 0x310)
	require.Equal(t, backlog, len(l.reqs))
	require.Equal(t, CMListenerCounters{Dropped: 2, Withdrawn: 1}, l.Counters())

	// Accept serves the queue in order: the 63 before it, then the late
	// REQ, answered in its retransmission's transaction.
	ctx := testutil.Context(t)
	for i := 1; i <= backlog; i++ {
		acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
		var rep packet.REP
		tid := p.recv(packet.AttrREP, &rep)
		want := uint32(0x100 + i)
		if i == backlog {
			want = late.LocalCommID
			require.Equal(t, uint64(0x2000), tid)
		}
		require.Equal(t, want, rep.RemoteCommID)
		p.send(tid, rtuFor(&rep))
		c := awaitConn(ctx, t, acc, "Accept")
		require.Equal(t, want, c.Remote.QPN) // p.req's QPN is its comm ID
		c.Close()
	}
	require.Equal(t, CMListenerCounters{Accepted: backlog, Dropped: 2, Withdrawn: 1}, l.Counters())
}

// TestDialWaitsOutFullBacklog: a Dial whose REQ finds the listener's
// backlog full connects once an Accept frees a slot, within its REQ's
// retries: the dropped REQ's retransmission is taken as a new request, as
// a kernel rdma_cm listener lets an rdma_connect retry past a full backlog
// (cm_destroy_id does not reject on -ENOMEM), rather than failing with a
// REJ. The backlog is made 1 here.
func TestDialWaitsOutFullBacklog(t *testing.T) {
	s := listenCM(t, 38, CMOptions{})
	da, db, l := s.da, s.db, s.l
	ctx := testutil.Context(t)
	g := db.gsiOf()
	g.mu.Lock()
	l.reqs = make(chan cm.Event, 1)
	g.mu.Unlock()

	first := s.dialAsync(ctx, CMOptions{})
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, testutil.Bound(), time.Millisecond, "the first fills the backlog")
	// The second's REQ is resent every 4.096 µs · 2^14 + 2 × 17 ms ≈ 100 ms.
	second := s.dialAsync(ctx, CMOptions{CMResponseTimeout: 14, MaxCMRetries: 15})
	require.Eventually(t, func() bool { return l.Counters().Dropped >= 1 }, testutil.Bound(), time.Millisecond, "the second is dropped")

	for _, dial := range []<-chan connResult{first, second} {
		sc, err := l.Accept(ctx)
		require.NoError(t, err)
		defer sc.Close()
		c := awaitConn(ctx, t, dial, "Dial")
		defer c.Close()
		require.Equal(t, c.Local.QPN, sc.Remote.QPN)
	}
	c := l.Counters()
	require.Equal(t, uint64(2), c.Accepted)
	require.Zero(t, c.Refused)
	require.Zero(t, da.GSICounters().CM.RejectsSent)
}
