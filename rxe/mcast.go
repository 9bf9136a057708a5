package rxe

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// UD multicast (kernel rxe_mcast.c, and rxe_recv.c rxe_rcv_mcast_pkt). A UD QP attached to a multicast group
// (QP.AttachMcast) receives a copy of every UD datagram sent to the
// group's GID; a UD send to an address handle whose GID is a multicast
// address goes to the group. On RoCEv2 the group's GID is an IP multicast
// address: an IPv4 one (224.0.0.0/4) in IPv4-mapped form, or an IPv6 one
// (ff00::/8).
//
// A device's own sockets are bound to its unicast address, and the kernel
// gives a socket bound so no multicast datagram: the device receives each
// group it has QPs attached to on a socket of its own, bound to the
// group's address and the device's port and joined to the group on the
// interface that carries the device's address, in the network namespace
// of the device's socket (netdev.UDPConn.ListenMulticast), read by a
// goroutine of its own (Device.routineMcast) and, in turn with it, by
// callers busy-polling a CQ of the device (Device.pollMcast). The socket is
// closed, and the group left, when the group's last QP detaches, or when
// the device closes (QP.Destroy refuses an attached QP, as rxe_destroy_qp
// does).
//
// A device whose sockets are bound to the wildcard address is the
// exception. Linux gives a datagram to a group to every socket of its
// port bound to the group's address or to the wildcard
// (__udp4_lib_mcast_deliver, __udp_is_mcast_sock; a socket that joined
// no group takes every group joined on the interface, IP_MULTICAST_ALL),
// so the device's own sockets receive the datagrams of every group joined
// on the interface at the device's port, and the kernel refuses a group
// socket at that port (EADDRINUSE: the wildcard bind covers the group's
// address). Such a device joins a group with a socket at an ephemeral
// port, which only holds the membership, receives nothing sent to the
// device's port and is not read (mcastGroup.viaDevice), and delivers the
// group's datagrams from its own sockets (Device.receiveMcastOnDevice):
// they are the only ones of the device that receive them, so an attached
// QP gets one copy of each. Of a socket per vector (a SO_REUSEPORT
// group), the kernel gives each socket a copy of its own: the first
// socket's copies are delivered and the others' ignored (counted, as are
// the datagrams of groups the device has not joined:
// Counters.McastIgnored). Datagrams to a group go out on
// the device's own sockets, set up on the first multicast address handle
// to leave by the interface of the device's address, with TTL or hop
// limit McastHops, and to loop back to the sockets of this host that
// joined the group (netdev.MulticastSender).

// MulticastQPN is the destination QP of every multicast packet, the QPN
// InfiniBand reserves for multicast (the kernel's IB_MULTICAST_QPN, which
// rxe_rcv tests for rxe_rcv_mcast_pkt): a UD send to a
// multicast address handle carries it in its BTH whatever the work
// request's RemoteQPN, and a packet to a group is delivered only with it.
const MulticastQPN = 0xFFFFFF

// The bounds of multicast (DeviceAttr.MaxMcastGrp, MaxMcastQPAttach and
// MaxTotalMcastQPAttach). A group costs the device a socket and a
// goroutine, so a device has far fewer groups than kernel rxe's 8192
// (RXE_MAX_MCAST_GRP); a group has as many QPs as rxe's
// (RXE_MAX_MCAST_QP_ATTACH).
const (
	maxMcastGroups   = 64
	maxMcastQPAttach = 56
)

// McastHops is the IPv4 TTL or IPv6 hop limit of the datagrams a device
// sends to a multicast group: 1, the kernel's default for multicast
// sockets, keeps them on the link of the device's interface.
const McastHops = 1

// mcastBatch is the batch size of a group's socket.
const mcastBatch = 16

