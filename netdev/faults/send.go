package faults

import (
	"fmt"
	"sync"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// Where an entry of sendSide.out comes from.
const (
	fromExtra = -1 // a duplicate copy or a timer release: lost if refused
	fromHeld  = -2 // a held datagram released by a later one: requeued if refused
)

// sendSide applies the send rules. Decisions are made in WriteBatch; the
// datagrams to send go into out, in wire order, and out is handed to the
// inner Conn before any decision with a side effect is carried out, so
// that a refusal by the inner Conn can be answered exactly.
type sendSide struct {
	c   *Conn
	mu  sync.Mutex // serialises WriteBatch and the release timer
	eng *engine
	q   queue

	out    []netdev.Message
	origin []int    // per out entry: the caller's index, fromExtra or fromHeld
	copies []*dgram // per out entry: the queued copy to recycle, or nil
	// drops are the caller's indexes dropped since the last flush: a drop
	// has no side effect to order against a refusal, so it does not end
	// the batch; flush counts it once the datagrams before it are taken.
	drops []int

	segStart int // the caller's index the engine's saved state is before
	flushAt  int
	// cur is the caller's index whose datagram counts past the held ones
	// (tick); ticked is one past the last such index in this WriteBatch.
	cur, ticked int
	timer       *time.Timer
	emitHeld    func(*dgram)
}

func newSendSide(c *Conn, e *engine, cfg *Config) *sendSide {
	b := c.inner.BatchSize()
	s := &sendSide{
		c: c, eng: e, q: queue{max: cfg.MaxQueue},
		out:     make([]netdev.Message, 0, 2*b+8),
		origin:  make([]int, 0, 2*b+8),
		copies:  make([]*dgram, 0, 2*b+8),
		flushAt: b,
	}
	s.emitHeld = func(d *dgram) {
		d.by = s.cur
		s.push(d.message(), fromHeld, d)
	}
	return s
}

func (s *sendSide) push(m netdev.Message, origin int, d *dgram) {
	s.out = append(s.out, m)
	s.origin = append(s.origin, origin)
	s.copies = append(s.copies, d)
}

// tick counts the caller's datagram msgs[i] past the held ones, releasing
// those whose count runs out into out.
func (s *sendSide) tick(i int) {
	s.cur = i
	s.q.tick(s.emitHeld)
	s.ticked = i + 1
}

// releaseFirst puts the held datagrams that were released by a datagram
// that went out, but were refused themselves (flush), into out before the
// caller's next datagram: where they would have followed it had the inner
// Conn not refused them.
func (s *sendSide) releaseFirst() {
	s.cur = -1
	s.q.releaseFirst(s.emitHeld)
}

// mark records that the decisions before caller index i are final.
func (s *sendSide) mark(i int) {
	s.segStart = i
	s.eng.save()
}

// write applies the rules to msgs in order and sends what they let
// through, holding reordered and delayed datagrams (caller: Conn.WriteBatch).
func (s *sendSide) write(msgs []netdev.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.isClosed() {
		return 0, errClosed
	}
	s.mark(0)
	s.ticked = 0
	for i := range msgs {
		s.releaseFirst()
		m := &msgs[i]
		if m.N < 0 || m.N > cap(m.Buf) {
			if f, err := s.flush(msgs); err != nil {
				return f, err
			}
			return i, fmt.Errorf("%w: N = %d, cap(Buf) = %d", netdev.ErrInvalidMessage, m.N, cap(m.Buf))
		}
		b := m.Buf[:m.N]
		d := s.eng.decide(b)
		if d.rule == nil || d.rule.Action == Drop {
			if d.rule == nil {
				s.push(*m, i, nil)
			} else {
				s.drops = append(s.drops, i)
			}
			s.tick(i)
			if len(s.out) >= s.flushAt {
				if f, err := s.flush(msgs); err != nil {
					return f, err
				}
				s.mark(i + 1)
			}
			continue
		}
		// Send what came before, so that a refusal there is answered
		// before this decision takes effect.
		if f, err := s.flush(msgs); err != nil {
			return f, err
		}
		if d.rule.Action == LocalDrop {
			// The caller sends msgs[i:] again later: a new datagram
			// for the rules, so the decision stands.
			s.c.act(Send, LocalDrop, b)
			return i, errLocalDrop
		}
		s.releaseFirst()
		a := s.apply(d, m, i)
		if len(s.out) > 0 {
			if f, err := s.flush(msgs); err != nil {
				return f, err
			}
		}
		if a != 0 {
			s.c.act(Send, a, b)
		}
		s.mark(i + 1)
	}
	s.releaseFirst()
	if f, err := s.flush(msgs); err != nil {
		return f, err
	}
	return len(msgs), nil
}

// flush hands out to the inner Conn. If the inner Conn refuses one of the
// caller's datagrams, msgs[f], flush takes back the decisions from f on,
// and the counts past the held datagrams (tick) of msgs[f:], and returns f
// and the error; if it refuses only copies, it counts or requeues them and
// returns no error. msgs is nil for the timer's flush.
func (s *sendSide) flush(msgs []netdev.Message) (int, error) {
	if len(s.out) == 0 {
		s.countDrops(msgs, -1)
		return 0, nil
	}
	n, err := s.c.inner.WriteBatch(s.out)
	if err == nil {
		n = len(s.out)
	}
	n = max(n, 0)
	// failed is the caller's index of the first of its datagrams the
	// inner Conn did not take, at out[failedAt].
	failed, failedAt := -1, len(s.out)
	for j := n; j < len(s.out); j++ {
		if s.origin[j] >= 0 {
			failed, failedAt = s.origin[j], j
			break
		}
	}
	defer func() { s.countDrops(msgs, failed) }()
	if failed >= 0 && s.ticked > failed {
		// msgs[failed:] are decided again when sent again.
		s.q.untick(s.ticked - failed)
	}
	var now time.Time
	for j := range s.out {
		d := s.copies[j]
		switch {
		case j < n:
			if d != nil {
				s.q.put(d)
			}
		case s.origin[j] >= 0:
			if d != nil {
				s.q.put(d)
			}
		case s.origin[j] == fromHeld:
			// Released by a datagram that was refused (or was dropped
			// after one that was): wait for it and those after it
			// again. Released by one that went out: go out before the
			// caller's next datagram (releaseFirst), or when its time
			// comes.
			if now.IsZero() {
				now = time.Now()
			}
			d.left, d.first = 1, true
			if failed >= 0 && d.by >= failed {
				d.left, d.first = d.by+1-failed, false
			}
			if !s.q.hold(d) {
				s.q.put(d)
				s.c.lost(Send, 1)
			}
			s.arm(now)
		case j > failedAt:
			// A duplicate copy of msgs[failed] or a later datagram:
			// its decision is taken back with theirs, and the caller
			// sends it again, so nothing is lost.
			if d != nil {
				s.q.put(d)
			}
		default:
			if d != nil {
				s.q.put(d)
			}
			s.c.lost(Send, 1)
		}
	}
	clear(s.out)
	clear(s.copies)
	s.out, s.origin, s.copies = s.out[:0], s.origin[:0], s.copies[:0]
	if failed < 0 {
		return 0, nil
	}
	// Take back the decisions from msgs[failed] on: go back to the saved
	// state and decide msgs[segStart:failed] again, which gives the same
	// results.
	s.eng.restore()
	for k := s.segStart; k < failed; k++ {
		s.eng.decide(msgs[k].Buf[:msgs[k].N])
	}
	return failed, err
}

// countDrops counts the drops decided since the last flush, those before
// the caller's index failed if it is not negative (the later ones are
// decided again when the caller sends them again), and forgets them.
func (s *sendSide) countDrops(msgs []netdev.Message, failed int) {
	for _, i := range s.drops {
		if failed >= 0 && i >= failed {
			break
		}
		s.c.act(Send, Drop, msgs[i].Buf[:msgs[i].N])
	}
	s.drops = s.drops[:0]
}

// arm sets the release timer for the earliest held or delayed datagram.
func (s *sendSide) arm(now time.Time) {
	due, ok := s.q.next()
	if !ok {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(due.Sub(now), s.release)
		return
	}
	s.timer.Reset(due.Sub(now))
}

// release sends the held and delayed datagrams whose time has come.
func (s *sendSide) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.isClosed() {
		return
	}
	now := time.Now()
	s.q.releaseDue(now, s.emitDue)
	s.flush(nil)
	s.arm(now)
}

func (s *sendSide) emitDue(d *dgram) {
	s.push(d.message(), fromExtra, d)
}

func (s *sendSide) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.c.lost(Send, s.q.drain())
}

// apply carries out the fault d chose for msgs[i] = *m, other than a local
// drop (caller holds mu). It returns the action taken, or 0 when a datagram
// to hold found no room and was counted lost.
func (s *sendSide) apply(d decision, m *netdev.Message, i int) Action {
	a := d.rule.Action
	switch a {
	case Drop:
		s.tick(i)
	case Duplicate:
		s.push(*m, i, nil)
		s.push(*m, fromExtra, nil)
		s.tick(i)
	case Corrupt:
		cp := s.q.get(m)
		flip(cp.data, d.bit)
		s.push(cp.message(), i, cp)
		s.tick(i)
	case Reorder, Delay:
		s.tick(i)
		cp := s.q.get(m)
		now := time.Now()
		cp.due = now.Add(d.rule.delay())
		if a == Reorder {
			cp.left = d.rule.depth()
		}
		if !s.q.hold(cp) {
			s.q.put(cp)
			s.c.lost(Send, 1)
			a = 0
		}
		s.arm(now)
	}
	return a
}
