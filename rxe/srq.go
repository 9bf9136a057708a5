package rxe

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorxe/gorxe/internal/ring"
	"github.com/gorxe/gorxe/responder"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// recvQueue is a receive queue: a QP's own RQ or an SRQ. Receive WQEs are
// copied into the slots of a ring.Ring at post time, so the responder's
// Peek/Pop allocate nothing; the slots grow up to max_wr only when more
// WQEs are posted than ever before, each with room for maxSGE SGEs.
type recvQueue struct {
	mu     sync.Mutex // protects everything below
	wqes   ring.Ring[verbs.RecvWR]
	maxSGE int
	limit  int     // SRQ limit (0 = disarmed)
	dev    *Device // whose behind a take may set (recvQueue.take, Pop)
	srq    *SRQ    // nil for a QP's own RQ
}

func newRecvQueue(d *Device, maxWR, maxSGE int) *recvQueue {
	q := &recvQueue{maxSGE: maxSGE, dev: d}
	q.wqes.Init(maxWR, q.freshSlots)
	return q
}

// freshSlots gives the new slots of a grown queue their SGE stores, in one
// allocation. A WQE a QP's responder is reading (Peek's pointer into its
// own RQ) stays valid across growth: the old slots are never written again.
func (q *recvQueue) freshSlots(s []verbs.RecvWR) {
	sges := make([]verbs.SGE, len(s)*q.maxSGE)
	for i := range s {
		s[i].SGList = sges[i*q.maxSGE : i*q.maxSGE : (i+1)*q.maxSGE]
	}
}

// post copies wrs in; it returns how many were posted. As rxe's
// post_one_recv, it looks for room first (a full queue: ErrNoResources,
// rxe's ENOMEM) and only then checks the WR (EINVAL), the reverse of the
// send side's order.
func (q *recvQueue) post(wrs []RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range wrs {
		wr := &wrs[i]
		if q.wqes.Free() == 0 {
			return i, fmt.Errorf("%w: receive queue full (%d WRs)", ErrNoResources, q.wqes.Max())
		}
		if len(wr.SGList) > q.maxSGE {
			return i, fmt.Errorf("%w: receive WR %d has %d SGEs, max %d", ErrInvalidArgument, i, len(wr.SGList), q.maxSGE)
		}
		// No message is longer than 2^31 bytes (IBA's maximum, the
		// device's MaxMsgSize), so a longer receive WR is malformed:
		// rxe_post_one_recv refuses it too, as PostSend refuses such a
		// send WR (requester.MaxMessage).
		if n := wr.Length(); n > maxMsgSize {
			return i, fmt.Errorf("%w: receive WR %d is %d bytes long, max %d", ErrInvalidArgument, i, n, uint64(maxMsgSize))
		}
		s := q.wqes.Push() // not nil: there is room
		s.ID = wr.ID
		s.SGList = append(s.SGList[:0], wr.SGList...)
	}
	return len(wrs), nil
}

// Peek implements responder.RecvQueue for a QP's own RQ. Only the QP's
// responder takes from its RQ, under the QP's mutex, so the slot stays
// valid until Pop. QPs on an SRQ use an srqPort instead.
func (q *recvQueue) Peek() (*verbs.RecvWR, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.wqes.Len() == 0 {
		return nil, false
	}
	return q.wqes.Front(), true
}

// Pop implements responder.RecvQueue for a QP's own RQ: it is the
// responder's take from it, and sets Device.behind by the rule take
// follows for an SRQ (low).
func (q *recvQueue) Pop() {
	q.mu.Lock()
	low := false
	if q.wqes.Len() > 0 {
		q.wqes.Pop()
		low = q.low()
	}
	q.mu.Unlock()
	if low {
		q.dev.recvQueueLow()
	}
}

// low reports whether fewer than half the queue's max_wr WQEs are left
// (caller holds mu): a take that leaves the queue so sets Device.behind
// during a batch (recvQueueLow).
func (q *recvQueue) low() bool { return q.wqes.Len() < q.wqes.Max()/2 }