// mcastGroup is a multicast group a device's QPs are attached to.
type mcastGroup struct {
	addr netip.Addr // unmapped
	// conn is the group's socket; with viaDevice, it only holds the
	// membership: bound to an ephemeral port, it is not read.
	conn *netdev.UDPConn
	// viaDevice is set on a device bound to the wildcard address: the
	// group's datagrams come on the device's own sockets.
	viaDevice bool
	// qps are the attached QPs, replaced (never changed in place) under
	// Device.mcastMu: the group's goroutine delivers to a snapshot.
	qps atomic.Pointer[[]*QP]

	// The group's goroutine (Device.routineMcast) and busy-polling
	// callers (Device.pollMcast) read conn in turn, as the device's
	// sockets are read (connReader): whoever holds gate reads, and
	// handles what it read before it unlocks, so every datagram is read
	// once and delivered in the order conn received it. msgs, icrc and
	// wakes are the reading state, under gate.
	gate  netdev.Gate
	msgs  []netdev.Message
	icrc  packet.ICRCPrefix
	wakes []*CQ
}

// mcastState is a device's multicast state, under mu.
type mcastState struct {
	mu       sync.Mutex
	groups   map[netip.Addr]*mcastGroup
	attached int  // QP attachments over all groups
	sendSet  bool // the device's sockets are set up for multicast sends
	closed   bool // the device closed: no more groups
	// viaDevice maps the groups whose datagrams the device's own sockets
	// receive (mcastGroup.viaDevice) by their unmapped address; it is
	// replaced (never changed in place) under mu, and read by the
	// receive path without a lock. nil while there is none.
	viaDevice atomic.Pointer[map[netip.Addr]*mcastGroup]
	// read lists the groups whose own sockets are read (those without
	// viaDevice), for busy-polling callers (pollMcast); it is replaced
	// (never changed in place) under mu. nil while there is none.
	read atomic.Pointer[[]*mcastGroup]
	// polled counts the group datagrams that busy-polling callers read
	// (Counters.PolledPkts).
	polled atomic.Uint64
	// rcvd and dropped count the multicast packets delivered to at least
	// one attached QP, and those dropped: no QP attached (a datagram that
	// came as the group's last QP detached) or a destination QP other
	// than MulticastQPN.
	rcvd, dropped atomic.Uint64
	// ignored counts the group datagrams that came on the device's own
	// sockets and were not delivered from there (Counters.McastIgnored).
	ignored atomic.Uint64
}

// mcastGroupAddr checks that gid is a multicast GID of the device's
// family and returns it unmapped.
func (d *Device) mcastGroupAddr(gid netip.Addr) (netip.Addr, error) {
	g := gid.Unmap()
	if !g.IsValid() || !g.IsMulticast() {
		return netip.Addr{}, fmt.Errorf("%w: GID %v is not a multicast GID (224.0.0.0/4 IPv4-mapped, or ff00::/8)", ErrInvalidArgument, gid)
	}
	if g.Is4() != d.addr.Is4() {
		return netip.Addr{}, fmt.Errorf("%w: multicast GID %v (the device is on %v)", ErrInvalidArgument, gid, d.addr)
	}
	return g, nil
}

