package verbs

import (
	"net/netip"
	"strconv"
)

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus uint8

// Work completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRDReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

var wcStatusNames = [...]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
	"MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
	"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR",
	"REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

// String returns the status name as enum ibv_wc_status spells it without
// the IBV_WC_ prefix, e.g. "WR_FLUSH_ERR".
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "WC_STATUS_" + strconv.Itoa(int(s))
}

// WCOpcode is the opcode of a work completion (enum ibv_wc_opcode).
type WCOpcode uint8

// Work completion opcodes. Receive completions have bit 7 set.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCFlush           WCOpcode = 8
	WCAtomicWrite     WCOpcode = 9
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

var wcOpcodeNames = map[WCOpcode]string{
	WCSend: "SEND", WCRDMAWrite: "RDMA_WRITE", WCRDMARead: "RDMA_READ", WCCompSwap: "COMP_SWAP",
	WCFetchAdd: "FETCH_ADD", WCBindMW: "BIND_MW", WCLocalInv: "LOCAL_INV", WCTSO: "TSO",
	WCFlush: "FLUSH", WCAtomicWrite: "ATOMIC_WRITE", WCRecv: "RECV", WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

// String names the opcode as enum ibv_wc_opcode does without the prefix.
func (o WCOpcode) String() string {
	if n, ok := wcOpcodeNames[o]; ok {
		return n
	}
	return "WC_OPCODE_" + strconv.Itoa(int(o))
}

// IsRecv reports whether the opcode is a receive completion.
func (o WCOpcode) IsRecv() bool { return o&0x80 != 0 }

// WCOpcodeOf returns the completion opcode of a send work request opcode.
func WCOpcodeOf(op WROpcode) WCOpcode {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRSend, WRSendWithImm, WRSendWithInv:
		return WCSend
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	case WRLocalInv:
		return WCLocalInv
	case WRBindMW:
		return WCBindMW
	case WRTSO:
		return WCTSO
	case WRFlush:
		return WCFlush
	case WRAtomicWrite:
		return WCAtomicWrite
	}
	return WCOpcode(0xFF)
}

// WCFlags qualify a work completion (enum ibv_wc_flags).
type WCFlags uint8

// Work completion flags.
const (
	WCFlagGRH      WCFlags = 1 << 0
	WCFlagWithImm  WCFlags = 1 << 1
	WCFlagIPCsumOK WCFlags = 1 << 2
	WCFlagWithInv  WCFlags = 1 << 3
)

// WC is a work completion (struct ibv_wc). In an error completion only ID,
// Status, Opcode (for send completions) and QPNum are meaningful.
type WC struct {
	ID     uint64
	Status WCStatus
	Opcode WCOpcode
	// VendorErr carries extra detail for an error status (gorxe uses the
	// AETH syndrome of a NAK that caused it, or 0).
	VendorErr uint32
	// ByteLen is the number of bytes transferred: placed in the receive
	// buffer for a receive, the message length for SEND and RDMA READ, the
	// write's length for a receive of RDMA WRITE WITH IMM.
	ByteLen uint32
	// Imm is the immediate data (Flags has WCFlagWithImm) or the
	// invalidated R_Key (Flags has WCFlagWithInv).
	Imm       uint32
	QPNum     uint32
	SrcQP     uint32
	Flags     WCFlags
	PKeyIndex uint16
	// Src is where a UD receive came from: the sender's IP address and
	// UDP port (the GRH area of the buffer holds its IP header as well).
	Src netip.AddrPort
}

// AsyncEventType is an asynchronous event (enum ibv_event_type).
type AsyncEventType uint8

// Asynchronous events.
const (
	EventCQErr            AsyncEventType = 0
	EventQPFatal          AsyncEventType = 1
	EventQPReqErr         AsyncEventType = 2
	EventQPAccessErr      AsyncEventType = 3
	EventCommEst          AsyncEventType = 4
	EventSQDrained        AsyncEventType = 5
	EventPathMig          AsyncEventType = 6
	EventPathMigErr       AsyncEventType = 7
	EventDeviceFatal      AsyncEventType = 8
	EventPortActive       AsyncEventType = 9
	EventPortErr          AsyncEventType = 10
	EventLIDChange        AsyncEventType = 11
	EventPKeyChange       AsyncEventType = 12
	EventSMChange         AsyncEventType = 13
	EventSRQErr           AsyncEventType = 14
	EventSRQLimitReached  AsyncEventType = 15
	EventQPLastWQEReached AsyncEventType = 16
	EventClientReregister AsyncEventType = 17
	EventGIDChange        AsyncEventType = 18
)

var eventNames = [...]string{
	"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED", "PATH_MIG",
	"PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE",
	"SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE",
}

// String names the event as enum ibv_event_type does without the prefix.
func (e AsyncEventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "EVENT_" + strconv.Itoa(int(e))
}

// MTU is an IB path MTU enum (enum ibv_mtu): 1 = 256 bytes ... 5 = 4096.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid enum.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the largest IB MTU not above n bytes, or 0 if n < 256.
func MTUFromBytes(n int) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m
		}
	}
	return 0
}

// String prints the MTU in bytes.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return strconv.Itoa(b)
	}
	return "MTU_" + strconv.Itoa(int(m))
}
