package rxe

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// srqRig is n QPs on device b sharing one SRQ, each connected to its own
// QP on device a.
type srqRig struct {
	a   []*end
	b   []*end
	srq *SRQ
	bcq *CQ
}

func newSRQRig(t *testing.T, kind string, n int, attr SRQAttr, oa qpOpts) *srqRig {
	t.Helper()
	da, db := newDevices(t, kind)
	pd, err := db.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(attr)
	require.NoError(t, err)
	bcq, err := db.CreateCQ(256, -1)
	require.NoError(t, err)
	r := &srqRig{srq: srq, bcq: bcq}
	for range n {
		a := smallEnd(t, da, nil, oa)
		b := smallEnd(t, db, pd, qpOpts{srq: srq, cq: bcq})
		link(t, a, b, oa, qpOpts{})
		r.a, r.b = append(r.a, a), append(r.b, b)
	}
	return r
}

func (r *srqRig) post(t *testing.T, ids ...uint64) {
	t.Helper()
	b := r.b[0]
	for _, id := range ids {
		_, err := r.srq.PostRecv(RecvWR{ID: id, SGList: []SGE{b.mr.SGE(int(id%64)*256, 256)}})
		require.NoError(t, err)
	}
}

func (r *srqRig) send(t *testing.T, i int, id uint64) {
	t.Helper()
	a := r.a[i]
	_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 16)}})
	require.NoError(t, err)
}

// TestSRQManyQPs: QPs on one SRQ take its WQEs in order.
func TestSRQManyQPs(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			r := newSRQRig(t, kind, 4, SRQAttr{MaxWR: 16, MaxSGE: 1}, qpOpts{})
			r.post(t, 1, 2, 3, 4, 5, 6, 7, 8)
			require.Equal(t, 8, r.srq.Len())
			perQP := map[uint32]int{}
			var ids []uint64
			for round := range 2 {
				for i := range r.a {
					r.send(t, i, uint64(round*10+i))
					require.Equal(t, []wcBrief{{uint64(round*10 + i), WCSuccess, WCSend}}, briefs(waitWCs(t, r.a[i].cq, 1)))
					w := waitWCs(t, r.bcq, 1)[0]
					require.Equal(t, WCSuccess, w.Status)
					require.Equal(t, r.b[i].qp.QPN(), w.QPNum)
					require.Equal(t, r.a[i].qp.QPN(), w.SrcQP)
					require.Equal(t, uint32(16), w.ByteLen)
					perQP[w.QPNum]++
					ids = append(ids, w.ID)
				}
			}
			require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, ids, "the SRQ is consumed in order, whichever QP takes it")
			require.Len(t, perQP, 4)
			require.Zero(t, r.srq.Len())
			for _, b := range r.b {
				_, err := b.qp.PostRecv(RecvWR{ID: 1})
				require.ErrorIs(t, err, ErrInvalidArgument, "a QP with an SRQ takes no receives of its own")
			}
			require.ErrorIs(t, r.srq.Destroy(), ErrInUse)
		})
	}
}

// TestSRQLimit: SRQ_LIMIT_REACHED fires once when the SRQ drops below its
// limit, then the limit is disarmed until SetLimit (IBA 10.2.9.3,
// protocol.md §6.6).
func TestSRQLimit(t *testing.T) {
	r := newSRQRig(t, "pipe", 1, SRQAttr{MaxWR: 8, MaxSGE: 1, Limit: 3}, qpOpts{})
	d := r.b[0].dev
	r.post(t, 1, 2, 3, 4, 5)
	use := func(id uint64) {
		t.Helper()
		r.send(t, 0, id)
		waitWCs(t, r.a[0].cq, 1)
		waitWCs(t, r.bcq, 1)
	}
	use(1) // 4 left
	use(2) // 3 left: not below 3
	require.Empty(t, drainEvents(d, 5*time.Millisecond))
	use(3) // 2 left
	ev, others := waitEvent(t, d, EventSRQLimitReached)
	require.Same(t, r.srq, ev.SRQ)
	require.Empty(t, others)
	use(4) // 1 left: disarmed
	require.Empty(t, drainEvents(d, 5*time.Millisecond), "once per arm")

	r.post(t, 6, 7, 8, 9) // 5 left
	use(5)                // 4 left: still disarmed
	require.Empty(t, drainEvents(d, 5*time.Millisecond))
	require.NoError(t, r.srq.SetLimit(3))
	use(6) // 3 left
	require.Empty(t, drainEvents(d, 5*time.Millisecond))
	use(7) // 2 left
	ev, _ = waitEvent(t, d, EventSRQLimitReached)
	require.Same(t, r.srq, ev.SRQ)

	require.NoError(t, r.srq.SetLimit(2))
	require.NoError(t, r.srq.SetLimit(0), "0 disarms")
	use(8)
	require.Empty(t, drainEvents(d, 5*time.Millisecond))
	require.ErrorIs(t, r.srq.SetLimit(9), ErrInvalidArgument)
	require.ErrorIs(t, r.srq.SetLimit(-1), ErrInvalidArgument)
}