// AttachMcast attaches the UD QP to the multicast group gid
// (ibv_attach_mcast): from then on the QP receives a copy of every UD
// datagram with destination QP MulticastQPN sent to the group, each in a
// receive WQE of its own, its Q_Key checked against the QP's as for any
// UD datagram. gid is an IPv4 multicast address (plain or IPv4-mapped)
// on an IPv4 device, an IPv6 one (ff00::/8) on an IPv6 device. lid is
// ignored, as RoCE has no LIDs. The first QP to attach to a group makes
// the device join it (see the package's multicast notes in mcast.go);
// attaching a QP that is already attached does nothing, as in rxe
// (rxe_attach_mcast). Only UD QPs attach (ErrInvalidArgument otherwise,
// as ib_attach_mcast refuses them); a device has at most MaxMcastGrp
// groups and a group MaxMcastQPAttach QPs (ErrNoResources beyond). A
// device on a netdev that is no UDP socket (a pipe) joins nothing
// (ErrInvalidArgument). After Destroy or Device.Close it fails with
// ErrClosed.
func (qp *QP) AttachMcast(gid netip.Addr, lid uint16) error {
	d := qp.dev
	g, err := qp.lockMcast("AttachMcast", gid)
	if err != nil {
		return err
	}
	m := &d.mcast
	defer m.mu.Unlock()
	grp := m.groups[g]
	if grp != nil {
		qps := *grp.qps.Load()
		if slices.Contains(qps, qp) {
			return nil
		}
		if len(qps) >= maxMcastQPAttach {
			return fmt.Errorf("%w: %d QPs attached to %v (the device's maximum per group)", ErrNoResources, maxMcastQPAttach, g)
		}
		grp.qps.Store(new(append(slices.Clip(qps), qp)))
		m.attached++
		return nil
	}
	if len(m.groups) >= maxMcastGroups {
		return fmt.Errorf("%w: %d multicast groups (the device's maximum)", ErrNoResources, maxMcastGroups)
	}
	if err := d.reportIPFields(); err != nil {
		return err
	}
	// The group's socket belongs to the namespace of the device's socket,
	// whichever the calling thread is in (UDPConn.ListenMulticast).
	s, err := mcastSender(d.conns[0])
	if err != nil {
		return err
	}
	viaDevice := d.conns[0].LocalAddr().Addr().IsUnspecified()
	bind, opts := netip.AddrPortFrom(g, d.port), netdev.Options{BatchSize: mcastBatch, NoGSO: true, NoGRO: true, RecvBuffer: d.opts.RecvBuffer, NoForce: d.opts.NoForceBuffers}
	if viaDevice {
		// The membership only: the device's own sockets receive the
		// group's datagrams (see the notes above).
		bind, opts = netip.AddrPortFrom(g, 0), netdev.Options{BatchSize: 1, NoGSO: true, NoGRO: true, RecvBuffer: -1, SendBuffer: -1}
	}
	conn, err := s.ListenMulticast(bind, d.addr, opts)
	if err != nil {
		return fmt.Errorf("rxe: joining multicast group %v: %w", g, err)
	}
	if !viaDevice {
		if err := conn.ReportIPFields(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			conn.Close()
			return fmt.Errorf("rxe: asking the socket of multicast group %v for received traffic classes: %w", g, err)
		}
	}
	grp = &mcastGroup{addr: g, conn: conn, viaDevice: viaDevice}
	grp.qps.Store(&[]*QP{qp})
	if m.groups == nil {
		m.groups = make(map[netip.Addr]*mcastGroup)
	}
	m.groups[g] = grp
	m.attached++
	if viaDevice {
		m.publish()
		return nil
	}
	grp.msgs = make([]netdev.Message, mcastBatch)
	for i := range grp.msgs {
		grp.msgs[i].Buf = make([]byte, rxBufSize)
	}
	m.publish()
	d.wg.Add(1)
	go d.routineMcast(grp)
	return nil
}

// publish replaces viaDevice and read with the groups of m.groups whose
// datagrams come on the device's own sockets and those read on their own
// (caller holds m.mu).
func (m *mcastState) publish() {
	var via map[netip.Addr]*mcastGroup
	var read []*mcastGroup
	for g, grp := range m.groups {
		if !grp.viaDevice {
			read = append(read, grp)
			continue
		}
		if via == nil {
			via = make(map[netip.Addr]*mcastGroup)
		}
		via[g] = grp
	}
	if via == nil {
		m.viaDevice.Store(nil)
	} else {
		m.viaDevice.Store(&via)
	}
	if read == nil {
		m.read.Store(nil)
	} else {
		m.read.Store(&read)
	}
}

