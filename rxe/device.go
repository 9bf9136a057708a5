package rxe

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// Device is a soft-RoCE device on one netdev.Conn, or one per completion
// vector.
type Device struct {
	conns     []netdev.Conn // one, or one per vector (conns[i] receives QPNs i mod len)
	ownConn   bool
	opts      Options
	addr      netip.Addr // unmapped: 4-byte for IPv4
	port      uint16
	linkMTU   int
	activeMTU MTU
	attr      DeviceAttr

	mrs mrTable
	qps qpTable

	// batches counts the batches of datagrams being handled (connReader
	// dispatch); while it is not zero, CQ waiters are woken at the end of
	// the batch (CQ.wakeWaiter, endBatch). wakes holds the CQs to wake,
	// under wakeMu.
	batches atomic.Int32
	wakeMu  sync.Mutex
	wakes   []*CQ
	// behind is set when a completion queued during a batch leaves its CQ
	// more than half full, or a receive WQE taken during a batch from an
	// SRQ or a QP's own RQ leaves it with fewer than half its max_wr
	// (recvQueue.take, recvQueue.Pop): the goroutine that ends the batch
	// then yields its processor to the waiter it woke (endBatch).
	behind atomic.Bool

	nextPD atomic.Uint32
	// PDs, CQs and SRQs that exist, held within DeviceAttr's MaxPD, MaxCQ
	// and MaxSRQ (take).
	nPD, nCQ, nSRQ atomic.Int32

	vecs    []*vector
	vecMu   sync.Mutex
	vecUses []int // CQs per vector, for the least-used choice
	cpus    []int // CPUs the process may run on (PinVectors)

	events chan AsyncEvent
	// evMu orders raise with closeEvents; evClosed is set, under it, once
	// Close has closed events.
	evMu     sync.Mutex
	evClosed bool
	counters deviceCounters
	retired  retiredLoss // loss counters of engines gone (losscounters.go)

	gsiOnce sync.Once
	// gsi is QP1 and the connection manager (gsi.go), made on first use
	// by gsiOf; nil until then (Close looks without making one).
	gsi atomic.Pointer[gsi]

	// ipFields is set once the device's sockets were asked to report
	// received traffic classes and TTLs (Device.reportIPFields), under
	// ipFieldsMu.
	ipFieldsMu sync.Mutex
	ipFields   bool

	mcast mcastState // multicast groups joined and their QPs (mcast.go)

	closed atomic.Bool
	// busyPolled is set by the first CQ.BusyPoll on any of the device's
	// CQs: its caller reads the sockets itself, so the receive goroutines
	// no longer spin after a batch (connReader.spin).
	busyPolled atomic.Bool
	// spinUntil (nanoseconds after epoch), spinBound (the device's own
	// receive buffer is too small for a 128-PSN window) and spinQPs (the
	// QPs whose window a receive buffer bounds, QP.windowBound) say when
	// the receive goroutines spin after a batch (Device.wantSpin).
	spinUntil atomic.Int64
	spinBound atomic.Bool
	spinQPs   atomic.Int32
	// shares records the QPs that share sockets' receive buffers
	// (bufshare.go).
	shares bufShares
	// epoch is when the device was opened: times kept as integers count
	// from it, so that they follow the monotonic clock (a wall-clock step
	// moves UnixNano, not time.Time.Sub).
	epoch time.Time
	done  chan struct{}
	// stopped is closed once Close has stopped every QP (their flush
	// completions are in their CQs): it ends CQ.Wait.
	stopped chan struct{}
	wg      sync.WaitGroup
}

// maxPacket is the largest RoCE packet a device sends or accepts: a 4096
// byte payload and the largest header set, rounded up.
const maxPacket = 4096 + 128

// rxBufSize is the receive buffer per datagram: larger than any valid
// packet, so oversized junk is seen (and rejected) rather than truncated.
const rxBufSize = 9216

// DeviceAttr are device limits (a subset of struct ibv_device_attr).
type DeviceAttr struct {
	MaxQP, MaxQPWR, MaxSGE, MaxCQ, MaxCQE, MaxMR, MaxPD int
	MaxQPRdAtom, MaxQPInitRdAtom                        int
	MaxSRQ, MaxSRQWR, MaxSRQSGE                         int
	MaxInlineData                                       int
	MaxMsgSize                                          uint64
	LocalCAAckDelay                                     uint8
	NumCompVectors                                      int
	// MaxMcastGrp bounds the multicast groups a device joins,
	// MaxMcastQPAttach the QPs attached to one group and
	// MaxTotalMcastQPAttach the attachments of all groups (QP.AttachMcast).
	MaxMcastGrp, MaxMcastQPAttach, MaxTotalMcastQPAttach int
}

// PortAttr are port attributes (a subset of struct ibv_port_attr).
type PortAttr struct {
	State      uint8 // 4 = ACTIVE
	MaxMTU     MTU
	ActiveMTU  MTU
	LinkMTU    int
	GIDTblLen  int
	LinkLayer  uint8 // 2 = Ethernet
	MaxMsgSize uint64
}

