package rxe

import (
	"testing"
	"time"

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
	require.Eventually(t, func() bool { return r.a[1].qp.Counters().Requester.RcvdRNRErr >= 2 }, 5*time.Second, time.Millisecond)
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
	for _, a := range []SRQAttr{{MaxWR: 0, MaxSGE: 1}, {MaxWR: 4, MaxSGE: 0}, {MaxWR: 4, MaxSGE: 1, Limit: 5},
		{MaxWR: 4, MaxSGE: 33}, {MaxWR: 1 << 20, MaxSGE: 1}} {
		_, err := pd.CreateSRQ(a)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", a)
	}
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 2, MaxSGE: 1})
	require.NoError(t, err)
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