// DetachMcast detaches the QP from the multicast group gid
// (ibv_detach_mcast); lid is ignored. The device leaves the group when its
// last QP detaches. A QP not attached to the group gives
// ErrInvalidArgument, as rxe_detach_mcast's EINVAL. A QP must be detached
// from every group before Destroy (which refuses it with ErrInUse
// otherwise). After Destroy or Device.Close it fails with ErrClosed
// (Close detached it).
func (qp *QP) DetachMcast(gid netip.Addr, lid uint16) error {
	d := qp.dev
	g, err := qp.lockMcast("DetachMcast", gid)
	if err != nil {
		return err
	}
	defer d.mcast.mu.Unlock()
	if !d.detachLocked(qp, g) {
		return fmt.Errorf("%w: QP %#x is not attached to %v", ErrInvalidArgument, qp.qpn, g)
	}
	return nil
}

// lockMcast checks the arguments of the verb op (a UD QP, a multicast GID
// of the device's family: mcastGroupAddr) and returns the group's address
// with the device's multicast lock held, or an error with it not held:
// ErrClosed once the QP was destroyed or the device closed, whatever the
// arguments.
func (qp *QP) lockMcast(op string, gid netip.Addr) (netip.Addr, error) {
	d := qp.dev
	if qp.isDead() {
		return netip.Addr{}, ErrClosed
	}
	if qp.typ != QPTypeUD {
		return netip.Addr{}, fmt.Errorf("%w: %s on a %v QP (UD only)", ErrInvalidArgument, op, qp.typ)
	}
	g, err := d.mcastGroupAddr(gid)
	if err != nil {
		return netip.Addr{}, err
	}
	d.mcast.mu.Lock()
	if d.mcast.closed || qp.isDead() {
		d.mcast.mu.Unlock()
		return netip.Addr{}, ErrClosed
	}
	return g, nil
}

// detachLocked detaches qp from group g, leaving the group if qp was its
// last QP (caller holds mcast.mu); it reports whether qp was attached.
func (d *Device) detachLocked(qp *QP, g netip.Addr) bool {
	m := &d.mcast
	grp := m.groups[g]
	if grp == nil {
		return false
	}
	qps := *grp.qps.Load()
	i := slices.Index(qps, qp)
	if i < 0 {
		return false
	}
	m.attached--
	if len(qps) == 1 {
		delete(m.groups, g)
		grp.qps.Store(&[]*QP{})
		grp.conn.Close() // leaves the group; its goroutine ends
		m.publish()
		return true
	}
	grp.qps.Store(new(slices.Delete(slices.Clone(qps), i, i+1)))
	return true
}

// retireUnattached retires the UD QP qp (QP.Destroy) unless it is
// attached to a multicast group: then it fails with ErrInUse and leaves
// qp as it is (rxe_qp_chk_destroy's EBUSY while the QP's mcg_num is not
// zero). It holds mcast.mu throughout, as AttachMcast does, so no attach
// comes between the check and the retirement. A QP destroyed already, or
// of a closed device, gives ErrClosed.
func (d *Device) retireUnattached(qp *QP) error {
	m := &d.mcast
	m.mu.Lock()
	defer m.mu.Unlock()
	if qp.isDead() {
		return ErrClosed
	}
	var groups []netip.Addr
	for g, grp := range m.groups {
		if slices.Contains(*grp.qps.Load(), qp) {
			groups = append(groups, g)
		}
	}
	if len(groups) > 0 {
		slices.SortFunc(groups, netip.Addr.Compare)
		return fmt.Errorf("%w: QP %#x is attached to multicast groups %v: detach it first (DetachMcast)", ErrInUse, qp.qpn, groups)
	}
	return qp.retire()
}

// closeMcast leaves every group (Device.Close).
func (d *Device) closeMcast() {
	m := &d.mcast
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for g, grp := range m.groups {
		grp.qps.Store(&[]*QP{})
		grp.conn.Close()
		delete(m.groups, g)
	}
	m.publish()
	m.attached = 0
}

// McastGroups returns the multicast groups the device has joined: those
// with QPs attached, as IPv4-mapped or IPv6 GIDs, in no particular order.
func (d *Device) McastGroups() []netip.Addr {
	m := &d.mcast
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]netip.Addr, 0, len(m.groups))
	for g := range m.groups {
		out = append(out, netip.AddrFrom16(g.As16()))
	}
	return out
}