// TestSRQRNR: an empty SRQ draws RNR NAKs; a WQE posted later satisfies
// the waiting SEND.
func TestSRQRNR(t *testing.T) {
	r := newSRQRig(t, "pipe", 2, SRQAttr{MaxWR: 4, MaxSGE: 1}, qpOpts{})
	r.send(t, 1, 5)
	require.Eventually(t, func() bool { return r.a[1].qp.Counters().Requester.RcvdRNRErr >= 2 }, testutil.Bound(), time.Millisecond)
	noWC(t, r.bcq, 0)
	r.post(t, 40)
	require.Equal(t, []wcBrief{{5, WCSuccess, WCSend}}, briefs(waitWCs(t, r.a[1].cq, 1)))
	w := waitWCs(t, r.bcq, 1)[0]
	require.Equal(t, wcBrief{40, WCSuccess, WCRecv}, wcBrief{w.ID, w.Status, w.Opcode})
	require.Equal(t, r.b[1].qp.QPN(), w.QPNum)
}

// TestSRQLastWQEReached: a QP on an SRQ entering ERR raises
// QP_LAST_WQE_REACHED (IBA 10.3.1, 11.6.3.1) and leaves the SRQ's WQEs to
// the other QPs.
func TestSRQLastWQEReached(t *testing.T) {
	r := newSRQRig(t, "pipe", 2, SRQAttr{MaxWR: 8, MaxSGE: 1}, qpOpts{})
	d := r.b[0].dev
	r.post(t, 1, 2, 3)

	// The user moves QP 0 to ERR.
	require.NoError(t, r.b[0].qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	ev, others := waitEvent(t, d, EventQPLastWQEReached)
	require.Same(t, r.b[0].qp, ev.QP)
	require.Empty(t, others)
	require.Equal(t, 3, r.srq.Len(), "the SRQ is not flushed")
	noWC(t, r.bcq, 5*time.Millisecond)

	// QP 1 fails on a bad rkey: the access error and LAST_WQE_REACHED.
	a := r.a[1]
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: r.b[1].mr.Addr(), RKey: r.b[1].mr.RKey() ^ 2})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemAccessErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	got := eventTypes(drainEvents(d, 20*time.Millisecond))
	require.ElementsMatch(t, []AsyncEventType{EventQPAccessErr, EventQPLastWQEReached}, got)
	require.Equal(t, 3, r.srq.Len())
	require.NoError(t, r.b[0].qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	require.Empty(t, drainEvents(d, 5*time.Millisecond), "ERR to ERR raises nothing")
}

