package rxe

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gorxe/gorxe/packet"
)

// QPAttrMask selects the fields of a QPAttr that Modify applies (enum
// ibv_qp_attr_mask; same bit values).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25
)

var maskNames = []struct {
	m    QPAttrMask
	name string
}{
	{QPAttrState, "STATE"}, {QPAttrCurState, "CUR_STATE"}, {QPAttrEnSQDAsyncNotify, "EN_SQD_ASYNC_NOTIFY"},
	{QPAttrAccessFlags, "ACCESS_FLAGS"}, {QPAttrPKeyIndex, "PKEY_INDEX"}, {QPAttrPort, "PORT"},
	{QPAttrQKey, "QKEY"}, {QPAttrAV, "AV"}, {QPAttrPathMTU, "PATH_MTU"}, {QPAttrTimeout, "TIMEOUT"},
	{QPAttrRetryCnt, "RETRY_CNT"}, {QPAttrRNRRetry, "RNR_RETRY"}, {QPAttrRQPSN, "RQ_PSN"},
	{QPAttrMaxQPRdAtomic, "MAX_QP_RD_ATOMIC"}, {QPAttrAltPath, "ALT_PATH"}, {QPAttrMinRNRTimer, "MIN_RNR_TIMER"},
	{QPAttrSQPSN, "SQ_PSN"}, {QPAttrMaxDestRdAtomic, "MAX_DEST_RD_ATOMIC"}, {QPAttrPathMigState, "PATH_MIG_STATE"},
	{QPAttrCap, "CAP"}, {QPAttrDestQPN, "DEST_QPN"}, {QPAttrRateLimit, "RATE_LIMIT"},
	{QPAttrSelectiveRepeat, "SELECTIVE_REPEAT"},
}

// String lists the mask's bits, e.g. "STATE|AV|PATH_MTU".
func (m QPAttrMask) String() string {
	var parts []string
	for _, n := range maskNames {
		if m&n.m != 0 {
			parts = append(parts, n.name)
			m &^= n.m
		}
	}
	if m != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(m)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// orDefault sets *v to def when it is 0 and m does not have bit: the
// zero-means-default rule of ConnectOptions and CMOptions, with Explicit
// as m.
func (m QPAttrMask) orDefault(bit QPAttrMask, v *uint8, def uint8) {
	if *v == 0 && m&bit == 0 {
		*v = def
	}
}

// AH is an address handle: how to reach the peer. On RoCE it is always
// global: the GID is the peer's IP address (IPv4-mapped for IPv4).
type AH struct {
	// DGID is the peer's GID (an IPv6 address, IPv4-mapped for IPv4) or
	// simply its IP address.
	DGID netip.Addr
	// UDPPort is the peer's RoCE UDP port; 0 means 4791. A gorxe extension
	// that lets several devices share one host address.
	UDPPort uint16
	// SGIDIndex selects our GID (gorxe devices have one usable entry).
	SGIDIndex int
	// TrafficClass, when not 0, is the IP traffic class of the packets of
	// an RC or UC QP with this address vector, or of the UD datagrams
	// sent with an address handle made from it (rxe puts the AV's traffic
	// class in the IP header); 0 leaves the device's
	// (Options.TrafficClass). HopLimit and FlowLabel are kept for Query:
	// packets go out with the route's TTL (hop limit), the host's default,
	// and flow label 0, as kernel rxe's do (for RoCEv2 the kernel replaces
	// an AV's hop limit with the route's when it resolves the address:
	// ib_resolve_unicast_gid_dmac).
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
}

// QPCap are a QP's queue capacities.
type QPCap struct {
	MaxSendWR, MaxRecvWR   int
	MaxSendSGE, MaxRecvSGE int
	MaxInlineData          int
}

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	// SRQ, if set, supplies the receive WQEs: Cap.MaxRecvWR and
	// Cap.MaxRecvSGE are then ignored (any value is accepted), and the
	// QP's Cap reports 0 for both.
	SRQ *SRQ
	Cap QPCap
	// SigAll: every send WR generates a completion (sq_sig_all).
	SigAll bool
	// BlockSelfMcastLoopback: a UD QP attached to a multicast group does
	// not receive the datagrams it sent to the group itself
	// (ibv_create_qp_ex's IBV_QP_CREATE_BLOCK_SELF_MCAST_LB). Without it
	// the QP receives its own, as every member on this host does: a
	// device's multicast datagrams loop back to the host (mcast.go).
	BlockSelfMcastLoopback bool
}