// enableMcastSend sets the device's sockets up for datagrams to multicast
// groups, once (PD.CreateAH of a multicast GID): they leave by the
// interface of the device's address with TTL McastHops and loop back to
// the host's sockets that joined the group. Decorators of the device's
// netdevs are looked through (their Unwrap() netdev.Conn); a netdev that
// is not a netdev.MulticastSender (a pipe) cannot send to a group.
func (d *Device) enableMcastSend() error {
	m := &d.mcast
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sendSet {
		return nil
	}
	for _, c := range d.conns {
		s, err := mcastSender(c)
		if err != nil {
			return err
		}
		if err := s.SetMulticastSend(d.addr, McastHops); err != nil {
			return fmt.Errorf("rxe: setting the device's socket up for multicast: %w", err)
		}
	}
	m.sendSet = true
	return nil
}

// mcastSender returns the netdev.MulticastSender c is, or that it wraps
// (decorators are looked through by their Unwrap() netdev.Conn); a netdev
// that is none (a pipe) gives ErrInvalidArgument.
func mcastSender(c netdev.Conn) (netdev.MulticastSender, error) {
	for inner := c; ; {
		if s, ok := inner.(netdev.MulticastSender); ok {
			return s, nil
		}
		u, ok := inner.(interface{ Unwrap() netdev.Conn })
		if !ok {
			return nil, fmt.Errorf("%w: the device's netdev %T cannot send to or join a multicast group", ErrInvalidArgument, c)
		}
		inner = u.Unwrap()
	}
}

// routineMcast reads the datagrams of group grp's socket and delivers
// them (receiveMcast), a batch at a time as the device's receive
// goroutines do, until the socket closes. It reads in turn with
// busy-polling callers (pollMcast): while one holds the group's gate, the
// datagrams that arrive are that caller's to read.
func (d *Device) routineMcast(grp *mcastGroup) {
	defer d.wg.Done()
	for {
		n, err := grp.conn.ReadBatchGated(grp.msgs, &grp.gate)
		if err != nil {
			if d.readFailed(err) {
				return
			}
			continue
		}
		d.handleMcast(grp, n)
		d.unlockMcast(grp)
	}
}

// handleMcast checks and delivers the n datagrams just read into
// grp.msgs (caller holds grp.gate).
func (d *Device) handleMcast(grp *mcastGroup, n int) {
	d.batches.Add(1)
	now := time.Now()
	for i := range n {
		d.receiveMcast(now, &grp.msgs[i], grp, &grp.icrc)
	}
	d.endBatch(&grp.wakes, false)
}

// unlockMcast releases grp's gate. When it is taken back for the caller
// (a reader found it held and left the socket to it: netdev.Gate.Unlock),
// the socket is read and handled until it is empty, then released again.
// It returns how many datagrams it handled so.
func (d *Device) unlockMcast(grp *mcastGroup) int {
	total := 0
	for grp.gate.Unlock() {
		total += d.drainMcast(grp)
	}
	return total
}

// drainMcast reads grp's socket without waiting and delivers what it
// read, batch after batch, until a read returns less than a full batch
// (caller holds grp.gate). A read error is left to the group's goroutine,
// which meets it at its next read (a closed socket: the group was left).
// It returns how many datagrams it handled.
func (d *Device) drainMcast(grp *mcastGroup) int {
	total := 0
	for {
		n, err := grp.conn.TryReadBatch(grp.msgs)
		if err != nil || n == 0 {
			return total
		}
		d.handleMcast(grp, n)
		total += n
		if n < len(grp.msgs) {
			return total
		}
	}
}

