// Package verbs is gorxe's shared vocabulary: the enums and plain structs of
// the verbs model (libibverbs' verbs.h, IBA chapter 11) that the device
// (package rxe) and the sans-IO transport engines (packages requester and
// responder) exchange. Numeric values equal libibverbs' so that statuses and
// opcodes compare and print like C tools. It holds no behaviour; users see
// these types re-exported by package rxe.
package verbs

import (
	"net/netip"
	"strconv"
)

// QPState is a queue pair state (IBA 10.3.1; enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state's name as ibv_qp_state spells it without prefix.
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPS_" + strconv.Itoa(int(s))
}

// QPType is a transport service type (enum ibv_qp_type).
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// String names the QP type.
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return "QPT_" + strconv.Itoa(int(t))
}

// AccessFlags are memory region and QP access rights (enum ibv_access_flags).
type AccessFlags uint32

// Access flags.
const (
	AccessLocalWrite      AccessFlags = 1 << 0
	AccessRemoteWrite     AccessFlags = 1 << 1
	AccessRemoteRead      AccessFlags = 1 << 2
	AccessRemoteAtomic    AccessFlags = 1 << 3
	AccessMWBind          AccessFlags = 1 << 4
	AccessZeroBased       AccessFlags = 1 << 5
	AccessOnDemand        AccessFlags = 1 << 6
	AccessHugeTLB         AccessFlags = 1 << 7
	AccessFlushGlobal     AccessFlags = 1 << 8
	AccessFlushPersistent AccessFlags = 1 << 9

	// AccessRemote is every remote access right.
	AccessRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessFlushGlobal | AccessFlushPersistent
)

// WROpcode is a send work request opcode (enum ibv_wr_opcode).
type WROpcode uint8

// Send work request opcodes.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	WRTSO               WROpcode = 10
	WRFlush             WROpcode = 14
	WRAtomicWrite       WROpcode = 15
)

var wrOpcodeNames = map[WROpcode]string{
	WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ", WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", WRLocalInv: "LOCAL_INV", WRBindMW: "BIND_MW",
	WRSendWithInv: "SEND_WITH_INV", WRTSO: "TSO", WRFlush: "FLUSH", WRAtomicWrite: "ATOMIC_WRITE",
}

// String names the opcode as ibv_wr_opcode does, without the IBV_WR_ prefix.
func (o WROpcode) String() string {
	if n, ok := wrOpcodeNames[o]; ok {
		return n
	}
	return "WR_" + strconv.Itoa(int(o))
}

// IsReadOrAtomic reports whether the opcode needs a responder resource
// (max_rd_atomic slot): RDMA READ, the atomics, FLUSH and ATOMIC_WRITE.
func (o WROpcode) IsReadOrAtomic() bool {
	switch o {
	case WRRDMARead, WRAtomicCmpAndSwp, WRAtomicFetchAndAdd, WRFlush, WRAtomicWrite:
		return true
	}
	return false
}

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
	SendIPCsum    SendFlags = 1 << 4
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at Addr in
// the memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr, without the list link:
// PostSend takes a slice).
type SendWR struct {
	ID     uint64
	SGList []SGE
	Opcode WROpcode
	Flags  SendFlags
	// Imm is the immediate data (SEND_WITH_IMM, RDMA_WRITE_WITH_IMM), opaque
	// and carried in network byte order as ImmDt shows it.
	Imm uint32
	// InvalidateRKey is the R_Key a SEND_WITH_INV invalidates at the peer.
	InvalidateRKey uint32
	// RemoteAddr and RKey address the peer's memory for RDMA and atomic
	// operations.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare operand of ATOMIC_CMP_AND_SWP and the add
	// operand of ATOMIC_FETCH_AND_ADD; Swap is the swap operand.
	CompareAdd uint64
	Swap       uint64
	// InlineData, when Flags has SendInline, is the payload itself (copied
	// at post time); SGList must then be empty, and InlineData is empty
	// without SendInline: PostSend refuses a WR that gives its payload
	// both ways or in the field its flag does not name.
	InlineData []byte
	// AH, RemoteQPN and RemoteQKey address a UD send (wr.ud of struct
	// ibv_send_wr): where the datagram goes, the destination QP and its
	// Q_Key. A RemoteQKey with the high-order bit set (controlled) is
	// replaced by the sending QP's own Q_Key (IBA 10.2.5).
	AH         AddressHandle
	RemoteQPN  uint32
	RemoteQKey uint32
}

// AddressHandle is the destination of a UD work request (struct ibv_ah):
// the IP address and UDP port its datagrams go to, and the IP traffic
// class they carry (0: the sending device's). rxe's address handles
// implement it.
type AddressHandle interface {
	Dest() netip.AddrPort
	TrafficClass() uint8
}

// Length returns the message length of the WR: the inline data length or
// the sum of the SGE lengths.
func (wr *SendWR) Length() uint64 {
	if wr.Flags&SendInline != 0 {
		return uint64(len(wr.InlineData))
	}
	var n uint64
	for _, s := range wr.SGList {
		n += uint64(s.Length)
	}
	return n
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID     uint64
	SGList []SGE
}

// Length returns the total buffer length of the WR.
func (wr *RecvWR) Length() uint64 {
	var n uint64
	for _, s := range wr.SGList {
		n += uint64(s.Length)
	}
	return n
}