// take moves the oldest WQE into dst (whose SGList has room for maxSGE
// entries) in one step under the lock, so that QPs serviced by different
// goroutines never take the same WQE. For an SRQ it raises
// SRQ_LIMIT_REACHED once when the queue drops below the armed limit and
// disarms it, as rxe's get_srq_wqe does after it takes a WQE.
//
// A take during a batch of received datagrams that leaves the queue with
// fewer than half its max_wr WQEs sets Device.behind, as a completion
// that leaves its CQ more than half full does: the goroutine that ends
// the batch then yields to the consumer it woke, which re-posts before
// the next batch (endBatch). The rule covers an SRQ (take) and a QP's own
// RQ of any type (Pop, the responder's take from it). The CQ's test alone
// misses both: an SRQ's QPs share a receive CQ sized for all of them, and
// so may several QPs with their own RQs (perftest sizes one receive CQ
// for all its QPs), so the CQ is far from half full when one receive
// queue runs empty; a UD or UC message that then finds no WQE is dropped
// (rxe's check_resource), and an RC request draws an RNR NAK. Above half
// the rule costs one comparison under the queue's lock.
func (q *recvQueue) take(dst *verbs.RecvWR) bool {
	q.mu.Lock()
	if q.wqes.Len() == 0 {
		q.mu.Unlock()
		return false
	}
	s := q.wqes.Front()
	dst.ID = s.ID
	dst.SGList = append(dst.SGList[:0], s.SGList...)
	q.wqes.Pop()
	fire := q.srq != nil && q.limit > 0 && q.wqes.Len() < q.limit
	if fire {
		q.limit = 0
	}
	low := q.low()
	q.mu.Unlock()
	if low {
		q.dev.recvQueueLow()
	}
	if fire {
		q.dev.raise(AsyncEvent{Type: EventSRQLimitReached, SRQ: q.srq})
	}
	return true
}

// Len implements responder.RecvQueue.
func (q *recvQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wqes.Len()
}

// flush completes every WQE with WR_FLUSH_ERR on cq (a QP's own RQ when
// the QP enters ERR).
func (q *recvQueue) flush(cq *CQ, qpn uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.wqes.Len() > 0 {
		wc := WC{ID: q.wqes.Front().ID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: qpn}
		cq.push(&wc, false)
		q.wqes.Pop()
	}
}

// resize gives the queue room for maxWR WQEs, keeping the posted ones in
// order (caller holds mu). rxe refuses to shrink a queue below the WQEs it
// holds (rxe_queue_resize); so does gorxe.
func (q *recvQueue) resize(maxWR int) error {
	if !q.wqes.SetMax(maxWR) { // shrinks now; growth stays lazy
		return fmt.Errorf("%w: SRQ max_wr %d is below the %d posted WQEs", ErrInvalidArgument, maxWR, q.wqes.Len())
	}
	return nil
}

// srqPort is one QP's access to an SRQ: the responder.RecvQueue of a QP
// whose receive WQEs come from an SRQ. Peek takes the oldest WQE off the
// SRQ at once (recvQueue.take) into the port, and Pop releases the port,
// so two QPs on the same SRQ whose packets are handled by different
// goroutines can never both see the same WQE between a Peek and a Pop.
// Like rxe's get_srq_wqe, the WQE is copied out of the SRQ when the
// responder starts the message. The port is used under the QP's mutex.
type srqPort struct {
	q    *recvQueue
	wr   verbs.RecvWR // the WQE taken by Peek, until Pop
	held bool
}

func newSRQPort(q *recvQueue) *srqPort {
	return &srqPort{q: q, wr: verbs.RecvWR{SGList: make([]verbs.SGE, 0, q.maxSGE)}}
}

// Peek implements responder.RecvQueue.
func (p *srqPort) Peek() (*verbs.RecvWR, bool) {
	if !p.held {
		if !p.q.take(&p.wr) {
			return nil, false
		}
		p.held = true
	}
	return &p.wr, true
}

