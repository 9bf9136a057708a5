package rxe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Options configures a Device. The zero value is a good default.
type Options struct {
	// Name names the device (as ibv_devices lists it); default "rxe0".
	Name string
	// Addr is the device's IP address: its GID and the source address of
	// everything it sends. Default: the netdev's bound address, which must
	// then not be a wildcard.
	Addr netip.Addr
	// LinkMTU is the MTU of the link under the device; the port's active
	// MTU is derived from it as rxe does (LinkMTU minus 80 bytes of
	// headers, rounded down to an IB MTU, at most 4096). Default: the MTU
	// of the interface holding Addr, or 1500 if none does.
	LinkMTU int
	// StrictICRC drops every received IPv4 packet whose ICRC does not
	// verify with IP ID 0 and DF, instead of recovering the peer's IP ID
	// (see docs/icrc.md).
	StrictICRC bool
	// Credits turns on end-to-end credits (IBA 9.7.7.2.5): responders
	// advertise their receive queue depth and requesters honour the
	// peer's. Off, the device behaves like kernel rxe (always unlimited).
	Credits bool
	// CompVectors is the number of completion vectors (seed 001); default
	// runtime.GOMAXPROCS(0). Each vector has its own run queue and
	// transmit goroutine, and (with Listen, or OpenConns with one conn per
	// vector) its own socket and receive goroutine; it serves the QPs
	// whose receive CQ is bound to it. See docs/threading.md.
	CompVectors int
	// PinVectors locks each vector's goroutines to OS threads pinned to
	// one CPU each (vector i on the i-th CPU the process may use, modulo
	// their number), as IRQ affinity pins a NIC's completion vectors.
	PinVectors bool
	// SingleSocket makes Listen open one socket, read by one receive
	// goroutine for all vectors, instead of one socket per vector in a
	// SO_REUSEPORT group steered by QPN (netdev.ListenUDPGroup).
	SingleSocket bool
	// OwnConn makes Close close the netdev too (Listen sets it).
	OwnConn bool
	// NoInlineSend keeps every write on the transmit goroutine. By
	// default the receive goroutine, after a batch, writes the packets the
	// batch made ready (ACKs, read responses, requests that ACKs let out)
	// itself whenever the transmit goroutine is idle, instead of waking it
	// (see routineReceive). Set it for a netdev.Conn whose WriteBatch waits
	// for the peer to read (netdev.PipeOptions.BlockWhenFull): two devices
	// whose receive goroutines both waited to write to each other would
	// deadlock. UDP sockets never wait for the peer.
	NoInlineSend bool
	// LocalDropMode chooses what the device does with a datagram the local
	// host refuses (netdev.ErrLocalDrop: ENOBUFS from a full qdisc, EAGAIN
	// from a full socket buffer). The default, LocalDropAdaptive, hands it
	// back to its QP, which sends it again after its own adaptive delay.
	LocalDropMode LocalDropMode
	// Recovery tunes loss recovery in round trips (RTT estimate, recovery
	// timer and tail-loss probe, adaptive window); the zero value is on.
	Recovery RecoveryConfig
	// RecvBuffer is the socket receive buffer Listen asks for; 0 means
	// netdev.DefaultRecvBuffer (64 MiB). NoForceBuffers makes Listen ask
	// without SO_RCVBUFFORCE / SO_SNDBUFFORCE, as a process without
	// CAP_NET_ADMIN must (the kernel then caps at net.core.rmem_max).
	RecvBuffer     int
	NoForceBuffers bool
	// Warnf receives Listen's one warning about capped socket buffers
	// (Device.BufferCapWarning); nil means log.Printf.
	Warnf func(format string, args ...any)
}

// compVectors is CompVectors with its default, GOMAXPROCS.
func (o Options) compVectors() int {
	if o.CompVectors == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.CompVectors
}

// LocalDropMode is what a device does with a datagram the local host
// refuses; see Options.LocalDropMode. Every mode counts the refusal
// (Counters.LocalDrops, QPCounters.LocalDrops).
type LocalDropMode uint8

