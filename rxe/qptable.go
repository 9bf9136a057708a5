package rxe

import (
	"fmt"
	"sync"

	"github.com/gorxe/gorxe/packet"
)

// qpTable maps QP numbers to QPs. Lookups (one per received packet) take
// no lock: a sync.Map suits this read-mostly use.
type qpTable struct {
	m     sync.Map // uint32 -> *QP
	mu    sync.Mutex
	count int
	next  uint32
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

// insert gives qp the next free QPN equal to vec modulo nvec (the
// receive steering of netdev.ListenUDPGroup: a QP's packets reach its own
// vector's socket).
func (t *qpTable) insert(qp *QP, vec, nvec int) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
			t.count++
			return qpn, nil
		}
	}
	return 0, fmt.Errorf("%w: no free QPN for completion vector %d", ErrNoResources, vec)
}

func (t *qpTable) remove(qpn uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m.LoadAndDelete(qpn); ok {
		t.count--
	}
}

func (t *qpTable) each(f func(*QP)) {
	t.m.Range(func(_, v any) bool {
		f(v.(*QP))
		return true
	})
}