// TestSRQArgs: CreateSRQ and PostRecv limits.
func TestSRQArgs(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	for _, a := range []SRQAttr{{MaxWR: 0, MaxSGE: 1}, {MaxWR: 4, MaxSGE: -1}, {MaxWR: 4, MaxSGE: 1, Limit: 5},
		{MaxWR: 4, MaxSGE: 33}, {MaxWR: 1 << 20, MaxSGE: 1}} {
		_, err := pd.CreateSRQ(a)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", a)
	}
	// rxe_srq_chk_init makes a max_sge of 0 one.
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 2, MaxSGE: 0})
	require.NoError(t, err)
	require.Equal(t, SRQAttr{MaxWR: 2, MaxSGE: 1}, srq.Query())
	n, err := srq.PostRecv(RecvWR{ID: 1, SGList: make([]SGE, 2)})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Zero(t, n)
	n, err = srq.PostRecv(RecvWR{ID: 1}, RecvWR{ID: 2}, RecvWR{ID: 3})
	require.ErrorIs(t, err, ErrNoResources)
	require.Equal(t, 2, n)
	require.NoError(t, srq.Destroy())
	_, err = srq.PostRecv(RecvWR{ID: 4})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, pd.Dealloc())
}

// pendingEvents returns the events d has already raised, without waiting.
func pendingEvents(d *Device) []AsyncEvent {
	var out []AsyncEvent
	for {
		select {
		case e, ok := <-d.Events():
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// takeIDs takes every WQE left in srq through a QP's port, in order.
func takeIDs(srq *SRQ) []uint64 {
	p := newSRQPort(srq.q)
	var ids []uint64
	for {
		wr, ok := p.Peek()
		if !ok {
			return ids
		}
		ids = append(ids, wr.ID)
		p.Pop()
	}
}

func postIDs(t *testing.T, srq *SRQ, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		_, err := srq.PostRecv(RecvWR{ID: id, SGList: []SGE{{Addr: id, Length: 64, LKey: 1}}})
		require.NoError(t, err)
	}
}

// TestSRQModify: ibv_modify_srq's IBV_SRQ_LIMIT and IBV_SRQ_MAX_WR, and
// ibv_query_srq. A refused change leaves the SRQ as it was; a resize keeps
// the posted WQEs in order.
func TestSRQModify(t *testing.T) {
	cases := []struct {
		name  string
		limit int // armed before the change
		attr  SRQAttr
		mask  SRQAttrMask
		err   error
		want  SRQAttr // Query afterwards
	}{
		{"arm", 0, SRQAttr{Limit: 4}, SRQAttrLimit, nil, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 4}},
		{"re-arm", 3, SRQAttr{Limit: 6}, SRQAttrLimit, nil, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 6}},
		{"disarm", 3, SRQAttr{Limit: 0}, SRQAttrLimit, nil, SRQAttr{MaxWR: 8, MaxSGE: 2}},
		{"limit = max_wr", 0, SRQAttr{Limit: 8}, SRQAttrLimit, nil, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 8}},
		{"limit above max_wr", 3, SRQAttr{Limit: 9}, SRQAttrLimit, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 3}},
		{"negative limit", 3, SRQAttr{Limit: -1}, SRQAttrLimit, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 3}},
		{"grow", 3, SRQAttr{MaxWR: 64}, SRQAttrMaxWR, nil, SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 3}},
		{"shrink to the posted WQEs", 0, SRQAttr{MaxWR: 5}, SRQAttrMaxWR, nil, SRQAttr{MaxWR: 5, MaxSGE: 2}},
		{"shrink below the posted WQEs", 0, SRQAttr{MaxWR: 4}, SRQAttrMaxWR, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2}},
		{"shrink below the limit", 7, SRQAttr{MaxWR: 6}, SRQAttrMaxWR, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 7}},
		{"shrink and lower the limit", 7, SRQAttr{MaxWR: 6, Limit: 6}, SRQAttrMaxWR | SRQAttrLimit, nil, SRQAttr{MaxWR: 6, MaxSGE: 2, Limit: 6}},
		{"max_wr 0", 0, SRQAttr{MaxWR: 0}, SRQAttrMaxWR, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2}},
		{"max_wr above the device's", 0, SRQAttr{MaxWR: maxQPWR + 1}, SRQAttrMaxWR, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2}},
		{"unknown mask bit", 0, SRQAttr{Limit: 1}, SRQAttrLimit | 4, ErrInvalidArgument, SRQAttr{MaxWR: 8, MaxSGE: 2}},
		{"empty mask", 2, SRQAttr{MaxWR: 1, Limit: 1}, 0, nil, SRQAttr{MaxWR: 8, MaxSGE: 2, Limit: 2}},
	}
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 8, MaxSGE: 2})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, srq.Destroy()) })
			// Wrap the ring: the posted WQEs do not start at slot 0.
			postIDs(t, srq, 90, 91, 92)
			require.Equal(t, []uint64{90, 91, 92}, takeIDs(srq))
			postIDs(t, srq, 1, 2, 3, 4, 5)
			require.NoError(t, srq.SetLimit(c.limit))
			err = srq.Modify(&c.attr, c.mask)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.want, srq.Query())
			require.Equal(t, 5, srq.Len())
			// The queue holds exactly what Query says.
			n, err := srq.PostRecv(make([]RecvWR, c.want.MaxWR)...)
			require.ErrorIs(t, err, ErrNoResources)
			require.Equal(t, c.want.MaxWR-5, n)
			require.Equal(t, []uint64{1, 2, 3, 4, 5}, takeIDs(srq)[:5], "posted WQEs keep their order")
			require.Zero(t, srq.Len())
			pendingEvents(d) // limit events of the takes; TestSRQLimitEvents checks them
		})
	}
	t.Run("destroyed", func(t *testing.T) {
		srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 8, MaxSGE: 1})
		require.NoError(t, err)
		require.NoError(t, srq.Destroy())
		require.ErrorIs(t, srq.SetLimit(1), ErrClosed)
		require.ErrorIs(t, srq.Destroy(), ErrClosed)
	})
}