// Local drop modes.
const (
	// LocalDropAdaptive (the default) treats a refusal as back-pressure,
	// not loss: the refused datagram and the later ones of the same QP in
	// the batch go back to that QP, which keeps them ahead of anything it
	// would build next and waits out the adaptive delay of its own
	// retry.Backoff (seed 002: OnDrop on a refusal, OnSent on every
	// datagram that leaves) on its vector's back-off timer, shared by the
	// vector's QPs. When the delay has passed the QP is scheduled and
	// its held datagrams are sent first. The transmit goroutine never
	// waits: it goes on with the other QPs of the batch at once. The
	// requester never sees the drop, so it causes no retransmission.
	LocalDropAdaptive LocalDropMode = iota
	// LocalDropTimeout discards the refused datagram, as kernel rxe does
	// since Linux 6.10: the requester's ACK timeout (or a later NAK
	// sequence error) recovers it with a go-back-N retransmission. The rest
	// of the batch is tried at once.
	LocalDropTimeout
	// LocalDropSpin retries the refused write at once, in a loop that
	// yields the processor (runtime.Gosched) between tries: the busy wait
	// of the seed 002 patch, kept for comparison only. It holds the
	// vector's transmit goroutine (every QP of the vector) while it spins and burns CPU; after
	// spinLimit tries it discards the datagram as LocalDropTimeout does.
	LocalDropSpin
)

// String returns "adaptive", "timeout" or "spin".
func (m LocalDropMode) String() string {
	switch m {
	case LocalDropAdaptive:
		return "adaptive"
	case LocalDropTimeout:
		return "timeout"
	case LocalDropSpin:
		return "spin"
	}
	return fmt.Sprintf("LocalDropMode(%d)", uint8(m))
}

// spinLimit bounds the tries of one refused write in LocalDropSpin mode.
const spinLimit = 1 << 14

