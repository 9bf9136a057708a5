package netdev

import (
	"golang.org/x/sys/unix"
)

// Reading one UDPConn from two goroutines in turn (SharedReader).
//
// ReadBatchGated and TryReadBatch use the UDPConn's one receive state
// (headers, GRO buffers and the datagrams of a GRO buffer not yet
// returned) under the caller's gate instead of under ReadBatch's own lock.
// ReadBatchGated waits in the runtime poller without the gate, so a
// polling goroutine can take the gate and read the socket meanwhile; every
// datagram is read by exactly one of them, and since each handles what it
// read before unlocking the gate, datagrams are handled in the order the
// socket delivered them.

// gatedRead is the state of ReadBatchGated's receive attempts, made once
// per UDPConn so that an attempt allocates nothing.
type gatedRead struct {
	c      *UDPConn
	gate   *Gate
	msgs   []Message
	k      int  // receive headers readied by the last attempt
	locked bool // the attempt holds gate
	left   bool // the attempt found GRO datagrams left by the last read
	run    func(fd uintptr) bool
}

// attempt is one receive attempt inside RawConn.Read: it takes the gate,
// readies the receive state for msgs and runs recvmmsg. It keeps the gate
// when it found datagrams (or an error) and releases it before the runtime
// waits for readability (EAGAIN). When another reader holds the gate it
// does not wait for it: it leaves the socket to that reader (Gate.take)
// and waits for readability.
func (g *gatedRead) attempt(fd uintptr) bool {
	c := g.c
	for {
		if !g.locked {
			if !g.gate.take() {
				return false
			}
			g.locked = true
		}
		if c.gro && c.grx.next < c.grx.got {
			g.left = true
			return true
		}
		g.k = c.prepIovs(g.msgs)
		c.rx.prepRecv(g.k)
		if c.rx.call(fd) {
			return true
		}
		c.rx.clearIovs(g.k)
		if !g.gate.Unlock() {
			g.locked = false
			return false
		}
		// Retaken: a poller meanwhile left the socket to us. Read again.
	}
}

// prepIovs points the receive I/O vectors at msgs' buffers (or, with GRO,
// at the GRO buffers) and returns how many headers to use.
func (c *UDPConn) prepIovs(msgs []Message) int {
	if c.gro {
		c.setGROIovs()
		return len(c.rx.hdrs)
	}
	k := min(len(msgs), len(c.rx.hdrs))
	for i := range k {
		c.rx.setIov(i, msgs[i].Buf[:cap(msgs[i].Buf)])
	}
	return k
}

// ReadBatchGated implements SharedReader. It is ReadBatch with the
// receive state guarded by gate: it waits for the socket to become
// readable without holding gate, holds gate for each receive attempt, and
// returns holding it when n > 0, so that the caller handles the datagrams
// before another reader (TryReadBatch) runs; it returns without it when
// it returns an error. It never waits for gate: while another reader
// holds it, that reader reads what arrives (Gate.Unlock). It must not run
// concurrently with ReadBatch.
func (c *UDPConn) ReadBatchGated(msgs []Message, gate *Gate) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	c.rmu.Lock() // one ReadBatchGated at a time: the gatedRead is shared
	defer c.rmu.Unlock()
	g := &c.gated
	if g.run == nil {
		g.c, g.run = c, g.attempt
	}
	for {
		g.gate, g.msgs, g.locked, g.left = gate, msgs, false, false
		err := c.read(g.run)
		g.msgs = nil
		if err != nil {
			if g.locked {
				gate.Release()
			}
			return 0, err // closed: a *net.OpError wrapping net.ErrClosed
		}
		if g.left {
			return c.splitGRO(msgs), nil
		}
		n, err := c.finishShared(msgs, g.k)
		if n > 0 {
			return n, nil
		}
		gate.Release() // the next attempt reads until the socket is empty
		if err != nil {
			return 0, err
		}
	}
}

// TryReadBatch implements SharedReader: it reads like ReadBatch but never
// waits; it returns 0 and a nil error when no datagram is there. The
// caller holds the gate it gives ReadBatchGated, and handles the
// datagrams before unlocking it.
func (c *UDPConn) TryReadBatch(msgs []Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if c.gro && c.grx.next < c.grx.got {
		return c.splitGRO(msgs), nil
	}
	r := c.rx
	if c.tryRun == nil {
		c.tryRun = func(fd uintptr) { r.call(fd) }
	}
	r.block = false
	defer func() { r.block = true }()
	for {
		k := c.prepIovs(msgs)
		r.prepRecv(k)
		if err := c.rc.Control(c.tryRun); err != nil {
			r.clearIovs(k)
			return 0, err // closed
		}
		if r.errno == unix.EAGAIN {
			r.clearIovs(k)
			return 0, nil
		}
		n, err := c.finishShared(msgs, k)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// finishShared turns the result of a receive attempt over k headers into
// msgs: it absorbs a queued ICMP error (n 0, nil: the caller tries again),
// returns any other error, and converts the datagrams (or, with GRO, splits
// the buffers). n is 0 with a nil error when every datagram was truncated.
func (c *UDPConn) finishShared(msgs []Message, k int) (int, error) {
	r := c.rx
	if !c.gro {
		defer r.clearIovs(k)
	}
	if r.errno != 0 {
		err := opError("read", "recvmmsg", r.errno)
		if cls, _ := classify(err); cls == classICMP {
			icmp, _ := drainErrQueue(c.rc)
			c.stats.icmpErrors.Add(uint64(max(icmp, 1)))
			return 0, nil
		}
		return 0, err
	}
	if c.gro {
		c.fillGRO(r.got)
		return c.splitGRO(msgs), nil
	}
	return c.finishRead(msgs, r.got), nil
}

// Check the interface at compile time.
var _ SharedReader = (*UDPConn)(nil)