// TestSRQLimitEvents: SRQ_LIMIT_REACHED is raised when a take leaves fewer
// WQEs than the armed limit, once, and disarms the limit (rxe get_srq_wqe;
// protocol.md §6.6). Arming below the current fill raises nothing until a
// WQE is taken.
func TestSRQLimitEvents(t *testing.T) {
	cases := []struct {
		name   string
		posted int
		limit  int
		takes  int
		fireAt int // the take (1-based) that raises the event; 0: none
	}{
		{"drops below", 5, 3, 5, 3},
		{"limit = fill: the first take", 5, 5, 2, 1},
		{"armed when already below", 2, 4, 2, 1},
		{"never below", 8, 2, 5, 0},
		{"disarmed", 5, 0, 5, 0},
		{"limit 1: the last WQE", 3, 1, 3, 3},
	}
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 8, MaxSGE: 1})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, srq.Destroy()) })
			for i := range c.posted {
				postIDs(t, srq, uint64(i))
			}
			require.NoError(t, srq.SetLimit(c.limit))
			require.Empty(t, pendingEvents(d), "arming raises nothing")
			p := newSRQPort(srq.q)
			fired := 0
			for i := 1; i <= c.takes; i++ {
				_, ok := p.Peek()
				require.True(t, ok)
				p.Pop()
				for _, e := range pendingEvents(d) {
					require.Equal(t, EventSRQLimitReached, e.Type)
					require.Same(t, srq, e.SRQ)
					require.Zero(t, fired, "raised twice")
					fired = i
				}
			}
			require.Equal(t, c.fireAt, fired)
			if c.fireAt > 0 {
				require.Zero(t, srq.Query().Limit, "the event disarms the limit")
			} else {
				require.Equal(t, c.limit, srq.Query().Limit)
			}
			takeIDs(srq)
			pendingEvents(d)
		})
	}
}

// TestSRQConcurrentTakes: QPs on one SRQ whose packets are handled by
// different goroutines (one per completion vector) take every posted WQE
// exactly once, while the SRQ is being refilled and resized.
func TestSRQConcurrentTakes(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 64, MaxSGE: 1})
	require.NoError(t, err)
	const total, takers = 20000, 4
	got := make([][]uint64, takers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range takers {
		wg.Go(func() {
			p := newSRQPort(srq.q)
			for {
				wr, ok := p.Peek()
				if !ok {
					select {
					case <-stop:
						return
					default:
						runtime.Gosched()
						continue
					}
				}
				got[g] = append(got[g], wr.ID)
				p.Pop()
			}
		})
	}
	for id := uint64(0); id < total; {
		n, err := srq.PostRecv(RecvWR{ID: id})
		if err != nil {
			require.ErrorIs(t, err, ErrNoResources)
		}
		id += uint64(n)
		if n > 0 && id%1000 == 0 {
			// Shrinking below the posted WQEs is refused; anything else goes.
			if err := srq.Modify(&SRQAttr{MaxWR: 16 + int(id%3000)}, SRQAttrMaxWR); err != nil {
				require.ErrorIs(t, err, ErrInvalidArgument)
			}
		}
	}
	require.Eventually(t, func() bool { return srq.Len() == 0 }, testutil.Bound(), time.Millisecond)
	close(stop)
	wg.Wait()
	seen := make([]int, total)
	for _, ids := range got {
		for _, id := range ids {
			seen[id]++
		}
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "WQE %d taken %d times", id, n)
	}
}