// DeviceAttr are device limits (a subset of struct ibv_device_attr).
type DeviceAttr struct {
	MaxQP, MaxQPWR, MaxSGE, MaxCQ, MaxCQE, MaxMR, MaxPD int
	MaxQPRdAtom, MaxQPInitRdAtom                        int
	MaxSRQ, MaxSRQWR, MaxSRQSGE                         int
	MaxInlineData                                       int
	MaxMsgSize                                          uint64
	LocalCAAckDelay                                     uint8
	NumCompVectors                                      int
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

// AsyncEvent is an asynchronous event (struct ibv_async_event): one of QP,
// CQ or SRQ is set, depending on the type.
type AsyncEvent struct {
	Type AsyncEventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
}

// Async event types (re-exported from rxe/verbs).
const (
	EventCQErr            = verbs.EventCQErr
	EventQPFatal          = verbs.EventQPFatal
	EventSQDrained        = verbs.EventSQDrained
	EventSRQLimitReached  = verbs.EventSRQLimitReached
	EventQPLastWQEReached = verbs.EventQPLastWQEReached
)

// Counters are device-wide counters; the names follow rxe's hw counters
// (rxe_hw_counters.c) where one exists.
type Counters struct {
	SentPkts      uint64 // sent_pkts
	RcvdPkts      uint64 // rcvd_pkts: accepted and handed to a QP
	BadICRC       uint64 // packets dropped for a bad ICRC
	ICRCRecovered uint64 // IPv4 packets verified after recovering a non-zero IP ID
	Malformed     uint64 // packets packet.Parse rejected
	UnknownQP     uint64 // packets for no QP of ours
	CNPs          uint64 // congestion notifications received (ignored)
	SendErr       uint64 // send_err: datagrams the netdev refused for good
	LocalDrops    uint64 // datagrams refused by the local host (see Options.LocalDropMode)
	QPErrors      uint64 // QPs moved to ERR by an engine error
	EventsDropped uint64 // async events lost because nobody read Events
	NotifyDropped uint64 // CQ notifications lost to a full CompChannel
	ReceiveErrors uint64 // netdev read errors
	PinErrors     uint64 // vector goroutines that could not be pinned (Options.PinVectors)
}

type deviceCounters struct {
	badICRC, icrcRecovered                  atomic.Uint64
	malformed, unknownQP, cnps, sendErr     atomic.Uint64
	localDrops, qpErrors, eventsDropped     atomic.Uint64
	notifyDropped, receiveErrors, pinErrors atomic.Uint64

	// System calls (ReadBatch and WriteBatch calls), for the benchmarks'
	// datagrams-per-call figures; not exported.
	readBatches, writeBatches atomic.Uint64
}

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

	mrs    mrTable
	qps    qpTable
	nextPD atomic.Uint32

	vecs    []*vector
	vecMu   sync.Mutex
	vecUses []int // CQs per vector, for the least-used choice
	cpus    []int // CPUs the process may run on (PinVectors)

	events   chan AsyncEvent
	counters deviceCounters

	closed atomic.Bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// maxPacket is the largest RoCE packet a device sends or accepts: a 4096
// byte payload and the largest header set, rounded up.
const maxPacket = 4096 + 128

// rxBufSize is the receive buffer per datagram: larger than any valid
// packet, so oversized junk is seen (and rejected) rather than truncated.
const rxBufSize = 9216

// Listen opens a UDP socket on addr (port 0 means 4791) and a device on it.
// Closing the device closes the socket.
func Listen(addr netip.AddrPort, opts Options) (*Device, error) {
	if addr.Port() == 0 {
		addr = netip.AddrPortFrom(addr.Addr(), packet.UDPPort)
	}
	n := max(opts.compVectors(), 1) // a negative count fails in OpenConns
	if opts.SingleSocket {
		n = 1
	}
	group, err := netdev.ListenUDPGroup(addr, n, netdev.Options{BlockingWrite: true, RecvBuffer: opts.RecvBuffer, NoForce: opts.NoForceBuffers})
	if err != nil {
		return nil, fmt.Errorf("rxe: listen on %v: %w", addr, err)
	}
	conns := make([]netdev.Conn, len(group))
	for i, c := range group {
		conns[i] = c
	}
	opts.OwnConn = true
	d, err := OpenConns(conns, opts)
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	d.warnCapped()
	return d, nil
}

// Open starts a device on conn. The device reads from and writes to conn
// until Close; it does not close conn itself (Listen's device does). One
// goroutine reads conn for every completion vector; each vector writes to
// it from its own transmit goroutine.
func Open(conn netdev.Conn, opts Options) (*Device, error) {
	return OpenConns([]netdev.Conn{conn}, opts)
}

// OpenConns starts a device on one conn, as Open does, or on one conn per
// completion vector: conns[i] is read and written by vector i's goroutines
// only, and must receive exactly the datagrams for QPNs equal to i modulo
// len(conns) (netdev.ListenUDPGroup steers them so). Every conn must be
// bound to the same address. Options.CompVectors defaults to len(conns)
// when there are several, and must then equal it.
func OpenConns(conns []netdev.Conn, opts Options) (*Device, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("%w: no netdev", ErrInvalidArgument)
	}
	local := conns[0].LocalAddr()
	for _, c := range conns[1:] {
		if c.LocalAddr() != local {
			return nil, fmt.Errorf("%w: netdevs bound to %v and %v", ErrInvalidArgument, local, c.LocalAddr())
		}
	}
	if len(conns) > 1 {
		if opts.CompVectors == 0 {
			opts.CompVectors = len(conns)
		}
		if opts.CompVectors != len(conns) {
			return nil, fmt.Errorf("%w: %d completion vectors on %d netdevs (one per vector, or one for all)", ErrInvalidArgument, opts.CompVectors, len(conns))
		}
	}
	addr := opts.Addr.Unmap()
	if !addr.IsValid() {
		addr = local.Addr().Unmap()
	}
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("%w: the device needs a specific address (Options.Addr) when the netdev is bound to %v", ErrInvalidArgument, local)
	}
	if opts.Name == "" {
		opts.Name = "rxe0"
	}
	if opts.LocalDropMode > LocalDropSpin {
		return nil, fmt.Errorf("%w: local drop mode %v", ErrInvalidArgument, opts.LocalDropMode)
	}
	if opts.CompVectors < 0 {
		return nil, fmt.Errorf("%w: %d completion vectors", ErrInvalidArgument, opts.CompVectors)
	}
	opts.CompVectors = opts.compVectors()
	if opts.CompVectors > maxCompVectors {
		return nil, fmt.Errorf("%w: %d completion vectors (max %d)", ErrInvalidArgument, opts.CompVectors, maxCompVectors)
	}
	link := opts.LinkMTU
	if link == 0 {
		link = interfaceMTU(addr)
	}
	active := verbs.MTUFromBytes(min(link-80, 4096))
	if active == 0 {
		return nil, fmt.Errorf("%w: link MTU %d is too small for RoCE", ErrInvalidArgument, link)
	}
	d := &Device{
		conns: conns, ownConn: opts.OwnConn, opts: opts, addr: addr, port: local.Port(), linkMTU: link, activeMTU: active,
		vecUses: make([]int, opts.CompVectors),
		events:  make(chan AsyncEvent, 256),
		done:    make(chan struct{}),
		attr: DeviceAttr{
			MaxQP: maxQPs, MaxQPWR: maxQPWR, MaxSGE: maxSGE, MaxCQ: 1 << 16, MaxCQE: maxCQE, MaxMR: maxMRs,
			MaxPD: 1 << 20, MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxSRQ: 1 << 16, MaxSRQWR: maxQPWR,
			MaxSRQSGE: maxSGE, MaxInlineData: maxInlineData, MaxMsgSize: 1 << 31, LocalCAAckDelay: 15,
			NumCompVectors: opts.CompVectors,
		},
	}
	if opts.PinVectors {
		cpus, err := allowedCPUs()
		if err != nil {
			return nil, fmt.Errorf("rxe: PinVectors: %w", err)
		}
		d.cpus = cpus
	}
	d.vecs = make([]*vector, opts.CompVectors)
	for i := range d.vecs {
		d.vecs[i] = newVector(d, i, conns[i%len(conns)])
	}
	for i, c := range conns {
		served := d.vecs
		if len(conns) > 1 {
			served = d.vecs[i : i+1]
		}
		d.wg.Add(1)
		go d.routineReceive(c, served)
	}
	for _, v := range d.vecs {
		d.wg.Add(1)
		go v.routineTransmit()
	}
	return d, nil
}

