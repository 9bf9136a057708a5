package rxe

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorxe/gorxe/rxe/verbs"
)

// recvQueue is a receive queue: a QP's own RQ or an SRQ. Receive WQEs are
// copied into slots at post time, so the responder's Peek/Pop allocate
// nothing. The slots start empty and grow by doubling up to maxWR when
// more WQEs are posted than ever before: an idle QP that never posted
// costs no slot memory, and a steady post/consume cycle allocates nothing.
type recvQueue struct {
	mu      sync.Mutex // protects everything below
	slots   []verbs.RecvWR
	sges    []verbs.SGE // backing store: maxSGE per slot
	maxWR   int
	maxSGE  int
	head, n int
	limit   int  // SRQ limit (0 = disarmed)
	srq     *SRQ // nil for a QP's own RQ
}

// minRecvSlots is the first size of a receive queue's slots.
const minRecvSlots = 4

func newRecvQueue(maxWR, maxSGE int) *recvQueue {
	return &recvQueue{maxWR: maxWR, maxSGE: maxSGE}
}

// grow doubles the slots (from minRecvSlots, at most maxWR) and moves the
// posted WQEs to the front of the new ones. A WQE the responder is reading
// (Peek's pointer) stays valid in the old slots, which are never written
// again.
func (q *recvQueue) grow() {
	n := min(q.maxWR, max(minRecvSlots, 2*len(q.slots)))
	slots := make([]verbs.RecvWR, n)
	sges := make([]verbs.SGE, n*q.maxSGE)
	for i := range slots {
		slots[i].SGList = sges[i*q.maxSGE : i*q.maxSGE : (i+1)*q.maxSGE]
	}
	for i := range q.n {
		old := &q.slots[(q.head+i)%len(q.slots)]
		slots[i].ID = old.ID
		slots[i].SGList = append(slots[i].SGList, old.SGList...)
	}
	q.slots, q.sges, q.head = slots, sges, 0
}

// post copies wrs in; it returns how many were posted.
func (q *recvQueue) post(wrs []RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > q.maxSGE {
			return i, fmt.Errorf("%w: receive WR %d has %d SGEs, max %d", ErrInvalidArgument, i, len(wr.SGList), q.maxSGE)
		}
		if q.n == len(q.slots) {
			if len(q.slots) >= q.maxWR {
				return i, fmt.Errorf("%w: receive queue full (%d WRs)", ErrNoResources, q.maxWR)
			}
			q.grow()
		}
		j := q.head + q.n
		if j >= len(q.slots) {
			j -= len(q.slots)
		}
		s := &q.slots[j]
		s.ID = wr.ID
		s.SGList = append(s.SGList[:0], wr.SGList...)
		q.n++
	}
	return len(wrs), nil
}

// Peek implements responder.RecvQueue.
func (q *recvQueue) Peek() (*verbs.RecvWR, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil, false
	}
	return &q.slots[q.head], true
}

// Pop implements responder.RecvQueue. For an SRQ it raises
// SRQ_LIMIT_REACHED once when the queue drops below the armed limit.
func (q *recvQueue) Pop() {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return
	}
	q.head++
	if q.head == len(q.slots) {
		q.head = 0
	}
	q.n--
	fire := q.srq != nil && q.limit > 0 && q.n < q.limit
	if fire {
		q.limit = 0
	}
	q.mu.Unlock()
	if fire {
		q.srq.dev.raise(AsyncEvent{Type: EventSRQLimitReached, SRQ: q.srq})
	}
}

// Len implements responder.RecvQueue.
func (q *recvQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// flush completes every WQE with WR_FLUSH_ERR on cq (a QP's own RQ when
// the QP enters ERR).
func (q *recvQueue) flush(cq *CQ, qpn uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; q.n > 0; q.n-- {
		wc := WC{ID: q.slots[q.head].ID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: qpn}
		cq.push(&wc, false)
		q.head++
		if q.head == len(q.slots) {
			q.head = 0
		}
	}
}

// SRQAttr describes a shared receive queue.
type SRQAttr struct {
	MaxWR  int // capacity
	MaxSGE int // SGEs per receive WR
	// Limit arms SRQ_LIMIT_REACHED: raised once when fewer than Limit WQEs
	// remain; 0 disarms.
	Limit int
}

// SRQ is a shared receive queue: several QPs of one PD take receive WQEs
// from it.
type SRQ struct {
	dev   *Device
	pd    *PD
	q     *recvQueue
	users atomic.Int32
	dead  atomic.Bool
}

// CreateSRQ creates a shared receive queue.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	d := pd.dev
	if d.closed.Load() || pd.closed.Load() {
		return nil, ErrClosed
	}
	if attr.MaxWR < 1 || attr.MaxWR > d.attr.MaxSRQWR {
		return nil, fmt.Errorf("%w: SRQ max_wr %d not in [1, %d]", ErrInvalidArgument, attr.MaxWR, d.attr.MaxSRQWR)
	}
	if attr.MaxSGE < 1 || attr.MaxSGE > d.attr.MaxSGE {
		return nil, fmt.Errorf("%w: SRQ max_sge %d not in [1, %d]", ErrInvalidArgument, attr.MaxSGE, d.attr.MaxSGE)
	}
	if attr.Limit < 0 || attr.Limit > attr.MaxWR {
		return nil, fmt.Errorf("%w: SRQ limit %d", ErrInvalidArgument, attr.Limit)
	}
	s := &SRQ{dev: d, pd: pd, q: newRecvQueue(attr.MaxWR, attr.MaxSGE)}
	s.q.srq = s
	s.q.limit = attr.Limit
	pd.users.Add(1)
	return s, nil
}

// PostRecv posts receive WRs; it returns how many were posted before the
// first failure.
func (s *SRQ) PostRecv(wrs ...RecvWR) (int, error) {
	if s.dead.Load() {
		return 0, ErrClosed
	}
	return s.q.post(wrs)
}

// SetLimit arms (limit > 0) or disarms the SRQ limit event
// (ibv_modify_srq with IBV_SRQ_LIMIT).
func (s *SRQ) SetLimit(limit int) error {
	if limit < 0 || limit > s.q.maxWR {
		return fmt.Errorf("%w: SRQ limit %d", ErrInvalidArgument, limit)
	}
	s.q.mu.Lock()
	s.q.limit = limit
	s.q.mu.Unlock()
	return nil
}

// Len returns the number of posted receive WQEs.
func (s *SRQ) Len() int { return s.q.Len() }

// Destroy destroys the SRQ; it fails with ErrInUse while QPs use it.
func (s *SRQ) Destroy() error {
	if n := s.users.Load(); n > 0 {
		return fmt.Errorf("%w: SRQ used by %d QPs", ErrInUse, n)
	}
	if s.dead.Swap(true) {
		return ErrClosed
	}
	s.pd.users.Add(-1)
	return nil
}
