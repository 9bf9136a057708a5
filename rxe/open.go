package rxe

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Listen opens a device on addr (port 0 means 4791): one UDP socket per
// completion vector, all bound to addr in a SO_REUSEPORT group whose
// kernel steering hands each socket the packets of its vector's QPs by
// destination QPN (netdev.ListenUDPGroup), or one socket for all vectors
// with Options.SingleSocket. It warns once if the kernel capped the socket
// buffers (Options.Warnf). Closing the device closes the sockets.
func Listen(addr netip.AddrPort, opts Options) (*Device, error) {
	if addr.Port() == 0 {
		addr = netip.AddrPortFrom(addr.Addr(), packet.UDPPort)
	}
	// Refused before a socket is opened, as checkConns refuses it: a
	// group of one socket per vector would otherwise fail in netdev, or
	// be opened only to be closed.
	if err := checkCompVectors(&opts); err != nil {
		return nil, err
	}
	n := opts.compVectors()
	if opts.SingleSocket {
		n = 1
	}
	group, err := netdev.ListenUDPGroup(addr, n, SocketOptions(opts))
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
	addr, err := checkConns(conns, &opts)
	if err != nil {
		return nil, err
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
		conns: conns, ownConn: opts.OwnConn, opts: opts, addr: addr, port: conns[0].LocalAddr().Port(), linkMTU: link, activeMTU: active,
		vecUses: make([]int, opts.CompVectors),
		epoch:   time.Now(),
		events:  make(chan AsyncEvent, 256),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		attr: DeviceAttr{
			MaxQP: maxQPs, MaxQPWR: maxQPWR, MaxSGE: maxSGE, MaxCQ: 1 << 16, MaxCQE: maxCQE, MaxMR: maxMRs - 1,
			MaxPD: 1 << 20, MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxSRQ: 1 << 16, MaxSRQWR: maxQPWR,
			MaxSRQSGE: maxSGE, MaxInlineData: maxInlineData, MaxMsgSize: maxMsgSize, LocalCAAckDelay: 15,
			NumCompVectors: opts.CompVectors,
			MaxMcastGrp:    maxMcastGroups, MaxMcastQPAttach: maxMcastQPAttach, MaxTotalMcastQPAttach: maxMcastGroups * maxMcastQPAttach,
		},
	}
	d.mrs.quarantine = mrQuarantine
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
	if own, _ := d.recvBufferInfo(); own > 0 && windowFor(own, MTU4096.Bytes(), chargeRuns) < requester.DefaultWindow {
		// Peers keep their windows within this small buffer: the
		// transport waits on its round trips (Device.wantSpin).
		d.spinBound.Store(true)
	}
	for i, c := range conns {
		served := d.vecs
		if len(conns) > 1 {
			served = d.vecs[i : i+1]
		}
		r := newConnReader(d, c, served)
		d.wg.Add(1)
		go d.routineReceive(r)
	}
	for _, v := range d.vecs {
		d.wg.Add(1)
		go v.routineTransmit()
	}
	return d, nil
}

// checkConns validates OpenConns' arguments and fills opts' defaults
// (Name, CompVectors); it returns the device's address.
func checkConns(conns []netdev.Conn, opts *Options) (netip.Addr, error) {
	if len(conns) == 0 {
		return netip.Addr{}, fmt.Errorf("%w: no netdev", ErrInvalidArgument)
	}
	// A nil netdev is refused here, before anything calls it: the device
	// would otherwise panic at its first LocalAddr, BatchSize or read.
	for i, c := range conns {
		if c == nil {
			return netip.Addr{}, fmt.Errorf("%w: netdev %d is nil", ErrInvalidArgument, i)
		}
	}
	local := conns[0].LocalAddr()
	for _, c := range conns[1:] {
		if c.LocalAddr() != local {
			return netip.Addr{}, fmt.Errorf("%w: netdevs bound to %v and %v", ErrInvalidArgument, local, c.LocalAddr())
		}
	}
	if len(conns) > 1 {
		if opts.CompVectors == 0 {
			opts.CompVectors = len(conns)
		}
		if opts.CompVectors != len(conns) {
			return netip.Addr{}, fmt.Errorf("%w: %d completion vectors on %d netdevs (one per vector, or one for all)", ErrInvalidArgument, opts.CompVectors, len(conns))
		}
	}
	addr := opts.Addr.Unmap()
	if !addr.IsValid() {
		addr = local.Addr().Unmap()
	}
	if !addr.IsValid() || addr.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("%w: the device needs a specific address (Options.Addr) when the netdev is bound to %v", ErrInvalidArgument, local)
	}
	// The device's address is its GID and the source its packets and GRH
	// areas name: it must be of the netdev's family. An IPv4 netdev carries
	// IPv4 only; a specific IPv6 one IPv6 only (a wildcard IPv6 socket also
	// carries IPv4, as IPv4-mapped addresses).
	if l := local.Addr().Unmap(); l.Is4() && !addr.Is4() || l.Is6() && !l.IsUnspecified() && !addr.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: device address %v is not of the family of the netdev's %v", ErrInvalidArgument, addr, local)
	}
	if opts.Name == "" {
		opts.Name = "rxe0"
	}
	if opts.LocalDropMode > LocalDropSpin {
		return netip.Addr{}, fmt.Errorf("%w: local drop mode %v", ErrInvalidArgument, opts.LocalDropMode)
	}
	if err := checkCompVectors(opts); err != nil {
		return netip.Addr{}, err
	}
	opts.CompVectors = opts.compVectors()
	return addr, nil
}

// checkCompVectors refuses a negative Options.CompVectors, or one that
// makes more than maxCompVectors vectors (0 takes GOMAXPROCS).
func checkCompVectors(opts *Options) error {
	if opts.CompVectors < 0 {
		return fmt.Errorf("%w: %d completion vectors", ErrInvalidArgument, opts.CompVectors)
	}
	if n := opts.compVectors(); n > maxCompVectors {
		return fmt.Errorf("%w: %d completion vectors (at most %d; 0 takes GOMAXPROCS)", ErrInvalidArgument, n, maxCompVectors)
	}
	return nil
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

// SocketOptions returns the netdev options of Listen's sockets, for a
// caller that opens its own netdev.UDPConn for Open: blocking writes, and
// UDP GSO and GRO unless opts.NoGSO, with every ICRC rewritten for the IPv4
// ID its GSO segment gets (packet.RewriteIPv4ID), and opts.TrafficClass.
func SocketOptions(opts Options) netdev.Options {
	return netdev.Options{
		BlockingWrite: true,
		NoGSO:         opts.NoGSO,
		NoGRO:         opts.NoGSO,
		RewriteIPv4ID: packet.RewriteIPv4ID,
		RunsByQPN:     true,
		RecvBuffer:    opts.RecvBuffer,
		NoForce:       opts.NoForceBuffers,
		TOS:           opts.TrafficClass,
	}
}