// Close stops the device: its goroutines end, QP timers stop, and, for a
// device made by Listen, the socket closes. Every QP not in RESET moves to
// ERR, so the work requests outstanding at Close complete with
// WR_FLUSH_ERR (as when a device goes away under a verbs consumer); the CQs
// stay pollable to collect them. A UC or UD send completes once its
// datagram is written: one whose batch is being written when Close begins
// goes on the wire and completes with success first (its batch is written
// before the sockets close, waiting at most a second for it: a write that
// outlasts the wait is cut short, and its sends complete with
// WR_FLUSH_ERR before Close returns); one whose datagram the local host
// refused and its QP holds completes with WR_FLUSH_ERR. Events is closed
// once the QPs are stopped, after the events raised until then. Receive WQEs posted to an
// SRQ stay in it and complete no more (the SRQ's, not a QP's:
// ibv_destroy_srq discards them too). When Close returns the device touches no
// registered memory again. The connection manager tells the peer of every
// connection it knows (a REJ for one being set up, a DREQ for an
// established one; docs/cm.md, "When a device closes"). Objects stay valid
// but every other verbs call
// that changes state (posting, Modify, Dereg, Destroy, Dealloc, creating
// objects) fails with ErrClosed. A second Close returns ErrClosed, once
// the first has stopped every QP: from then on the device touches no
// registered memory, whichever call returns first.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		<-d.stopped
		return ErrClosed
	}
	if g := d.gsi.Load(); g != nil {
		g.shutdown() // while the socket is open
	}
	close(d.done)
	d.closeMcast()
	// A UC or UD send completes once the transmit pass that built its
	// packet has written it (rxe_xmit_packet: once the packet is handed
	// to the IP layer). Let a pass under way finish writing before the
	// sockets close, so that its sends are not cut short. A pass that
	// starts after closed is set builds nothing (a step of a closed
	// device's QP returns at once: QP.dead), so the passes this waits for
	// are the last that build. The wait is bounded: a write blocked for
	// good (a full pipe nobody reads) is cut short by the close, and
	// closeDevice completes the UC and UD work requests of its datagrams
	// with WR_FLUSH_ERR before Close returns.
	d.waitTransmitPasses(closeWriteWait)
	var err error
	if d.ownConn {
		for _, c := range d.conns {
			err = errors.Join(err, c.Close())
		}
	}
	// A conn we do not own stays open: the receive goroutine exits at its
	// next wake-up or when the owner closes conn. A step already under way
	// on a QP ends before closeDevice takes the QP's lock, and no later
	// step runs (QP.dead). A CreateQP that passed its closed check
	// before the Swap above either inserted its QP before qps.close, and
	// is stopped here, or fails.
	d.qps.close()
	d.qps.each(func(qp *QP) { qp.closeDevice() })
	// No QP step runs now, so no event comes: Events closes after the
	// events of the flushes above, before a second Close returns.
	d.closeEvents()
	close(d.stopped)
	for _, v := range d.vecs {
		v.timers.close()
	}
	if d.ownConn {
		d.wg.Wait()
	}
	return err
}

// closeWriteWait bounds how long Close waits for a transmit pass under
// way to write its batch.
const closeWriteWait = time.Second

// waitTransmitPasses waits, at most until limit has passed, until no
// vector's transmit pass is under way (each holds its vector's txMu from
// its first step to the end of its write).
func (d *Device) waitTransmitPasses(limit time.Duration) {
	end := time.Now().Add(limit)
	for _, v := range d.vecs {
		for !v.txMu.TryLock() {
			if time.Now().After(end) {
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
		v.txMu.Unlock()
	}
}

// Wait blocks until the device's goroutines have exited (after Close and,
// for a device made by Open, after the netdev was closed).
func (d *Device) Wait() { d.wg.Wait() }

// Name returns the device name.
func (d *Device) Name() string { return d.opts.Name }

// Addr returns the device's IP address and UDP port.
func (d *Device) Addr() netip.AddrPort { return netip.AddrPortFrom(d.addr, d.port) }

// GID returns the device's RoCEv2 GID: its IPv6 address, or the
// IPv4-mapped form of its IPv4 address.
func (d *Device) GID() netip.Addr { return netip.AddrFrom16(d.addr.As16()) }

// Attr returns the device limits.
func (d *Device) Attr() DeviceAttr { return d.attr }

// PortAttr returns the attributes of port 1, the device's only port.
func (d *Device) PortAttr() PortAttr {
	return PortAttr{State: 4, MaxMTU: MTU4096, ActiveMTU: d.activeMTU, LinkMTU: d.linkMTU,
		GIDTblLen: 1, LinkLayer: 2, MaxMsgSize: d.attr.MaxMsgSize}
}

// ActiveMTU returns the port's active MTU.
func (d *Device) ActiveMTU() MTU { return d.activeMTU }

// pickVector returns v, or the least-used vector for v == -1, and counts
// the use. Any other v outside [0, vectors) is refused, as the kernel's
// ib_uverbs_create_cq refuses a comp_vector not below num_comp_vectors
// (its field is unsigned: a negative one is out of range there too).
func (d *Device) pickVector(v int) (int, error) {
	d.vecMu.Lock()
	defer d.vecMu.Unlock()
	if v < -1 || v >= len(d.vecUses) {
		return 0, fmt.Errorf("%w: completion vector %d (the device has %d)", ErrInvalidArgument, v, len(d.vecUses))
	}
	if v < 0 {
		v = 0
		for i, n := range d.vecUses {
			if n < d.vecUses[v] {
				v = i
			}
		}
	}
	d.vecUses[v]++
	return v, nil
}

func (d *Device) releaseVector(v int) {
	d.vecMu.Lock()
	d.vecUses[v]--
	d.vecMu.Unlock()
}

// take counts one more object of a kind the device bounds (PDs, CQs,
// SRQs) in n, or fails with ErrNoResources at the bound the device
// attributes report.
func (d *Device) take(n *atomic.Int32, bound int, what string) error {
	if int(n.Add(1)) > bound {
		n.Add(-1)
		return fmt.Errorf("%w: %d %s (the device's maximum)", ErrNoResources, bound, what)
	}
	return nil
}
