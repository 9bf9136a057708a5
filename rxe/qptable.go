package rxe

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorxe/gorxe/packet"
)

// qpTable maps QP numbers to QPs. Lookups (one per received packet) take
// no lock: a sync.Map suits this read-mostly use.
type qpTable struct {
	m      sync.Map      // uint32 -> *QP
	gen    atomic.Uint64 // bumped after every insert and remove (qpCache)
	mu     sync.Mutex
	count  int
	next   uint32
	closed bool // Device.Close has begun: insert refuses
}

// maxQPs bounds the number of QPs of a device.
const maxQPs = 1 << 20

// firstQPN is the first QPN handed out; 0 and 1 are QP0 and QP1 (GSI).
const firstQPN = 0x11

func (t *qpTable) lookup(qpn uint32) *QP {
	v, ok := t.m.Load(qpn)
	if !ok {
		return nil
	}
	return v.(*QP)
}

// qpCache is the QP a receive batch looked up last: the packets of a
// batch mostly go to one QP, and a hit costs one atomic load where
// sync.Map hashes an interface key. It is owned by one connReader, which
// clears it at the end of each batch (connReader.dispatch).
type qpCache struct {
	gen uint64 // the table's gen when qp was looked up
	qpn uint32
	qp  *QP
}

// lookupCached is lookup through c. An insert or remove since c was
// filled changes the table's gen, so a QPN that was destroyed and given
// to a new QP is looked up again. gen is read before the map: a change
// between the two leaves c stale and marked with the older gen.
func (t *qpTable) lookupCached(c *qpCache, qpn uint32) *QP {
	gen := t.gen.Load()
	if c.qp != nil && c.qpn == qpn && c.gen == gen {
		return c.qp
	}
	qp := t.lookup(qpn)
	*c = qpCache{gen: gen, qpn: qpn, qp: qp}
	return qp
}

// insert gives qp the next free QPN equal to vec modulo nvec (the
// receive steering of netdev.ListenUDPGroup: a QP's packets reach its own
// vector's socket).
func (t *qpTable) insert(qp *QP, vec, nvec int) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrClosed
	}
	if t.count >= maxQPs {
		return 0, fmt.Errorf("%w: %d QPs", ErrNoResources, maxQPs)
	}
	for range packet.QPNMask + 1 {
		if t.next < firstQPN || t.next > packet.QPNMask {
			t.next = firstQPN
		}
		qpn := t.next
		t.next++
		if int(qpn%uint32(nvec)) != vec {
			continue
		}
		if _, loaded := t.m.LoadOrStore(qpn, qp); !loaded {
			t.gen.Add(1)
			t.count++
			return qpn, nil
		}
	}
	return 0, fmt.Errorf("%w: no free QPN for completion vector %d", ErrNoResources, vec)
}

// close makes every later insert fail with ErrClosed. A QP whose insert
// returned before close is in the map for the each that follows, so
// Device.Close stops every QP that CreateQP returned.
func (t *qpTable) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func (t *qpTable) remove(qpn uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m.LoadAndDelete(qpn); ok {
		t.gen.Add(1)
		t.count--
	}
}

func (t *qpTable) each(f func(*QP)) {
	t.m.Range(func(_, v any) bool {
		f(v.(*QP))
		return true
	})
}