// pollMcast reads the socket of each multicast group the device joined
// (those it reads on their own: not viaDevice), without waiting, on the
// calling goroutine (CQ.BusyPoll), and delivers what arrived as the
// group's goroutine would; a group whose gate another goroutine holds is
// skipped, as that goroutine reads what is there. So a caller spinning on
// a CQ gets a group's datagram without waiting for the group's goroutine
// to be scheduled, which on few processors a spinner delays
// (drainMcast). It returns how many datagrams it handled, and allocates
// nothing.
func (d *Device) pollMcast() int {
	groups := d.mcast.read.Load()
	if groups == nil {
		return 0
	}
	total := 0
	for _, grp := range *groups {
		if !grp.gate.TryLock() {
			continue
		}
		total += d.drainMcast(grp)
		total += d.unlockMcast(grp)
	}
	if total > 0 {
		d.mcast.polled.Add(uint64(total))
	}
	return total
}

// receiveMcast checks one datagram that came to group grp, as receive
// checks a unicast one (rxe_rcv, hdr_check), and hands it to every QP
// attached to the group (rxe_rcv_mcast_pkt): each QP's receive side
// checks its state and Q_Key and takes a receive WQE of its own. A
// datagram whose destination QP is not MulticastQPN, or that finds no QP
// attached, is dropped and counted (Counters.McastDropped).
func (d *Device) receiveMcast(now time.Time, m *netdev.Message, grp *mcastGroup, icrc *packet.ICRCPrefix) {
	p, recovered, ok := d.checkDatagram(m, icrc)
	if recovered {
		d.counters.icrcRecovered.Add(1)
	}
	if ok {
		d.deliverMcast(now, p, m, grp)
	}
}

// receiveMcastOnDevice takes a packet for MulticastQPN that came on one
// of the device's own sockets, read by r, checked as receive checks every
// packet (receive calls it, so that the one test of the unicast path is
// that of the packet's destination QP). One sent to a group (its
// destination address, m.Local, a multicast one) came on a socket bound
// to the wildcard address (see the notes at the top of this file): the
// first socket's copy of a group the device joined is delivered
// (deliverMcast), and any other is counted as ignored
// (Counters.McastIgnored), not as a packet for an unknown QP. One sent to
// a unicast address is one for a QP that does not exist (kernel rxe has
// no QP of that number either).
func (d *Device) receiveMcastOnDevice(now time.Time, p packet.Packet, m *netdev.Message, r *connReader) {
	g := m.Local.Unmap()
	if !g.IsMulticast() {
		d.counters.unknownQP.Add(1)
		return
	}
	var grp *mcastGroup
	if via := d.mcast.viaDevice.Load(); via != nil && r.conn == d.conns[0] {
		grp = (*via)[g]
	}
	if grp == nil {
		d.mcast.ignored.Add(1)
		return
	}
	d.deliverMcast(now, p, m, grp)
}

// deliverMcast hands packet p, received in m for group grp and checked,
// to every QP attached to the group (rxe_rcv_mcast_pkt); one whose
// destination QP is not MulticastQPN, or that finds no QP attached, is
// dropped and counted (Counters.McastDropped).
func (d *Device) deliverMcast(now time.Time, p packet.Packet, m *netdev.Message, grp *mcastGroup) {
	qps := *grp.qps.Load()
	if p.DestQP() != MulticastQPN || len(qps) == 0 {
		d.mcast.dropped.Add(1)
		return
	}
	d.mcast.rcvd.Add(1)
	// A datagram this device sent (from its address and port) is a QP's
	// own when its DETH names the QP as the source.
	self, srcQP := false, uint32(0)
	if deth := p.DETH(); len(deth) == packet.DETHSize && m.Addr.Addr().Unmap() == d.addr && m.Addr.Port() == d.port {
		self, srcQP = true, deth.SrcQP()
	}
	for _, qp := range qps {
		if self && qp.blockSelfMcast && qp.qpn == srcQP {
			continue // QPInitAttr.BlockSelfMcastLoopback
		}
		qp.receiveUnreliable(now, p, m, grp.addr)
	}
}

// isDead reports, under the QP's lock, whether the QP was destroyed or its
// device closed (QP.dead).
func (qp *QP) isDead() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.dead()
}
