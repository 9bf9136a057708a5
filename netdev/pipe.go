package netdev

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
)

// DefaultPipeDepth is the queue depth per direction used when
// PipeOptions.Depth is zero.
const DefaultPipeDepth = 1024

// Default pipe endpoint addresses, used when PipeOptions leaves them zero.
var (
	DefaultPipeAddrA = netip.MustParseAddrPort("127.0.0.1:4791")
	DefaultPipeAddrB = netip.MustParseAddrPort("127.0.0.2:4791")
)

// PipeOptions configures NewPipeWith. The zero value is NewPipe's default.
type PipeOptions struct {
	// AddrA and AddrB are the two endpoints' addresses. Zero means
	// DefaultPipeAddrA and DefaultPipeAddrB.
	AddrA, AddrB netip.AddrPort

	// Depth is the number of datagrams queued in each direction. Zero
	// means DefaultPipeDepth.
	Depth int

	// BlockWhenFull makes WriteBatch wait for room when the peer's queue
	// is full. By default it returns a DropError with ENOBUFS instead, the
	// same error a UDPConn returns for a full qdisc.
	BlockWhenFull bool

	// BatchSize is the most datagrams one ReadBatch returns. Zero means
	// DefaultBatchSize.
	BatchSize int
}

// PipeConn is one endpoint of an in-memory datagram pipe made by NewPipe.
// It has the semantics of a UDPConn without a socket: datagrams are copied,
// delivered in order to the other endpoint if their Addr is the other
// endpoint's address (and otherwise discarded, as a network would discard
// them), and a full queue is a local drop. It uses only channels and
// mutexes, so it works inside a testing/synctest bubble.
//
// Closing either endpoint closes both: pending and later ReadBatch and
// WriteBatch calls on either side return an error wrapping net.ErrClosed,
// and datagrams still queued are discarded.
type PipeConn struct {
	local, peer netip.AddrPort
	in, out     *pipeDir
	shared      *pipeShared
	block       bool
	batch       int
	stats       counters

	rmu, wmu sync.Mutex // serialise ReadBatch and WriteBatch
}

// pipeDatagram is a queued copy of one datagram.
type pipeDatagram struct {
	data []byte
	from netip.AddrPort
	tos  uint8
}

// pipeDir is one direction: the queue and a free list that recycles the
// datagram copies, so a steady flow allocates nothing.
type pipeDir struct {
	q    chan *pipeDatagram
	free chan *pipeDatagram
}

func (d *pipeDir) get() *pipeDatagram {
	select {
	case p := <-d.free:
		return p
	default:
		return new(pipeDatagram)
	}
}

func (d *pipeDir) put(p *pipeDatagram) {
	select {
	case d.free <- p:
	default:
	}
}

type pipeShared struct {
	once sync.Once
	done chan struct{}
}

var errPipeClosed = fmt.Errorf("netdev: pipe: %w", net.ErrClosed)

// NewPipe returns the two endpoints of an in-memory pipe with the default
// PipeOptions: addresses 127.0.0.1:4791 and 127.0.0.2:4791, 1024 datagrams
// of queue per direction, and ENOBUFS drops when a queue is full.
func NewPipe() (a, b *PipeConn) { return NewPipeWith(PipeOptions{}) }

// NewPipeWith returns the two endpoints of an in-memory pipe.
func NewPipeWith(o PipeOptions) (a, b *PipeConn) {
	if !o.AddrA.IsValid() {
		o.AddrA = DefaultPipeAddrA
	}
	if !o.AddrB.IsValid() {
		o.AddrB = DefaultPipeAddrB
	}
	if o.Depth <= 0 {
		o.Depth = DefaultPipeDepth
	}
	batch := batchSize(o.BatchSize)
	newDir := func() *pipeDir {
		return &pipeDir{
			q:    make(chan *pipeDatagram, o.Depth),
			free: make(chan *pipeDatagram, o.Depth+batch),
		}
	}
	ab, ba := newDir(), newDir()
	shared := &pipeShared{done: make(chan struct{})}
	a = &PipeConn{local: unmapAP(o.AddrA), peer: unmapAP(o.AddrB), in: ba, out: ab,
		shared: shared, block: o.BlockWhenFull, batch: batch}
	b = &PipeConn{local: unmapAP(o.AddrB), peer: unmapAP(o.AddrA), in: ab, out: ba,
		shared: shared, block: o.BlockWhenFull, batch: batch}
	return a, b
}

