package requester

import (
	"fmt"

	"github.com/gorxe/gorxe/rxe/verbs"
)

// trackMem wraps the fuzz harness's memory: every range handed out for
// writing (a READ response or an atomic result being placed) must lie
// inside one SGE of a READ or atomic WQE still in the send queue, and is
// recorded as written, so that a READ completing with success can be
// checked to have had every byte of its SGEs written.
type trackMem struct {
	fakeMem
	r       *Requester
	written map[uint64]bool // addresses of region A written
	err     error
}

func (m *trackMem) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	b, ok := m.fakeMem.Local(lkey, addr, length, need)
	if !ok || need&verbs.AccessLocalWrite == 0 || m.err != nil {
		return b, ok
	}
	if !m.outstanding(lkey, addr, length) {
		m.err = fmt.Errorf("write of %d bytes at %#x outside the SGEs of every READ or atomic outstanding", length, addr)
	}
	for a := addr; a < addr+uint64(length); a++ {
		m.written[a] = true
	}
	return b, ok
}

// outstanding reports whether [addr, addr+length) lies in one SGE of a
// started READ or atomic WQE still in the send queue.
func (m *trackMem) outstanding(lkey uint32, addr uint64, length uint32) bool {
	r := m.r
	for i := r.head; i != r.tail; i++ {
		w := r.slot(i)
		if !w.started || !w.kind.rdAtomic() {
			continue
		}
		for _, s := range w.sges {
			if s.LKey == lkey && addr >= s.Addr && addr+uint64(length) <= s.Addr+uint64(s.Length) {
				return true
			}
		}
	}
	return false
}

// trackCQ wraps the fuzz harness's CQ: a READ completing with success must
// have had every byte of its SGEs written (trackMem).
type trackCQ struct {
	*fakeCQ
	mem *trackMem
	wrs map[uint64]verbs.SendWR
}

func (c *trackCQ) Complete(wc *verbs.WC) bool {
	if wr, ok := c.wrs[wc.ID]; ok && wc.Status == verbs.WCSuccess && wr.Opcode == verbs.WRRDMARead && c.mem.err == nil {
		for _, s := range wr.SGList {
			for a := s.Addr; a < s.Addr+uint64(s.Length); a++ {
				if !c.mem.written[a] {
					c.mem.err = fmt.Errorf("READ %d completed with byte %#x never written", wc.ID, a)
					break
				}
			}
		}
	}
	return c.fakeCQ.Complete(wc)
}