// Pop implements responder.RecvQueue.
func (p *srqPort) Pop() { p.held = false }

// Len implements responder.RecvQueue: the WQEs left in the SRQ.
func (p *srqPort) Len() int { return p.q.Len() }

// recvSource is the receive queue the QP's responder takes WQEs from: its
// own RQ, or a port on its SRQ (caller holds qp.mu).
func (qp *QP) recvSource() responder.RecvQueue {
	if qp.srq == nil {
		return qp.rq
	}
	return newSRQPort(qp.srq.q)
}

// SRQAttr describes a shared receive queue (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int // capacity
	MaxSGE int // SGEs per receive WR; CreateSRQ makes 0 one, as rxe
	// Limit arms SRQ_LIMIT_REACHED: raised once when fewer than Limit WQEs
	// remain; 0 disarms. CreateSRQ honours it as kernel rxe's
	// rxe_srq_from_init does.
	Limit int
}

// SRQAttrMask selects the attributes SRQ.Modify changes; the values are
// libibverbs' enum ibv_srq_attr_mask.
type SRQAttrMask uint8

// SRQ attribute mask bits.
const (
	// SRQAttrMaxWR resizes the SRQ (IBV_SRQ_MAX_WR).
	SRQAttrMaxWR SRQAttrMask = 1 << 0
	// SRQAttrLimit arms or disarms the limit event (IBV_SRQ_LIMIT).
	SRQAttrLimit SRQAttrMask = 1 << 1
)

// SRQ is a shared receive queue (IBA 10.2.9): QPs of one PD take receive
// WQEs from it in the order they were posted, whichever QP a message
// arrives on.
type SRQ struct {
	dev    *Device
	pd     *PD
	q      *recvQueue
	set    *SRQSet // the set it belongs to, or nil
	vector int     // its completion vector in set, or -1

	mu    sync.Mutex // protects users and the transition to dead
	users int
	dead  atomic.Bool
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	return pd.createSRQ(attr, nil, -1)
}

func (pd *PD) createSRQ(attr SRQAttr, set *SRQSet, vector int) (*SRQ, error) {
	d := pd.dev
	if d.closed.Load() || pd.closed.Load() {
		return nil, ErrClosed
	}
	if err := d.checkSRQSize(attr.MaxWR, attr.Limit); err != nil {
		return nil, err
	}
	if attr.MaxSGE < 0 || attr.MaxSGE > d.attr.MaxSRQSGE {
		return nil, fmt.Errorf("%w: SRQ max_sge %d not in [0, %d]", ErrInvalidArgument, attr.MaxSGE, d.attr.MaxSRQSGE)
	}
	// rxe_srq_chk_init raises a max_sge below RXE_MIN_SRQ_SGE (1) to it,
	// as CreateQP does a QP's MaxRecvSGE: 0 gives an SRQ of one SGE per WR.
	attr.MaxSGE = max(attr.MaxSGE, 1)
	if err := pd.use(); err != nil {
		return nil, err
	}
	if err := d.take(&d.nSRQ, d.attr.MaxSRQ, "shared receive queues"); err != nil {
		pd.users.Add(-1)
		return nil, err
	}
	s := &SRQ{dev: d, pd: pd, q: newRecvQueue(d, attr.MaxWR, attr.MaxSGE), set: set, vector: vector}
	s.q.srq = s
	s.q.limit = attr.Limit
	return s, nil
}

// checkSRQSize checks an SRQ's max_wr against the device limit and its
// limit against max_wr (rxe_srq_chk_init, rxe_srq_chk_attr).
func (d *Device) checkSRQSize(maxWR, limit int) error {
	if maxWR < 1 || maxWR > d.attr.MaxSRQWR {
		return fmt.Errorf("%w: SRQ max_wr %d not in [1, %d]", ErrInvalidArgument, maxWR, d.attr.MaxSRQWR)
	}
	if limit < 0 || limit > maxWR {
		return fmt.Errorf("%w: SRQ limit %d (max_wr %d)", ErrInvalidArgument, limit, maxWR)
	}
	return nil
}

