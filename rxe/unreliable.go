package rxe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/responder"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// GRHSize is the size of the GRH area at the start of every UD receive
// buffer (IBA 11.4.1.1): post receive buffers 40 bytes longer than the
// datagrams they take. On IPv4 its last 20 bytes are the IPv4 header.
const GRHSize = responder.GRHSize

// The transition tables of IBA 10.3.1 (kernel ib_modify_qp_is_ok) for UC
// and UD: UC has no retry, RNR, READ or atomic attributes; UD has no
// address vector, destination QP or PSN on the receive side, but a Q_Key.
// Both drain their send queue in SQD as RC does (rxe runs SQD for every QP
// type). SQE→RTS is left out: a gorxe QP never enters SQE.
var (
	ucTransitions = map[[2]QPState]transition{
		{QPSReset, QPSInit}: {req: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPSInit, QPSInit}:  {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPSInit, QPSRTR}: {
			req: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
			opt: QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex,
		},
		{QPSRTR, QPSRTS}: {req: QPAttrSQPSN, opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState},
		{QPSRTS, QPSRTS}: {opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState},
		{QPSRTS, QPSSQD}: {opt: QPAttrEnSQDAsyncNotify},
		{QPSSQD, QPSRTS}: {opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState},
		{QPSSQD, QPSSQD}: {opt: QPAttrAV | QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrPathMigState},
	}
	udTransitions = map[[2]QPState]transition{
		{QPSReset, QPSInit}: {req: QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
		{QPSInit, QPSInit}:  {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
		{QPSInit, QPSRTR}:   {opt: QPAttrPKeyIndex | QPAttrQKey},
		{QPSRTR, QPSRTS}:    {req: QPAttrSQPSN, opt: QPAttrCurState | QPAttrQKey},
		{QPSRTS, QPSRTS}:    {opt: QPAttrCurState | QPAttrQKey},
		{QPSRTS, QPSSQD}:    {opt: QPAttrEnSQDAsyncNotify},
		{QPSSQD, QPSRTS}:    {opt: QPAttrCurState | QPAttrQKey},
		{QPSSQD, QPSSQD}:    {opt: QPAttrPKeyIndex | QPAttrQKey},
	}
)

// transitionsOf returns the Modify table of a QP type.
func transitionsOf(t QPType) map[[2]QPState]transition {
	switch t {
	case QPTypeUC:
		return ucTransitions
	case QPTypeUD:
		return udTransitions
	}
	return rcTransitions
}

// unreliable reports whether the QP is UC or UD.
func (qp *QP) unreliable() bool { return qp.typ == QPTypeUC || qp.typ == QPTypeUD }

// startUnreliableResponder creates the receive side of a UC or UD QP
// (INIT→RTR; caller holds mu).
func (qp *QP) startUnreliableResponder() {
	mtu := qp.attr.PathMTU.Bytes()
	if qp.typ == QPTypeUD {
		mtu = qp.dev.activeMTU.Bytes()
	}
	qp.uresp = responder.NewUnreliable(responder.UConfig{
		UD: qp.typ == QPTypeUD, QPN: qp.qpn, PMTU: mtu, RQPSN: packet.PSN(qp.attr.RQPSN),
		QKey: qp.attr.QKey, Access: qp.attr.AccessFlags, SRQ: qp.srq != nil,
	}, responder.Env{Mem: pdMemory{qp.dev, qp.pd}, RQ: qp.recvSource(), CQ: cqSink{qp.recvCQ}})
}

// startUnreliableRequester creates the send side of a UC or UD QP
// (RTR→RTS; caller holds mu).
func (qp *QP) startUnreliableRequester() {
	mtu := qp.attr.PathMTU.Bytes()
	ph := qp.pseudo()
	if qp.typ == QPTypeUD {
		mtu = qp.dev.activeMTU.Bytes()
		ph.Dst, ph.DstPort = qp.dev.addr, packet.UDPPort // replaced per work request
	}
	qp.ureq = requester.NewUnreliable(requester.UConfig{
		UD: qp.typ == QPTypeUD, QPN: qp.qpn, DestQPN: qp.attr.DestQPN, Dest: qp.dest, PMTU: mtu,
		SQPSN: packet.PSN(qp.attr.SQPSN), PKey: packet.DefaultPKey, QKey: qp.attr.QKey, Pseudo: ph,
		SigAll: qp.sigAll, MaxWR: qp.cap.MaxSendWR, MaxSGE: qp.cap.MaxSendSGE, MaxInline: qp.cap.MaxInlineData,
	}, pdMemory{qp.dev, qp.pd}, cqSink{qp.sendCQ})
}

// startUnreliable creates the engines of a UC or UD QP as it moves from
// cur to next (caller holds mu).
func (qp *QP) startUnreliable(cur, next QPState) {
	switch {
	case cur == QPSInit && next == QPSRTR:
		qp.startUnreliableResponder()
	case cur == QPSRTR && next == QPSRTS:
		qp.startUnreliableRequester()
	}
}

// syncUnreliable pushes the attributes a UC or UD QP may change in RTS
// and SQD into its engines: the access flags, the Q_Key, and a UC QP's new
// address vector (SQD→SQD) of mask (caller holds mu).
func (qp *QP) syncUnreliable(mask QPAttrMask) {
	if qp.uresp != nil {
		qp.uresp.SetAccess(qp.attr.AccessFlags)
		qp.uresp.SetQKey(qp.attr.QKey)
	}
	if qp.ureq != nil {
		qp.ureq.SetQKey(qp.attr.QKey)
		if mask&QPAttrAV != 0 && qp.typ == QPTypeUC {
			qp.ureq.SetDest(qp.dest, qp.pseudo())
		}
	}
}

// flushUnreliable stops a UC or UD QP's engines as it enters ERR (caller
// holds mu); the receive queue is flushed by enterError. The datagrams the
// QP holds after a local drop are not sent: their work requests complete
// with WR_FLUSH_ERR, as rxe's completer flushes a WQE its requester rolled
// back after -EAGAIN once the QP is in ERR (flush_send_queue).
func (qp *QP) flushUnreliable() {
	if qp.ureq != nil {
		qp.ureq.Flush()
		qp.dropHeld()
	}
	if qp.uresp != nil {
		qp.uresp.Flush()
	}
}

// dropHeld forgets the datagrams the QP holds after a local drop
// (forgetHeld; caller holds mu); a UC or UD QP's send engine learns that they will not leave
// (requester.Unreliable.Unsent), so their work requests complete with
// WR_FLUSH_ERR. (Destroy and a reset drop them with the engine: their
// work requests complete not at all, as rxe flushes the send queue of a
// destroyed or reset QP without notifying.)
func (qp *QP) dropHeld() {
	held := qp.localDrop.holding()
	qp.forgetHeld()
	if held && qp.ureq != nil {
		qp.ureq.Unsent()
	}
}

// unreliableSent tells a UC or UD QP's send engine that n more of its
// datagrams left (vector.send; caller holds mu): a work request whose last
// datagram left completes (requester.Unreliable.Sent). A send CQ overflow
// then moves the QP to ERR, and a drain that ends raises SQ_DRAINED
// (afterEngines). Nothing happens for an RC QP or for a QP without a
// send engine (destroyed or reset). The caller counts only datagrams the
// QP's current incarnation built (QP.gen): one reset since, and brought
// up again, has a new engine that did not build them.
func (qp *QP) unreliableSent(n int) {
	if qp.ureq == nil {
		return
	}
	qp.ureq.Sent(n)
	if !qp.dead() {
		qp.afterEngines()
	}
}

// queryUnreliable puts a UC or UD QP's live PSNs into a (caller holds mu).
func (qp *QP) queryUnreliable(a *QPAttr) {
	if qp.ureq != nil {
		a.SQPSN = uint32(qp.ureq.SQPSN())
	}
	if qp.uresp != nil && qp.typ == QPTypeUC {
		a.RQPSN = uint32(qp.uresp.EPSN())
	}
}

// stepUnreliable takes a UC or UD QP's packets into msgs[k:] (caller holds
// mu); it returns the new count.
func (qp *QP) stepUnreliable(now time.Time, msgs []netdev.Message, owners []*QP, k int) int {
	for k < len(msgs) && qp.ureq != nil && qp.state != QPSRTR {
		n, dst, tclass := qp.ureq.NextPacket(now, msgs[k].Buf[:cap(msgs[k].Buf)])
		if n == 0 {
			break
		}
		msgs[k].N, msgs[k].Addr, msgs[k].Local, owners[k] = n, dst, qp.dev.addr, qp
		// A UD datagram's class is its address handle's, a UC QP's its
		// address vector's (0: the device's).
		msgs[k].TOS = tclass
		if qp.typ == QPTypeUC {
			msgs[k].TOS = qp.attr.AH.TrafficClass
		}
		k++
	}
	return k
}

// reportIPFields asks the device's sockets, on the first UD QP, to report
// the traffic class and TTL of every datagram they receive
// (netdev.IPFieldReporter), which a UD receive writes into the GRH area
// where kernel rxe copies the received IP header (rxe_resp.c execute), and
// which CreateAHFromWC answers with. A Conn that cannot report leaves the
// GRH area with traffic class 0 and TTL 64. RC and UC receive nothing from
// them, so a device without UD QPs does not pay for the control messages.
func (d *Device) reportIPFields() error {
	d.ipFieldsMu.Lock()
	defer d.ipFieldsMu.Unlock()
	if d.ipFields {
		return nil
	}
	for _, c := range d.conns {
		r, ok := c.(netdev.IPFieldReporter)
		if !ok {
			continue
		}
		if err := r.ReportIPFields(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("rxe: asking the socket for received traffic classes: %w", err)
		}
	}
	d.ipFields = true
	return nil
}

// receiveUnreliable hands a packet to a UC or UD QP's receive side; m is
// the datagram it came in and dst the IP address it was sent to (the
// device's, or a multicast group's: receiveMcast), which a UD receive
// writes into the GRH area.
func (qp *QP) receiveUnreliable(now time.Time, p packet.Packet, m *netdev.Message, dst netip.Addr) {
	src := m.Addr
	qp.mu.Lock()
	switch {
	case qp.dead():
	case qp.uresp == nil || qp.state == QPSErr:
		qp.counter.badState.Add(1)
	case qp.typ == QPTypeUC && src.Addr().Unmap() != qp.dest.Addr():
		qp.counter.badSrc.Add(1) // rxe check_addr: connected QPs take only their peer's packets
	default:
		qp.counter.rcvdPkts++
		qp.counter.rcvdBytes += uint64(p.Len())
		qp.uresp.Receive(now, p, responder.IPHeader{
			Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Dst: netip.AddrPortFrom(dst, qp.dev.port),
			TOS: m.TOS, TTL: m.TTL,
		})
		if st, failed := qp.uresp.Failed(); failed {
			// A malformed receive WQE (rxe RESPST_ERR_MALFORMED_WQE,
			// class A) or a full receive CQ (rxe do_complete): the QP
			// enters ERR. The first raises QP_FATAL as an RC responder's
			// does (raiseResponderError); the CQ raised its CQ_ERR for
			// the second.
			qp.dev.counters.qpErrors.Add(1)
			qp.raiseResponderError(st)
			qp.enterError()
		}
	}
	qp.mu.Unlock()
}

// AddrHandle is an address handle (struct ibv_ah): the destination of UD
// work requests, created on a PD. It implements verbs.AddressHandle. It
// counts as a user of its PD until Destroy.
type AddrHandle struct {
	pd        *PD
	attr      AH
	dest      netip.AddrPort // never changes: PostSend copies it into the WR it queues
	mcast     bool           // dest is a multicast group: PostSend sends to MulticastQPN
	destroyed atomic.Bool    // set by Destroy; PostSend refuses the handle after it
}

// Dest returns the IP address and UDP port the handle's datagrams go to.
func (a *AddrHandle) Dest() netip.AddrPort { return a.dest }

// TrafficClass returns the IP traffic class of the handle's datagrams
// (AH.TrafficClass; 0: the device's, Options.TrafficClass).
func (a *AddrHandle) TrafficClass() uint8 { return a.attr.TrafficClass }

// Attr returns the attributes the handle was created with.
func (a *AddrHandle) Attr() AH { return a.attr }

// CreateAH creates an address handle from address attributes
// (ibv_create_ah): the destination GID (or plain IP address) and UDP port.
// A multicast GID (an IPv4 multicast address, plain or IPv4-mapped, or an
// IPv6 one in ff00::/8) makes a handle that sends to the group, at the UDP
// port given (4791 by default), with destination QP MulticastQPN; the
// first such handle sets the device's sockets up for multicast sends
// (mcast.go), which a device on a netdev other than a UDP socket (a pipe)
// cannot: CreateAH then fails with ErrInvalidArgument. The handle takes a use of the PD, so PD.Dealloc fails with
// ErrInUse until the handle is destroyed; on a deallocated PD CreateAH
// fails with ErrClosed.
func (pd *PD) CreateAH(attr AH) (*AddrHandle, error) {
	d := pd.dev
	if d.closed.Load() || pd.closed.Load() {
		return nil, ErrClosed
	}
	g := attr.DGID.Unmap()
	if !g.IsValid() || g.IsUnspecified() || g.Is4() != d.addr.Is4() {
		return nil, fmt.Errorf("%w: destination GID %v (the device is on %v)", ErrInvalidArgument, attr.DGID, d.addr)
	}
	if attr.SGIDIndex != 0 && attr.SGIDIndex != 1 {
		return nil, fmt.Errorf("%w: source GID index %d", ErrInvalidArgument, attr.SGIDIndex)
	}
	port := attr.UDPPort
	if port == 0 {
		port = packet.UDPPort
	}
	if g.IsMulticast() {
		if err := d.enableMcastSend(); err != nil {
			return nil, err
		}
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	return &AddrHandle{pd: pd, attr: attr, dest: netip.AddrPortFrom(g, port), mcast: g.IsMulticast()}, nil
}

// Destroy destroys the address handle (ibv_destroy_ah) and gives back its
// use of the PD. PostSend refuses the handle afterwards; a work request
// posted before keeps its destination, which PostSend copied. A second
// Destroy, or one after Device.Close, fails with ErrClosed.
func (a *AddrHandle) Destroy() error {
	if a.pd.dev.closed.Load() {
		return ErrClosed
	}
	if a.destroyed.Swap(true) {
		return ErrClosed
	}
	a.pd.users.Add(-1)
	return nil
}

// CreateAHFromWC creates an address handle that answers the sender of a UD
// receive completion (ibv_create_ah_from_wc): the completion's source IP
// address, or, if it has none, the source address of the IP header in the
// buffer's GRH area grh, at this device's own UDP port (4791 unless the
// device was opened on another), where RoCE peers listen: the datagram's
// UDP source port is not one (kernel rxe sends from 0xC000 + a hash of
// the QPN). gorxe devices on different ports answer each other through
// CreateAH with the port, as their connection managers need one port.
// When grh holds the GRH area, the handle's traffic class and hop limit
// (AH.HopLimit, kept for Attr) are the traffic class and TTL or hop limit
// the datagram arrived with (and its flow label, for IPv6), as libibverbs'
// ibv_init_ah_from_wc sets them from the IP header; grh may be nil when
// the completion has a source address, and the traffic class is then the
// device's and the hop limit 255. After PD.Dealloc or Device.Close it
// fails with ErrClosed, whatever its arguments.
func (pd *PD) CreateAHFromWC(wc *WC, grh []byte) (*AddrHandle, error) {
	if pd.dev.closed.Load() || pd.closed.Load() {
		return nil, ErrClosed
	}
	if wc == nil {
		return nil, fmt.Errorf("%w: nil work completion", ErrInvalidArgument)
	}
	if wc.Flags&verbs.WCFlagGRH == 0 {
		return nil, fmt.Errorf("%w: the completion has no GRH", ErrInvalidArgument)
	}
	if grh != nil && len(grh) < GRHSize {
		return nil, fmt.Errorf("%w: GRH area of %d bytes", ErrInvalidArgument, len(grh))
	}
	if grh == nil && !wc.Src.IsValid() {
		return nil, fmt.Errorf("%w: the completion has no source address and no GRH area was given", ErrInvalidArgument)
	}
	ah := AH{HopLimit: 0xFF}
	var from netip.Addr
	if grh != nil {
		// A RoCEv2 GRH area holds an IPv6 header, or 20 zero bytes and an
		// IPv4 header (rxe_resp.c execute; the layout
		// ibv_init_ah_from_wc decodes).
		switch {
		case grh[0]>>4 == 6:
			from = netip.AddrFrom16([16]byte(grh[8:24]))
			ah.TrafficClass = grh[0]<<4 | grh[1]>>4
			ah.FlowLabel = binary.BigEndian.Uint32(grh[0:4]) & 0xFFFFF
			ah.HopLimit = grh[7]
		case grh[20]>>4 == 4:
			from = netip.AddrFrom4([4]byte(grh[32:36]))
			ah.TrafficClass, ah.HopLimit = grh[21], grh[28] // TOS, TTL
		default:
			return nil, fmt.Errorf("%w: the GRH area holds neither an IPv6 nor an IPv4 header", ErrInvalidArgument)
		}
	}
	// Answers go to the RoCE port the device itself uses (4791), as
	// ibv_create_ah_from_wc's do: the datagram's UDP source port is an
	// entropy port (kernel rxe: 0xC000 + hash(QPN)) nobody listens on.
	if wc.Src.IsValid() {
		from = wc.Src.Addr()
	}
	ah.DGID, ah.UDPPort = from, pd.dev.port
	return pd.CreateAH(ah)
}