// maxCompVectors bounds Options.CompVectors.
const maxCompVectors = 1024

// interfaceMTU returns the MTU of the interface whose network holds addr,
// or 1500.
func interfaceMTU(addr netip.Addr) int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 1500
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if p, err := netip.ParsePrefix(n.String()); err == nil && p.Contains(addr) {
					return ifc.MTU
				}
			}
		}
	}
	return 1500
}

// Close stops the device: its goroutines end, QP timers stop, and, for a
// device made by Listen, the socket closes. Objects stay valid but every
// verbs call fails with ErrClosed.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return ErrClosed
	}
	close(d.done)
	var err error
	if d.ownConn {
		for _, c := range d.conns {
			err = errors.Join(err, c.Close())
		}
	}
	// A conn we do not own stays open: the receive goroutine exits at its
	// next wake-up or when the owner closes conn.
	d.qps.each(func(qp *QP) {
		qp.mu.Lock()
		qp.stopTimer()
		qp.stopDropTimer()
		qp.mu.Unlock()
	})
	for _, v := range d.vecs {
		v.drops.close()
	}
	if d.ownConn {
		d.wg.Wait()
	}
	return err
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

// Events delivers asynchronous events. Events that find it full are
// dropped and counted (Counters.EventsDropped).
func (d *Device) Events() <-chan AsyncEvent { return d.events }

func (d *Device) raise(e AsyncEvent) {
	select {
	case d.events <- e:
	default:
		d.counters.eventsDropped.Add(1)
	}
}

// Counters returns a snapshot of the device counters.
func (d *Device) Counters() Counters {
	c := &d.counters
	var sent, rcvd uint64
	for _, v := range d.vecs {
		sent += v.sentPkts.Load()
		rcvd += v.rcvdPkts.Load()
	}
	return Counters{
		SentPkts: sent, RcvdPkts: rcvd, BadICRC: c.badICRC.Load(),
		ICRCRecovered: c.icrcRecovered.Load(), Malformed: c.malformed.Load(), UnknownQP: c.unknownQP.Load(),
		CNPs: c.cnps.Load(), SendErr: c.sendErr.Load(), LocalDrops: c.localDrops.Load(),
		QPErrors: c.qpErrors.Load(), EventsDropped: c.eventsDropped.Load(), NotifyDropped: c.notifyDropped.Load(),
		ReceiveErrors: c.receiveErrors.Load(), PinErrors: c.pinErrors.Load(),
	}
}