// PostRecv posts receive WRs (ibv_post_srq_recv); it returns how many were
// posted before the first failure.
func (s *SRQ) PostRecv(wrs ...RecvWR) (int, error) {
	if s.dead.Load() || s.dev.closed.Load() {
		return 0, ErrClosed
	}
	return s.q.post(wrs)
}

// Modify changes the attributes selected by mask (ibv_modify_srq).
// SRQAttrLimit arms the limit event with attr.Limit (0 disarms); it may
// not exceed the SRQ's capacity. SRQAttrMaxWR resizes the SRQ to
// attr.MaxWR, keeping the posted WQEs in order; it fails if fewer than the
// posted WQEs, or than the armed limit, would fit (as rxe_srq_chk_attr).
// On an error nothing changes.
func (s *SRQ) Modify(attr *SRQAttr, mask SRQAttrMask) error {
	if s.dead.Load() || s.dev.closed.Load() {
		return ErrClosed
	}
	if attr == nil {
		return fmt.Errorf("%w: nil SRQ attributes", ErrInvalidArgument)
	}
	if mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return fmt.Errorf("%w: SRQ attribute mask %#x", ErrInvalidArgument, uint8(mask))
	}
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	maxWR, limit := q.wqes.Max(), q.limit
	if mask&SRQAttrMaxWR != 0 {
		maxWR = attr.MaxWR
	}
	if mask&SRQAttrLimit != 0 {
		limit = attr.Limit
	}
	if err := s.dev.checkSRQSize(maxWR, limit); err != nil {
		return err
	}
	if maxWR != q.wqes.Max() {
		if err := q.resize(maxWR); err != nil {
			return err
		}
	}
	q.limit = limit
	return nil
}

// SetLimit arms (limit > 0) or disarms (0) the SRQ limit event: Modify with
// SRQAttrLimit.
func (s *SRQ) SetLimit(limit int) error {
	return s.Modify(&SRQAttr{Limit: limit}, SRQAttrLimit)
}

// Query returns the SRQ's attributes (ibv_query_srq): its capacity, SGEs
// per WR and the armed limit (0 once the event has fired).
func (s *SRQ) Query() SRQAttr {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	return SRQAttr{MaxWR: s.q.wqes.Max(), MaxSGE: s.q.maxSGE, Limit: s.q.limit}
}

// Len returns the number of posted receive WQEs.
func (s *SRQ) Len() int { return s.q.Len() }

// Vector returns the completion vector whose QPs the SRQ serves in an
// SRQSet, or -1 for an SRQ made by CreateSRQ.
func (s *SRQ) Vector() int { return s.vector }

// attach counts a QP of pd whose receive CQ is recvCQ as a user of the SRQ
// (ibv_create_qp with an SRQ): the SRQ must be alive and on the QP's PD,
// and an SRQ of an SRQSet serves only QPs whose receive CQ is on its
// vector.
func (s *SRQ) attach(pd *PD, recvCQ *CQ) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead.Load() {
		return fmt.Errorf("%w: SRQ destroyed", ErrClosed)
	}
	if s.pd != pd {
		return fmt.Errorf("%w: SRQ of another PD", ErrInvalidArgument)
	}
	if s.vector >= 0 && recvCQ.Vector() != s.vector {
		return fmt.Errorf("%w: the SRQ of completion vector %d for a receive CQ on vector %d (use SRQSet.For)",
			ErrInvalidArgument, s.vector, recvCQ.Vector())
	}
	s.users++
	return nil
}

// detach undoes attach.
func (s *SRQ) detach() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

