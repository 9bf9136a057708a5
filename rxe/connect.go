package rxe

import (
	"fmt"
	"net/netip"
)

// ConnInfo is what the two sides of an RC connection exchange out of band
// before connecting (perftest's exchange carries the same: GID, QPN, PSN,
// and the responder resources).
type ConnInfo struct {
	GID     netip.Addr // the device's GID (Device.GID)
	UDPPort uint16     // the device's UDP port; 0 means 4791
	QPN     uint32
	PSN     uint32 // the first PSN this side sends
	MTU     MTU    // the side's active MTU
	// MaxRdAtomic is how many RDMA READ/atomic requests this side's
	// responder accepts outstanding (its max_dest_rd_atomic).
	MaxRdAtomic int
	// RecvBuffer is the socket receive buffer this side's device was
	// granted, in bytes as getsockopt reports it (its smallest socket's),
	// and RecvSockets the number of its receive sockets (one per
	// completion vector, or one); 0 if unknown. The sockets are a
	// reuseport group that steers each datagram to socket DestQPN modulo
	// RecvSockets (netdev.ListenUDPGroup). A gorxe peer's device keeps the
	// packets in flight of its QPs within what RecvBuffer absorbs
	// (QP.SetPeerReceiveBuffer): it divides the buffer among its QPs in
	// RTS or SQD whose packets reach the same socket here, and its own
	// receive buffer among its QPs on one of its sockets, so the caller
	// passes RecvBuffer and RecvSockets as announced, undivided. It is not
	// part of perftest's exchange, so a kernel or NIC peer announces
	// nothing.
	RecvBuffer, RecvSockets int
	// SelectiveRepeat is this side's offer of selective repeat
	// (docs/recovery.md), and OOOLimit the bytes of out-of-order requests
	// its responder then holds. Connect uses selective repeat only when
	// both sides offer it; a peer that does not know the field (kernel
	// rxe, a NIC, an older gorxe) offers nothing, and the wire is then
	// IBTA go-back-N, exactly as without it.
	SelectiveRepeat bool
	OOOLimit        int
}

// ConnectOptions tune Connect; zero fields take perftest's defaults.
type ConnectOptions struct {
	Access      AccessFlags // QP access flags; default local write, remote read, write and atomic
	MTU         MTU         // default: the smaller of both active MTUs
	Timeout     uint8       // default 14 (67 ms)
	RetryCnt    uint8       // default 7
	RNRRetry    uint8       // default 7 (infinite)
	MinRNRTimer uint8       // default 12 (0.64 ms)
	MaxRdAtomic int         // default 16, at most the peer's MaxRdAtomic
	// Explicit marks the fields among Timeout, RetryCnt, RNRRetry and
	// MinRNRTimer (QPAttrTimeout, QPAttrRetryCnt, QPAttrRNRRetry,
	// QPAttrMinRNRTimer) whose zero is the value 0 rather than the
	// default: a Timeout of 0 is no local ACK timeout (the requester
	// never times out), a RetryCnt of 0 fails the QP at the first
	// timeout, an RNRRetry of 0 at the first RNR NAK, a MinRNRTimer of 0
	// asks for 655.36 ms (the IBA's encoding of the RNR timer). Other
	// bits are refused with ErrInvalidArgument.
	Explicit QPAttrMask
	// NoSelectiveRepeat refuses selective repeat even if the peer offers
	// it. The local ConnInfo given to the peer must then not offer it
	// either (clear its SelectiveRepeat), so that both sides decide alike;
	// Connect returns ErrInvalidArgument if it does.
	NoSelectiveRepeat bool
}

// Info returns this QP's half of the connection information, with psn as
// the first PSN it will send. An RC QP offers selective repeat, with the
// out-of-order buffer given by QPAttr.OOOLimit if set (the default
// otherwise).
func (qp *QP) Info(psn uint32) ConnInfo {
	buf, socks := qp.dev.recvBufferInfo()
	qp.mu.Lock()
	limit := qp.attr.OOOLimit
	qp.mu.Unlock()
	return ConnInfo{GID: qp.dev.GID(), UDPPort: qp.dev.port, QPN: qp.qpn, PSN: psn & 0xFFFFFF,
		MTU: qp.dev.activeMTU, MaxRdAtomic: 16, RecvBuffer: buf, RecvSockets: socks,
		SelectiveRepeat: qp.typ == QPTypeRC, OOOLimit: oooBound(limit)}
}