// QPAttr holds QP attributes for Modify and Query (struct ibv_qp_attr).
type QPAttr struct {
	State, CurState QPState
	AccessFlags     AccessFlags
	PKeyIndex       uint16
	Port            uint8
	QKey            uint32
	AH              AH
	PathMTU         MTU
	Timeout         uint8 // local ACK timeout exponent: 4.096 µs × 2^Timeout; 0 = none
	RetryCnt        uint8 // 0..7
	RNRRetry        uint8 // 0..7, 7 = infinite
	MinRNRTimer     uint8 // RNR NAK timer code (0..31) we send
	RQPSN, SQPSN    uint32
	MaxRdAtomic     int // outstanding RDMA READ/atomic as requester
	MaxDestRdAtomic int // responder resources
	DestQPN         uint32
	Cap             QPCap
	// SQDrainNotify, given with QPAttrEnSQDAsyncNotify on RTS→SQD, raises
	// SQ_DRAINED when that drain ends; it holds for that transition only
	// (a later RTS→SQD without it raises nothing). Query reports the
	// request of the last RTS→SQD.
	SQDrainNotify bool
	// SelectiveRepeat turns on selective repeat (docs/recovery.md) for an
	// RC QP whose peer is a gorxe end that agreed to it: both ends must
	// set it, or neither (Connect and rxectl negotiate it). OOOLimit
	// bounds the bytes of out-of-order requests the responder holds (0:
	// responder.DefaultOOOLimit, at most MaxOOOLimit). Both are given
	// with QPAttrSelectiveRepeat, a gorxe extension, before RTR, with
	// PeerOOOLimit: the peer's OOOLimit as it offered it (0: its
	// default), which bounds how far past a hole the requester sends.
	SelectiveRepeat bool
	OOOLimit        int
	PeerOOOLimit    int
}

// The transition table of IBA 10.3.1 / kernel ib_modify_qp_is_ok for RC:
// for each (from, to), the attributes that must and may be given.
type transition struct{ req, opt QPAttrMask }

var rcTransitions = map[[2]QPState]transition{
	{QPSReset, QPSInit}: {req: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags, opt: QPAttrSelectiveRepeat},
	{QPSInit, QPSInit}:  {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags | QPAttrSelectiveRepeat},
	{QPSInit, QPSRTR}: {
		req: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer,
		opt: QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrSelectiveRepeat,
	},
	{QPSRTR, QPSRTS}: {
		req: QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrPathMigState,
	},
	{QPSRTS, QPSRTS}: {opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer},
	{QPSRTS, QPSSQD}: {opt: QPAttrEnSQDAsyncNotify},
	{QPSSQD, QPSRTS}: {opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer},
	{QPSSQD, QPSSQD}: {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAV | QPAttrAccessFlags | QPAttrTimeout | QPAttrRetryCnt |
		QPAttrRNRRetry | QPAttrMaxQPRdAtomic | QPAttrMaxDestRdAtomic | QPAttrAltPath | QPAttrMinRNRTimer | QPAttrPathMigState},
}

// checkTransition validates a Modify of a QP of type typ in state cur (IBA
// 10.3.1): RESET is reachable from every state and ERR from every state
// but RESET, with no other attribute; other transitions need exactly their
// required attributes and at most their optional ones.
func checkTransition(typ QPType, cur QPState, attr *QPAttr, mask QPAttrMask) (QPState, error) {
	next := cur
	if mask&QPAttrState != 0 {
		next = attr.State
	}
	if mask&QPAttrCurState != 0 && attr.CurState != cur {
		return 0, fmt.Errorf("%w: CUR_STATE %v but the QP is in %v", ErrInvalidArgument, attr.CurState, cur)
	}
	if next > QPSErr {
		return 0, fmt.Errorf("%w: state %v", ErrInvalidArgument, next)
	}
	if cur == QPSReset && next == QPSErr {
		// A QP in RESET goes only to RESET or INIT: kernel
		// ib_modify_qp_is_ok has no RESET→ERR entry (rxe __qp_chk_state
		// refuses it with EINVAL).
		return 0, fmt.Errorf("%w: %v QP cannot go from %v to %v", ErrInvalidState, typ, cur, next)
	}
	if next == QPSReset || next == QPSErr {
		// Always allowed, and with no other attribute (IBA 10.3.1;
		// kernel ib_modify_qp_is_ok has no optional ones either). That
		// holds without the state bit too: a QP in RESET or ERR stays
		// there with an empty mask.
		if extra := mask &^ QPAttrState; extra != 0 {
			return 0, fmt.Errorf("%w: %v to %v does not take %v", ErrInvalidArgument, cur, next, extra)
		}
		return next, nil
	}
	t, ok := transitionsOf(typ)[[2]QPState{cur, next}]
	if !ok {
		return 0, fmt.Errorf("%w: %v QP cannot go from %v to %v", ErrInvalidState, typ, cur, next)
	}
	rest := mask &^ QPAttrState
	if missing := t.req &^ rest; missing != 0 {
		return 0, fmt.Errorf("%w: %v to %v needs %v", ErrInvalidArgument, cur, next, missing)
	}
	if extra := rest &^ (t.req | t.opt); extra != 0 {
		return 0, fmt.Errorf("%w: %v to %v does not take %v", ErrInvalidArgument, cur, next, extra)
	}
	return next, nil
}