// Destroy destroys the SRQ (ibv_destroy_srq); it fails with ErrInUse while
// QPs use it (rxe refuses with EBUSY too), and with ErrInvalidArgument for
// an SRQ of an SRQSet (destroy the set). On a closed device it fails with
// ErrClosed once no step of a QP of its PD is under way, so none is still
// placing a message into the buffers of the SRQ's WQEs (closedFor).
func (s *SRQ) Destroy() error {
	if s.set != nil {
		return fmt.Errorf("%w: the SRQ belongs to an SRQSet: destroy the set", ErrInvalidArgument)
	}
	s.mu.Lock()
	err := s.destroyable()
	if err == nil {
		s.kill()
	}
	s.mu.Unlock()
	if err != nil && s.dev.closed.Load() {
		return s.dev.closedFor(s.pd)
	}
	return err
}

// destroyable reports why the SRQ cannot be destroyed (caller holds mu).
func (s *SRQ) destroyable() error {
	if s.dead.Load() || s.dev.closed.Load() {
		return ErrClosed
	}
	if s.users > 0 {
		return fmt.Errorf("%w: SRQ used by %d QPs", ErrInUse, s.users)
	}
	return nil
}

// kill marks the SRQ destroyed (caller holds mu).
func (s *SRQ) kill() {
	s.dead.Store(true)
	s.pd.users.Add(-1)
	s.dev.nSRQ.Add(-1)
}

// SRQSet is one SRQ per completion vector of a device: each QP takes its
// receive WQEs from the SRQ of its receive CQ's vector (as nvmet-rdma has
// an SRQ per completion vector). Each SRQ of the set is used by
// one vector's QPs only, so where a vector's QPs are handled by that
// vector's own goroutines no SRQ is shared between them, and a vector's
// buffers stay with the goroutines that fill and poll them, while the
// receive buffers still do not grow with the number of QPs.
type SRQSet struct {
	srqs []*SRQ
}

// CreateSRQSet creates one SRQ with attr for each of the device's
// completion vectors (Device.Attr().NumCompVectors).
func (pd *PD) CreateSRQSet(attr SRQAttr) (*SRQSet, error) {
	set := &SRQSet{}
	for v := range pd.dev.attr.NumCompVectors {
		s, err := pd.createSRQ(attr, set, v)
		if err != nil {
			for _, c := range set.srqs {
				c.mu.Lock()
				c.kill()
				c.mu.Unlock()
			}
			return nil, err
		}
		set.srqs = append(set.srqs, s)
	}
	return set, nil
}

// Len returns the number of SRQs in the set: one per completion vector.
func (set *SRQSet) Len() int { return len(set.srqs) }

// SRQ returns the SRQ of completion vector v, for posting receive WQEs
// to it. A v outside [0, Len()) fails with ErrInvalidArgument.
func (set *SRQSet) SRQ(v int) (*SRQ, error) {
	if v < 0 || v >= len(set.srqs) {
		return nil, fmt.Errorf("%w: vector %d of an SRQ set of %d", ErrInvalidArgument, v, len(set.srqs))
	}
	return set.srqs[v], nil
}

// For returns the SRQ that a QP whose receive CQ is cq must use: the SRQ of
// cq's completion vector. Pass it as QPInitAttr.SRQ.
func (set *SRQSet) For(cq *CQ) (*SRQ, error) {
	if cq == nil || cq.dev != set.srqs[0].dev {
		return nil, fmt.Errorf("%w: a CQ of the SRQ set's device is needed", ErrInvalidArgument)
	}
	return set.srqs[cq.Vector()], nil
}

// Destroy destroys every SRQ of the set. It fails with ErrInUse, and
// destroys none, while a QP uses any of them; on a closed device it fails
// with ErrClosed as SRQ.Destroy does.
func (set *SRQSet) Destroy() error {
	err := set.destroy()
	if s := set.srqs[0]; err != nil && s.dev.closed.Load() {
		return s.dev.closedFor(s.pd)
	}
	return err
}

// destroy is Destroy under the locks of every SRQ of the set.
func (set *SRQSet) destroy() error {
	for _, s := range set.srqs {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	for _, s := range set.srqs {
		if err := s.destroyable(); err != nil {
			return fmt.Errorf("SRQ of vector %d: %w", s.vector, err)
		}
	}
	for _, s := range set.srqs {
		s.kill()
	}
	return nil
}