// TestSRQAttach: which QPs may use an SRQ, and destroying it while they do
// (ibv_destroy_srq fails with EBUSY in rxe; ErrInUse here).
func TestSRQAttach(t *testing.T) {
	d, other := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	pd2, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(16, -1)
	require.NoError(t, err)
	cap := QPCap{MaxSendWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	cases := []struct {
		name string
		pd   *PD
		srq  func(t *testing.T) *SRQ
		err  error
	}{
		{"same PD", pd, func(t *testing.T) *SRQ { return mustSRQ(t, pd) }, nil},
		{"another PD", pd2, func(t *testing.T) *SRQ { return mustSRQ(t, pd) }, ErrInvalidArgument},
		{"another device", pd, func(t *testing.T) *SRQ {
			opd, err := other.AllocPD()
			require.NoError(t, err)
			return mustSRQ(t, opd)
		}, ErrInvalidArgument},
		{"destroyed", pd, func(t *testing.T) *SRQ {
			s := mustSRQ(t, pd)
			require.NoError(t, s.Destroy())
			return s
		}, ErrClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srq := c.srq(t)
			qp, err := c.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: cap})
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.Nil(t, qp)
				if !srq.dead.Load() {
					require.NoError(t, srq.Destroy(), "a refused QP leaves no use behind")
				}
				return
			}
			require.NoError(t, err)
			require.Zero(t, qp.Cap().MaxRecvWR, "a QP on an SRQ has no receive queue of its own")
			qp2, err := c.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: cap})
			require.NoError(t, err)
			require.ErrorIs(t, srq.Destroy(), ErrInUse)
			require.NoError(t, qp.Destroy())
			require.ErrorIs(t, srq.Destroy(), ErrInUse, "one QP left")
			require.ErrorIs(t, qp.Destroy(), ErrClosed)
			require.NoError(t, qp2.Destroy())
			require.NoError(t, srq.Destroy())
			require.ErrorIs(t, srq.Destroy(), ErrClosed)
			_, err = srq.PostRecv(RecvWR{ID: 1})
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

func mustSRQ(t *testing.T, pd *PD) *SRQ {
	t.Helper()
	s, err := pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	return s
}

