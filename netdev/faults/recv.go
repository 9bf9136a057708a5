package faults

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// recvSide applies the receive rules. Its pump goroutine reads the inner
// Conn, decides, and queues what is to be delivered in ready (now) or in
// the queue (later); ReadBatch takes from ready, moving what falls due
// from the queue first. When the rules only drop or corrupt there is no
// pump: ReadBatch reads and decides in the caller's buffers (readDirect).
type recvSide struct {
	c     *Conn
	rmu   sync.Mutex // serialises ReadBatch
	mu    sync.Mutex // everything below
	eng   *engine
	q     queue
	ready []*dgram // FIFO, from head
	head  int
	err   error // from the inner Conn, not yet returned (kept if closed)

	wake    chan struct{} // pump → reader: something changed
	room    chan struct{} // reader → pump: ready drained or error taken
	timer   *time.Timer   // the reader's; made on first use
	maxRead int
	bufSize int
	batch   int
	emit    func(*dgram)
	// direct: the rules only drop or corrupt, and ReadBatch decides in the
	// caller's buffers (readDirect); there is no pump.
	direct bool
}

func newRecvSide(c *Conn, e *engine, cfg *Config) *recvSide {
	r := &recvSide{
		c: c, eng: e, q: queue{max: cfg.MaxQueue},
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		maxRead: cfg.MaxQueue, bufSize: cfg.MaxDatagram, batch: c.inner.BatchSize(),
		direct: e.direct(),
	}
	r.emit = func(d *dgram) { r.ready = append(r.ready, d) }
	return r
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (r *recvSide) queued() int { return len(r.ready) - r.head }

// pump reads the inner Conn until it is closed.
func (r *recvSide) pump() {
	msgs := make([]netdev.Message, r.batch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, r.bufSize)
	}
	for {
		r.mu.Lock()
		for r.queued() >= r.maxRead || r.err != nil {
			r.mu.Unlock()
			select {
			case <-r.room:
			case <-r.c.done:
				return
			}
			r.mu.Lock()
		}
		r.mu.Unlock()

		n, err := r.c.inner.ReadBatch(msgs)
		r.mu.Lock()
		if err != nil {
			r.err = err
			r.mu.Unlock()
			signal(r.wake)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// What falls due now goes before what arrives now, whichever
		// of the pump and the reader gets here first.
		now := time.Now()
		r.q.releaseDue(now, r.emit)
		for i := range msgs[:n] {
			r.apply(&msgs[i], now)
		}
		r.mu.Unlock()
		signal(r.wake)
	}
}

// apply decides the fate of one received datagram, received at now.
func (r *recvSide) apply(m *netdev.Message, now time.Time) {
	b := m.Buf[:m.N]
	d := r.eng.decide(b)
	var a Action
	if d.rule != nil {
		a = d.rule.Action
	}
	switch a {
	case 0:
		r.ready = append(r.ready, r.q.get(m))
	case Drop:
	case Duplicate:
		r.ready = append(r.ready, r.q.get(m), r.q.get(m))
	case Corrupt:
		cp := r.q.get(m)
		flip(cp.data, d.bit)
		r.ready = append(r.ready, cp)
	case Reorder, Delay:
		r.q.tick(r.emit)
		cp := r.q.get(m)
		cp.due = now.Add(d.rule.delay())
		if a == Reorder {
			cp.left = d.rule.depth()
		}
		if !r.q.hold(cp) {
			r.q.put(cp)
			r.c.lost(Recv, 1)
			return
		}
		r.c.act(Recv, a, b)
		return
	}
	r.q.tick(r.emit)
	if a != 0 {
		r.c.act(Recv, a, b)
	}
}

// direct reports whether every receive rule decides a datagram's fate on
// its own (drop or corrupt): the datagrams then need no queue, and
// ReadBatch decides them in the caller's buffers (readDirect) without the
// pump goroutine or a copy.
func (e *engine) direct() bool {
	for i := range e.rules {
		switch e.rules[i].Action {
		case Drop, Corrupt:
		default:
			return false
		}
	}
	return true
}

// readDirect is ReadBatch with receive rules that only drop or corrupt:
// it reads the inner Conn into msgs and decides each datagram there, in
// arrival order as the pump does, so a seed gives the same faults. A
// dropped datagram's Message is moved behind the ones kept (netdev.Conn
// allows permuting msgs); a batch that loses every datagram is followed
// by another read.
func (r *recvSide) readDirect(msgs []netdev.Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	r.rmu.Lock()
	defer r.rmu.Unlock()
	for {
		if r.c.isClosed() {
			return 0, errClosed
		}
		n, err := r.c.inner.ReadBatch(msgs)
		if err != nil {
			if r.c.isClosed() {
				return 0, errClosed
			}
			return 0, err
		}
		if kept := r.decideDirect(msgs[:n]); kept > 0 {
			return kept, nil
		}
	}
}

// decideDirect applies the drop and corrupt rules to msgs, in order, and
// returns how many are kept: those move to the front, the dropped ones
// behind them.
func (r *recvSide) decideDirect(msgs []netdev.Message) int {
	kept := 0
	for i := range msgs {
		b := msgs[i].Buf[:msgs[i].N]
		d := r.eng.decide(b)
		if d.rule != nil {
			switch d.rule.Action {
			case Drop:
				r.c.act(Recv, Drop, b)
				continue
			case Corrupt:
				flip(b, d.bit)
				r.c.act(Recv, Corrupt, b)
			}
		}
		if kept != i {
			msgs[kept], msgs[i] = msgs[i], msgs[kept]
		}
		kept++
	}
	return kept
}

// read is ReadBatch with receive rules.
func (r *recvSide) read(msgs []netdev.Message) (int, error) {
	if r.direct {
		return r.readDirect(msgs)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	r.rmu.Lock()
	defer r.rmu.Unlock()
	limit := min(len(msgs), r.batch)
	for {
		if r.c.isClosed() {
			return 0, errClosed
		}
		r.mu.Lock()
		now := time.Now()
		r.q.releaseDue(now, r.emit)
		n := 0
		for n < limit && r.queued() > 0 {
			d := r.ready[r.head]
			r.ready[r.head] = nil
			r.head++
			m := &msgs[n]
			if len(d.data) > cap(m.Buf) {
				r.c.lost(Recv, 1)
			} else {
				m.N = copy(m.Buf[:cap(m.Buf)], d.data)
				m.Addr, m.Local, m.TOS, m.TTL = d.addr, d.local, d.tos, d.ttl
				n++
			}
			r.q.put(d)
		}
		if r.queued() == 0 {
			r.ready, r.head = r.ready[:0], 0
		} else if r.head > 0 && 2*r.head >= len(r.ready) {
			// Move the rest to the front: a reader that never empties
			// ready (the pump keeps ahead of it) would otherwise make it
			// grow by every datagram that ever passed.
			n := copy(r.ready, r.ready[r.head:])
			clear(r.ready[n:])
			r.ready, r.head = r.ready[:n], 0
		}
		if n > 0 {
			r.mu.Unlock()
			signal(r.room)
			return n, nil
		}
		if err := r.err; err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.err = nil // hand a passing error over once
				signal(r.room)
			}
			r.mu.Unlock()
			return 0, err
		}
		due, timed := r.q.next()
		r.mu.Unlock()

		var tc <-chan time.Time
		if timed {
			if r.timer == nil {
				r.timer = time.NewTimer(due.Sub(now))
			} else {
				r.timer.Reset(due.Sub(now))
			}
			tc = r.timer.C
		}
		select {
		case <-r.wake:
		case <-tc:
		case <-r.c.done:
			return 0, errClosed
		}
		if timed {
			r.timer.Stop()
		}
	}
}

func (r *recvSide) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.lost(Recv, r.q.drain())
}