// checkValues validates attribute values against the device.
func (d *Device) checkValues(attr *QPAttr, mask QPAttrMask) error {
	if err := checkSelectiveRepeat(attr, mask); err != nil {
		return err
	}
	if mask&QPAttrPort != 0 && attr.Port != 1 {
		return fmt.Errorf("%w: port %d (the device has port 1)", ErrInvalidArgument, attr.Port)
	}
	if mask&QPAttrPKeyIndex != 0 && attr.PKeyIndex != 0 {
		return fmt.Errorf("%w: P_Key index %d (the table has one entry)", ErrInvalidArgument, attr.PKeyIndex)
	}
	if mask&QPAttrAccessFlags != 0 {
		// The remote rights include FLUSH's (IBV_ACCESS_FLUSH_GLOBAL,
		// IBV_ACCESS_FLUSH_PERSISTENT): the responder executes a FLUSH
		// only if the QP has them, as rxe check_qp_attr_access does.
		known := AccessLocalWrite | AccessRemote
		if attr.AccessFlags&^known != 0 {
			return fmt.Errorf("%w: QP access flags %#x", ErrInvalidArgument, uint32(attr.AccessFlags))
		}
	}
	if mask&QPAttrPathMTU != 0 {
		if attr.PathMTU.Bytes() == 0 || attr.PathMTU > d.activeMTU {
			return fmt.Errorf("%w: path MTU %v (the port's active MTU is %v)", ErrInvalidArgument, attr.PathMTU, d.activeMTU)
		}
	}
	if mask&QPAttrAV != 0 {
		g := attr.AH.DGID.Unmap()
		if !g.IsValid() || g.IsUnspecified() || g.Is4() != d.addr.Is4() {
			return fmt.Errorf("%w: destination GID %v (the device is on %v)", ErrInvalidArgument, attr.AH.DGID, d.addr)
		}
		if attr.AH.SGIDIndex != 0 && attr.AH.SGIDIndex != 1 {
			return fmt.Errorf("%w: source GID index %d", ErrInvalidArgument, attr.AH.SGIDIndex)
		}
	}
	if mask&QPAttrDestQPN != 0 && (attr.DestQPN == 0 || attr.DestQPN > packet.QPNMask) {
		return fmt.Errorf("%w: destination QPN %#x", ErrInvalidArgument, attr.DestQPN)
	}
	if mask&QPAttrTimeout != 0 && attr.Timeout > 31 {
		return fmt.Errorf("%w: timeout %d", ErrInvalidArgument, attr.Timeout)
	}
	if mask&QPAttrRetryCnt != 0 && attr.RetryCnt > 7 {
		return fmt.Errorf("%w: retry_cnt %d", ErrInvalidArgument, attr.RetryCnt)
	}
	if mask&QPAttrRNRRetry != 0 && attr.RNRRetry > 7 {
		return fmt.Errorf("%w: rnr_retry %d", ErrInvalidArgument, attr.RNRRetry)
	}
	if mask&QPAttrMinRNRTimer != 0 && attr.MinRNRTimer > 31 {
		return fmt.Errorf("%w: min_rnr_timer %d", ErrInvalidArgument, attr.MinRNRTimer)
	}
	if mask&QPAttrMaxQPRdAtomic != 0 && (attr.MaxRdAtomic < 0 || attr.MaxRdAtomic > d.attr.MaxQPInitRdAtom) {
		return fmt.Errorf("%w: max_rd_atomic %d (max %d)", ErrInvalidArgument, attr.MaxRdAtomic, d.attr.MaxQPInitRdAtom)
	}
	if mask&QPAttrMaxDestRdAtomic != 0 && (attr.MaxDestRdAtomic < 0 || attr.MaxDestRdAtomic > d.attr.MaxQPRdAtom) {
		return fmt.Errorf("%w: max_dest_rd_atomic %d (max %d)", ErrInvalidArgument, attr.MaxDestRdAtomic, d.attr.MaxQPRdAtom)
	}
	return nil
}