// pickVector returns v, or the least-used vector for v < 0, and counts
// the use.
func (d *Device) pickVector(v int) (int, error) {
	d.vecMu.Lock()
	defer d.vecMu.Unlock()
	if v >= len(d.vecUses) {
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

// routineReceive reads batches of datagrams and dispatches them to QPs.
//
// After each batch, if QPs became runnable and the transmit goroutine is
// not busy (txMu is free), it runs one transmit pass itself: up to a
// batch of their packets is pulled and written here, without waking the
// transmit goroutine, which still gets the kick and takes whatever is
// left. This is rxe's way of running a task inline when it is not already
// running (rxe_run_task) and it matters on few cores: the RC window
// advances one round trip at a time (data, ACK, more data), and every
// goroutine wake-up in that loop waits for the Go scheduler to find a P,
// tens of µs when the other goroutines are busy in system calls. See
// docs/performance.md ("RC transport"). Options.NoInlineSend turns it off.
func (d *Device) routineReceive(conn netdev.Conn, served []*vector) {
	defer d.wg.Done()
	if len(served) == 1 {
		served[0].pin()
	}
	b := conn.BatchSize()
	msgs := make([]netdev.Message, b)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufSize)
	}
	for {
		n, err := conn.ReadBatch(msgs)
		if err != nil {
			if d.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			d.counters.receiveErrors.Add(1)
			select {
			case <-d.done:
				return
			case <-time.After(time.Millisecond):
			}
			continue
		}
		if d.closed.Load() {
			return
		}
		d.counters.readBatches.Add(1)
		now := time.Now()
		for i := range n {
			d.receive(now, &msgs[i])
		}
		if d.opts.NoInlineSend {
			continue
		}
		for _, v := range served {
			if v.runnable() && v.txMu.TryLock() {
				v.transmitPass(len(v.txMsgs))
				v.txMu.Unlock()
			}
		}
	}
}

// receive checks one datagram (rxe_rcv, hdr_check) and hands it to its QP.
func (d *Device) receive(now time.Time, m *netdev.Message) {
	pkt := m.Buf[:m.N]
	p, err := packet.Parse(pkt)
	if err != nil {
		d.counters.malformed.Add(1)
		return
	}
	if !d.checkICRC(pkt, m) {
		return
	}
	if p.Opcode() == packet.CNP {
		d.counters.cnps.Add(1)
		return
	}
	if p.BTH().PKey()&0x7FFF != packet.DefaultPKey&0x7FFF {
		d.counters.malformed.Add(1)
		return
	}
	qp := d.qps.lookup(p.DestQP())
	if qp == nil {
		d.counters.unknownQP.Add(1)
		return
	}
	qp.vec.rcvdPkts.Add(1) // per vector: no cache line shared between vectors per packet
	qp.receive(now, p, m.Addr)
}

// checkICRC verifies a received packet's ICRC (IBA A17.4.4). The pseudo-
// header comes from the datagram's addresses; for IPv4 the IP ID is not
// delivered by the socket: ID 0 with DF is tried first (gorxe peers, many
// NICs), then, unless StrictICRC, the one ID that makes the CRC match is
// recovered (kernel rxe sends non-zero IDs); see docs/icrc.md.
func (d *Device) checkICRC(pkt []byte, m *netdev.Message) bool {
	dst := m.Local
	if !dst.IsValid() || dst.IsUnspecified() {
		dst = d.addr
	}
	ph := packet.PseudoHeader{Src: m.Addr.Addr(), Dst: dst, SrcPort: m.Addr.Port(), DstPort: d.port}
	if ph.Is4() {
		ph.IPFlags = packet.IPv4FlagDF
	}
	if ph.CheckICRC(pkt) == nil {
		return true
	}
	if ph.Is4() && !d.opts.StrictICRC {
		if _, ok := ph.RecoverIPv4ID(pkt); ok {
			d.counters.icrcRecovered.Add(1)
			return true
		}
	}
	d.counters.badICRC.Add(1)
	return false
}

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