// Connect takes an RC QP from RESET (or INIT, where receives may have
// been posted) through INIT and RTR to RTS against the peer described by
// remote, sending from local.PSN (use the same local you gave the peer).
// It checks the QP's type and state, local, remote and o before it
// modifies the QP: a UC or UD QP (which Modify brings up), a local of
// another QP (the two halves swapped) or a bad value fails with
// ErrInvalidArgument, a QP in another state with ErrInvalidState, and the
// QP is left as it was.
func (qp *QP) Connect(local, remote ConnInfo, o ConnectOptions) error {
	if extra := o.Explicit &^ (QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMinRNRTimer); extra != 0 {
		return fmt.Errorf("rxe: connect QP %#x: %w: ConnectOptions.Explicit has %v (only TIMEOUT, RETRY_CNT, RNR_RETRY and MIN_RNR_TIMER may be)",
			qp.qpn, ErrInvalidArgument, extra)
	}
	if qp.typ != QPTypeRC {
		return fmt.Errorf("rxe: connect QP %#x: %w: Connect brings up RC QPs; a %v QP is brought up with Modify", qp.qpn, ErrInvalidArgument, qp.typ)
	}
	// local is the half this QP gave the peer (Info): its QPN and, when
	// set, its GID are this QP's and device's, so that two halves passed
	// in the wrong order are refused rather than connecting the QP to
	// itself.
	if g := qp.dev.GID(); local.QPN != qp.qpn || local.GID.IsValid() && local.GID.Unmap() != g.Unmap() {
		return fmt.Errorf("rxe: connect QP %#x: %w: the local ConnInfo names %v QP %#x, not this QP (%v QP %#x): pass this QP's own Info first, the peer's second",
			qp.qpn, ErrInvalidArgument, local.GID, local.QPN, g, qp.qpn)
	}
	if st := qp.State(); st != QPSReset && st != QPSInit {
		return fmt.Errorf("rxe: connect QP %#x: %w: Connect starts from RESET or INIT; the QP is in %v", qp.qpn, ErrInvalidState, st)
	}
	if o.Access == 0 {
		o.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if o.MTU == 0 {
		o.MTU = min(qp.dev.activeMTU, remote.MTU)
		if remote.MTU == 0 {
			o.MTU = qp.dev.activeMTU
		}
	}
	o.Explicit.orDefault(QPAttrTimeout, &o.Timeout, 14)
	o.Explicit.orDefault(QPAttrRetryCnt, &o.RetryCnt, 7)
	o.Explicit.orDefault(QPAttrRNRRetry, &o.RNRRetry, 7)
	o.Explicit.orDefault(QPAttrMinRNRTimer, &o.MinRNRTimer, 12)
	if o.MaxRdAtomic == 0 {
		o.MaxRdAtomic = 16
	}
	if remote.MaxRdAtomic > 0 {
		o.MaxRdAtomic = min(o.MaxRdAtomic, remote.MaxRdAtomic)
	}
	sr, err := negotiateSR(local, remote, o.NoSelectiveRepeat)
	if err != nil {
		return fmt.Errorf("rxe: connect QP %#x: %w", qp.qpn, err)
	}
	steps := []struct {
		attr QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: QPSInit, Port: 1, AccessFlags: o.Access}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPAttr{State: QPSRTR, AH: AH{DGID: remote.GID, UDPPort: remote.UDPPort, HopLimit: 64}, PathMTU: o.MTU,
			DestQPN: remote.QPN, RQPSN: remote.PSN, MaxDestRdAtomic: 16, MinRNRTimer: o.MinRNRTimer},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		{QPAttr{State: QPSRTS, SQPSN: local.PSN, Timeout: o.Timeout, RetryCnt: o.RetryCnt, RNRRetry: o.RNRRetry,
			MaxRdAtomic: o.MaxRdAtomic}, QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic},
	}
	steps[1].attr.SelectiveRepeat, steps[1].attr.OOOLimit, steps[1].attr.PeerOOOLimit = sr.SelectiveRepeat, sr.OOOLimit, sr.PeerOOOLimit
	steps[1].mask |= QPAttrSelectiveRepeat
	// Every value is checked before the first step: a step refused after
	// RESET→INIT would leave the QP in INIT or RTR, from where a
	// corrected Connect could not start. The transitions themselves are
	// those of an RC QP from RESET or INIT, checked above.
	for _, s := range steps {
		if err := qp.dev.checkValues(&s.attr, s.mask); err != nil {
			return fmt.Errorf("rxe: connect QP %#x to %v QP %#x: %w", qp.qpn, remote.GID, remote.QPN, err)
		}
	}
	if err := qp.SetPeerReceiveBuffer(remote.RecvBuffer, remote.RecvSockets); err != nil {
		return fmt.Errorf("rxe: connect QP %#x: %w", qp.qpn, err)
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("rxe: connect QP %#x to %v QP %#x: %w", qp.qpn, remote.GID, remote.QPN, err)
		}
	}
	return nil
}