// TestSRQRNRRetry: a SEND to a QP whose SRQ is empty draws RNR NAKs, and
// the requester's rnr_retry decides (IBA 9.7.5.2.8): after rnr_retry
// retries the SEND fails with RNR_RETRY_EXC_ERR; 7 retries for ever, until
// a WQE is posted to the SRQ.
func TestSRQRNRRetry(t *testing.T) {
	cases := []struct {
		rnrRetry uint8
		naks     uint64 // RNR NAKs before the SEND fails; 0: it never fails
	}{
		{0, 1},
		{1, 2},
		{3, 4},
		{7, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("rnr_retry=%d", c.rnrRetry), func(t *testing.T) {
			r := newSRQRig(t, "pipe", 2, SRQAttr{MaxWR: 4, MaxSGE: 1},
				qpOpts{rnrRetry: c.rnrRetry, noRNRRetry: c.rnrRetry == 0})
			r.send(t, 1, 5)
			a := r.a[1]
			if c.naks > 0 {
				require.Equal(t, []wcBrief{{5, WCRNRRetryExcErr, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
				rq := a.qp.Counters().Requester
				require.Equal(t, c.naks, rq.RcvdRNRErr)
				require.Equal(t, uint64(1), rq.RNRRetryExceededErr)
				require.Equal(t, c.naks, r.b[1].qp.Counters().Responder.SendRNRErr)
				require.Equal(t, QPSRTS, r.b[1].qp.State(), "an RNR NAK is no error for the responder")
				noWC(t, r.bcq, 5*time.Millisecond)
				return
			}
			require.Eventually(t, func() bool { return a.qp.Counters().Requester.RcvdRNRErr >= 8 }, testutil.Bound(), time.Millisecond,
				"more RNR NAKs than any finite rnr_retry allows")
			noWC(t, a.cq, 0)
			r.post(t, 40)
			require.Equal(t, []wcBrief{{5, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			w := waitWCs(t, r.bcq, 1)[0]
			require.Equal(t, wcBrief{40, WCSuccess, WCRecv}, wcBrief{w.ID, w.Status, w.Opcode})
			require.Equal(t, r.b[1].qp.QPN(), w.QPNum)
		})
	}
}

// TestSRQErrorKeepsWQEs: a QP on an SRQ that enters ERR flushes its own
// send queue but leaves the SRQ's WQEs to the other QPs, which still take
// them in order (IBA 10.3.1; rxe flushes only a QP's own RQ).
func TestSRQErrorKeepsWQEs(t *testing.T) {
	r := newSRQRig(t, "pipe", 3, SRQAttr{MaxWR: 8, MaxSGE: 1}, qpOpts{})
	r.post(t, 1, 2, 3, 4)
	require.NoError(t, r.b[0].qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	waitEvent(t, r.b[0].dev, EventQPLastWQEReached)
	require.Equal(t, 4, r.srq.Len())
	r.post(t, 5)
	var ids []uint64
	for i, qp := range []int{1, 2, 1, 2, 1} {
		r.send(t, qp, uint64(i))
		require.Equal(t, []wcBrief{{uint64(i), WCSuccess, WCSend}}, briefs(waitWCs(t, r.a[qp].cq, 1)))
		w := waitWCs(t, r.bcq, 1)[0]
		require.Equal(t, WCSuccess, w.Status)
		require.Equal(t, r.b[qp].qp.QPN(), w.QPNum)
		ids = append(ids, w.ID)
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, ids)
	noWC(t, r.bcq, 5*time.Millisecond)
}

// vectorDevices returns two devices with vectors completion vectors each,
// joined by an in-memory pipe.
func vectorDevices(t testing.TB, vectors int) (*Device, *Device) {
	t.Helper()
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	return openPairWith(t, ca, cb, Options{LinkMTU: 9000, CompVectors: vectors}, "rxe-a", "rxe-b")
}

// TestSRQSet: with one SRQ per completion vector, every QP's receives land
// in the SRQ of its receive CQ's vector and complete on that CQ. One
// scenario per vector count, read top to bottom (hence its length).
func TestSRQSet(t *testing.T) {
	for _, vectors := range []int{1, 3} {
		t.Run(fmt.Sprintf("vectors=%d", vectors), func(t *testing.T) {
			da, db := vectorDevices(t, vectors)
			require.Equal(t, vectors, db.Attr().NumCompVectors)
			pd, err := db.AllocPD()
			require.NoError(t, err)
			set, err := pd.CreateSRQSet(SRQAttr{MaxWR: 16, MaxSGE: 1})
			require.NoError(t, err)
			require.Equal(t, vectors, set.Len())
			const perVector = 2
			cqs := make([]*CQ, vectors)
			var as, bs []*end
			for v := range vectors {
				cqs[v], err = db.CreateCQ(64, v)
				require.NoError(t, err)
				srq, err := set.For(cqs[v])
				require.NoError(t, err)
				require.Same(t, setSRQ(t, set, v), srq)
				require.Equal(t, v, srq.Vector())
				for range perVector {
					a := smallEnd(t, da, nil, qpOpts{})
					b := smallEnd(t, db, pd, qpOpts{srq: srq, cq: cqs[v]})
					link(t, a, b, qpOpts{}, qpOpts{})
					as, bs = append(as, a), append(bs, b)
				}
				buf := bs[len(bs)-1]
				for i := range 4 {
					_, err := srq.PostRecv(RecvWR{ID: uint64(v*100 + i), SGList: []SGE{buf.mr.SGE(i*64, 64)}})
					require.NoError(t, err)
				}
			}
			// Alternate the vectors: QP k is on vector k/perVector; the
			// even QPs send first, then the odd ones.
			var order []int
			for parity := range 2 {
				for k := parity; k < len(as); k += 2 {
					order = append(order, k)
				}
			}
			for _, k := range order {
				v := k / perVector
				_, err := as[k].qp.PostSend(SendWR{ID: uint64(k), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{as[k].mr.SGE(0, 8)}})
				require.NoError(t, err)
				require.Equal(t, []wcBrief{{uint64(k), WCSuccess, WCSend}}, briefs(waitWCs(t, as[k].cq, 1)))
				w := waitWCs(t, cqs[v], 1)[0]
				require.Equal(t, WCSuccess, w.Status)
				require.Equal(t, bs[k].qp.QPN(), w.QPNum)
				require.Equal(t, v, int(w.ID/100), "QP %d (vector %d) took WQE %d", k, v, w.ID)
			}
			for v := range vectors {
				require.Equal(t, 4-perVector, setSRQ(t, set, v).Len(), "vector %d", v)
				noWC(t, cqs[v], 0)
			}

			if vectors > 1 {
				_, err = pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cqs[0], RecvCQ: cqs[0], SRQ: setSRQ(t, set, 1),
					Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
				require.ErrorIs(t, err, ErrInvalidArgument, "the SRQ of another vector")
			}
			for _, v := range []int{-1, vectors} {
				_, err = set.SRQ(v)
				require.ErrorIs(t, err, ErrInvalidArgument, "vector %d of %d", v, vectors)
			}
			_, err = set.For(nil)
			require.ErrorIs(t, err, ErrInvalidArgument)
			acq, err := da.CreateCQ(4, 0)
			require.NoError(t, err)
			_, err = set.For(acq)
			require.ErrorIs(t, err, ErrInvalidArgument, "a CQ of another device")

			require.ErrorIs(t, set.Destroy(), ErrInUse)
			require.ErrorIs(t, setSRQ(t, set, 0).Destroy(), ErrInvalidArgument, "destroy the set, not one SRQ")
			_, err = setSRQ(t, set, vectors-1).PostRecv(RecvWR{ID: 1})
			require.NoError(t, err, "a refused Destroy destroys nothing")
			for _, b := range bs {
				require.NoError(t, b.qp.Destroy())
			}
			require.NoError(t, set.Destroy())
			require.ErrorIs(t, set.Destroy(), ErrClosed)
			for v := range vectors {
				_, err = setSRQ(t, set, v).PostRecv(RecvWR{ID: 1})
				require.ErrorIs(t, err, ErrClosed)
			}
		})
	}
}

// TestSRQErrorMidMessage: a QP on an SRQ that enters ERR while a
// multi-packet SEND is half received completes the WQE it had taken for
// that SEND with WR_FLUSH_ERR, and only that one: the SRQ keeps the rest
// for the other QPs (rxe flushes the WQE in progress, not the SRQ).
func TestSRQErrorMidMessage(t *testing.T) {
	da, db, ca, cb := pipeDevices(t)
	pd, err := db.AllocPD()
	require.NoError(t, err)
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 8, MaxSGE: 1})
	require.NoError(t, err)
	bcq, err := db.CreateCQ(64, -1)
	require.NoError(t, err)
	var as, bs []*end
	for range 2 {
		a := smallEnd(t, da, nil, qpOpts{})
		b := smallEnd(t, db, pd, qpOpts{srq: srq, cq: bcq})
		link(t, a, b, qpOpts{}, qpOpts{})
		as, bs = append(as, a), append(bs, b)
	}
	for id := range uint64(3) {
		_, err := srq.PostRecv(RecvWR{ID: id + 1, SGList: []SGE{bs[1].mr.SGE(int(id)*4096, 4096)}})
		require.NoError(t, err)
	}

	// The first packet of a 2-packet SEND to QP 0, as a's device would send it.
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendFirst, PKey: packet.DefaultPKey,
		DestQP: bs[0].qp.QPN(), PSN: packet.PSN(bs[0].qp.Query().RQPSN)}}
	injectPacket(t, ca, cb, &h, make([]byte, MTU1024.Bytes()))
	require.Eventually(t, func() bool { return srq.Len() == 2 }, testutil.Bound(), time.Millisecond, "QP 0 takes WQE 1")
	noWC(t, bcq, 5*time.Millisecond)

	require.NoError(t, bs[0].qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	w0 := waitWCs(t, bcq, 1)[0]
	require.Equal(t, wcBrief{1, WCWRFlushErr, WCRecv}, wcBrief{w0.ID, w0.Status, w0.Opcode})
	require.Equal(t, bs[0].qp.QPN(), w0.QPNum)
	waitEvent(t, db, EventQPLastWQEReached)
	noWC(t, bcq, 5*time.Millisecond)
	require.Equal(t, 2, srq.Len(), "the SRQ is not flushed")

	for i, want := range []uint64{2, 3} {
		_, err := as[1].qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{as[1].mr.SGE(0, 2000)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{uint64(i), WCSuccess, WCSend}}, briefs(waitWCs(t, as[1].cq, 1)))
		w := waitWCs(t, bcq, 1)[0]
		require.Equal(t, wcBrief{want, WCSuccess, WCRecv}, wcBrief{w.ID, w.Status, w.Opcode})
		require.Equal(t, bs[1].qp.QPN(), w.QPNum)
		require.Equal(t, uint32(2000), w.ByteLen)
	}
}

// setSRQ is set.SRQ(v), which must succeed.
func setSRQ(t *testing.T, set *SRQSet, v int) *SRQ {
	t.Helper()
	s, err := set.SRQ(v)
	require.NoError(t, err)
	return s
}

// TestSRQBehindYields checks that an SRQ running low makes endBatch yield
// as a CQ filling up does (Device.behind): a batch whose takes leave the
// SRQ with fewer than half its max_wr lets the waiter it woke run before
// endBatch returns, so that the consumer re-posts before the next batch
// (an SRQ serves several QPs whose CQ is sized for all of them, so their
// CQ is far from half full when the SRQ is empty, and UD or UC datagrams
// that find it empty are dropped). At half, or outside a batch, nothing
// yields. A trial in which the scheduler takes the global queue first (1
// schedule in 61) may miss, hence the majority.
func TestSRQBehindYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d, cq := pipeCQ(t, "srqbehind", 64)
	pd, err := d.AllocPD()
	require.NoError(t, err)
	const maxWR = 8
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: maxWR})
	require.NoError(t, err)
	fill := func() {
		for srq.Len() < maxWR {
			postIDs(t, srq, uint64(srq.Len()))
		}
	}
	take := func(n int) {
		var wr RecvWR
		wr.SGList = make([]SGE, 0, 1)
		for range n {
			require.True(t, srq.q.take(&wr))
		}
	}

	// Outside a batch a take sets nothing: no batch ends to yield.
	fill()
	take(maxWR)
	require.False(t, d.behind.Load(), "a take outside a batch")

	// trial takes WQEs in a batch until left remain and completes one
	// receive while a goroutine waits in Wait, ends the batch and
	// reports whether the waiter had run.
	trial := func(left int) bool {
		fill()
		ran, done := startWaiter(cq)
		d.batches.Add(1)
		take(maxWR - left)
		require.True(t, cq.push(&WC{ID: 1, Opcode: WCRecv}, false))
		var scratch []*CQ
		d.endBatch(&scratch, true)
		got := endWaiter(cq, ran, done)
		require.False(t, d.behind.Load())
		cq.woken.Store(false)
		return got
	}
	const trials = 20
	low, half := 0, 0
	for range trials {
		if trial(maxWR/2 - 1) {
			low++
		}
		if trial(maxWR / 2) {
			half++
		}
	}
	require.Greater(t, low, trials/2, "an SRQ below half: the waiter runs before endBatch returns")
	require.Less(t, half, trials/2, "an SRQ at half: endBatch does not yield")
}