func unmapAP(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// BatchSize implements Conn.
func (c *PipeConn) BatchSize() int { return c.batch }

// LocalAddr implements Conn.
func (c *PipeConn) LocalAddr() netip.AddrPort { return c.local }

// Stats returns a snapshot of the counters.
func (c *PipeConn) Stats() Stats { return c.stats.snapshot() }

// Close implements Conn. It closes both endpoints.
func (c *PipeConn) Close() error {
	c.shared.once.Do(func() { close(c.shared.done) })
	return nil
}

func (c *PipeConn) isClosed() bool {
	select {
	case <-c.shared.done:
		return true
	default:
		return false
	}
}

// ReadBatch implements Conn. The sender's address is the other endpoint's
// address and Local is this endpoint's.
func (c *PipeConn) ReadBatch(msgs []Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	limit := min(len(msgs), c.batch)
	for {
		if c.isClosed() {
			return 0, errPipeClosed
		}
		var p *pipeDatagram
		select {
		case p = <-c.in.q:
		case <-c.shared.done:
			return 0, errPipeClosed
		}
		n := c.deliver(msgs, 0, p)
	more:
		for n < limit {
			select {
			case p = <-c.in.q:
				n = c.deliver(msgs, n, p)
			default:
				break more
			}
		}
		if n > 0 {
			return n, nil
		}
	}
}

// deliver copies p into msgs[n] (or drops it if it does not fit), recycles
// it, and returns the new count.
func (c *PipeConn) deliver(msgs []Message, n int, p *pipeDatagram) int {
	defer c.in.put(p)
	m := &msgs[n]
	if len(p.data) > cap(m.Buf) {
		c.stats.truncated.Add(1)
		return n
	}
	m.N = copy(m.Buf[:cap(m.Buf)], p.data)
	m.Addr = p.from
	m.Local = c.local.Addr()
	m.TOS, m.TTL = p.tos, 0
	c.stats.packetsReceived.Add(1)
	c.stats.bytesReceived.Add(uint64(m.N))
	return n + 1
}

// WriteBatch implements Conn. Datagrams whose Addr is not the peer's address
// count as sent (and in Stats.Unroutable) but are discarded. When the peer's
// queue is full it returns a DropError with ENOBUFS, or waits if the pipe
// was made with BlockWhenFull.
func (c *PipeConn) WriteBatch(msgs []Message) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for i := range msgs {
		m := &msgs[i]
		if c.isClosed() {
			return i, errPipeClosed
		}
		if m.N < 0 || m.N > cap(m.Buf) {
			return i, fmt.Errorf("%w: N = %d, cap(Buf) = %d", ErrInvalidMessage, m.N, cap(m.Buf))
		}
		if !m.Addr.IsValid() {
			return i, fmt.Errorf("%w: no destination address", ErrInvalidMessage)
		}
		if unmapAP(m.Addr) != c.peer {
			c.stats.unroutable.Add(1)
			c.countSent(m.N)
			continue
		}
		p := c.out.get()
		p.data = append(p.data[:0], m.Buf[:m.N]...)
		p.from, p.tos = c.local, m.TOS
		if c.block {
			select {
			case c.out.q <- p:
			case <-c.shared.done:
				c.out.put(p)
				return i, errPipeClosed
			}
		} else {
			select {
			case c.out.q <- p:
			default:
				c.out.put(p)
				c.stats.noBufs.Add(1)
				return i, errDropNoBufs
			}
		}
		c.countSent(m.N)
	}
	return len(msgs), nil
}

func (c *PipeConn) countSent(n int) {
	c.stats.packetsSent.Add(1)
	c.stats.bytesSent.Add(uint64(n))
}

// ReportIPFields implements IPFieldReporter. A PipeConn always reports the
// TOS its peer gave a datagram (Message.TOS); it has no TTL to report.
func (c *PipeConn) ReportIPFields() error { return nil }
