package rxe

import (
	"errors"

	"github.com/gorxe/gorxe/rxe/verbs"
)

// Re-exported vocabulary from package rxe/verbs, so users import only rxe.
type (
	// QPState is a queue pair state.
	QPState = verbs.QPState
	// QPType is a QP transport type.
	QPType = verbs.QPType
	// AccessFlags are memory and QP access rights.
	AccessFlags = verbs.AccessFlags
	// WROpcode is a send work request opcode.
	WROpcode = verbs.WROpcode
	// SendFlags modify a send work request.
	SendFlags = verbs.SendFlags
	// SGE is a scatter/gather element.
	SGE = verbs.SGE
	// SendWR is a send work request.
	SendWR = verbs.SendWR
	// RecvWR is a receive work request.
	RecvWR = verbs.RecvWR
	// AddressHandle is what a UD SendWR's AH field takes: *AddrHandle
	// implements it.
	AddressHandle = verbs.AddressHandle
	// WC is a work completion.
	WC = verbs.WC
	// WCStatus is a work completion status.
	WCStatus = verbs.WCStatus
	// WCOpcode is a work completion opcode.
	WCOpcode = verbs.WCOpcode
	// WCFlags qualify a work completion.
	WCFlags = verbs.WCFlags
	// AsyncEventType is an asynchronous event type.
	AsyncEventType = verbs.AsyncEventType
	// MTU is an IB path MTU enum.
	MTU = verbs.MTU
)

// Re-exported constants: the whole vocabulary of package rxe/verbs (see
// it for their documentation), including the values the engines produce
// and gorxe does not post itself (WCBadRespErr, WCGeneralErr, the FLUSH and
// ATOMIC_WRITE opcodes). TestVerbsReexported keeps the list complete.
const (
	QPSReset = verbs.QPSReset
	QPSInit  = verbs.QPSInit
	QPSRTR   = verbs.QPSRTR
	QPSRTS   = verbs.QPSRTS
	QPSSQD   = verbs.QPSSQD
	QPSSQE   = verbs.QPSSQE
	QPSErr   = verbs.QPSErr

	QPTypeRC = verbs.QPTypeRC
	QPTypeUC = verbs.QPTypeUC
	QPTypeUD = verbs.QPTypeUD

	AccessLocalWrite      = verbs.AccessLocalWrite
	AccessRemoteWrite     = verbs.AccessRemoteWrite
	AccessRemoteRead      = verbs.AccessRemoteRead
	AccessRemoteAtomic    = verbs.AccessRemoteAtomic
	AccessMWBind          = verbs.AccessMWBind
	AccessZeroBased       = verbs.AccessZeroBased
	AccessOnDemand        = verbs.AccessOnDemand
	AccessHugeTLB         = verbs.AccessHugeTLB
	AccessFlushGlobal     = verbs.AccessFlushGlobal
	AccessFlushPersistent = verbs.AccessFlushPersistent
	AccessRemote          = verbs.AccessRemote

	WRRDMAWrite         = verbs.WRRDMAWrite
	WRRDMAWriteWithImm  = verbs.WRRDMAWriteWithImm
	WRSend              = verbs.WRSend
	WRSendWithImm       = verbs.WRSendWithImm
	WRRDMARead          = verbs.WRRDMARead
	WRAtomicCmpAndSwp   = verbs.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = verbs.WRAtomicFetchAndAdd
	WRLocalInv          = verbs.WRLocalInv
	WRBindMW            = verbs.WRBindMW
	WRSendWithInv       = verbs.WRSendWithInv
	WRTSO               = verbs.WRTSO
	WRFlush             = verbs.WRFlush
	WRAtomicWrite       = verbs.WRAtomicWrite

	SendFence     = verbs.SendFence
	SendSignaled  = verbs.SendSignaled
	SendSolicited = verbs.SendSolicited
	SendInline    = verbs.SendInline
	SendIPCsum    = verbs.SendIPCsum

	WCSuccess        = verbs.WCSuccess
	WCLocLenErr      = verbs.WCLocLenErr
	WCLocQPOpErr     = verbs.WCLocQPOpErr
	WCLocEECOpErr    = verbs.WCLocEECOpErr
	WCLocProtErr     = verbs.WCLocProtErr
	WCWRFlushErr     = verbs.WCWRFlushErr
	WCMWBindErr      = verbs.WCMWBindErr
	WCBadRespErr     = verbs.WCBadRespErr
	WCLocAccessErr   = verbs.WCLocAccessErr
	WCRemInvReqErr   = verbs.WCRemInvReqErr
	WCRemAccessErr   = verbs.WCRemAccessErr
	WCRemOpErr       = verbs.WCRemOpErr
	WCRetryExcErr    = verbs.WCRetryExcErr
	WCRNRRetryExcErr = verbs.WCRNRRetryExcErr
	WCLocRDDViolErr  = verbs.WCLocRDDViolErr
	WCRemInvRDReqErr = verbs.WCRemInvRDReqErr
	WCRemAbortErr    = verbs.WCRemAbortErr
	WCInvEECNErr     = verbs.WCInvEECNErr
	WCInvEECStateErr = verbs.WCInvEECStateErr
	WCFatalErr       = verbs.WCFatalErr
	WCRespTimeoutErr = verbs.WCRespTimeoutErr
	WCGeneralErr     = verbs.WCGeneralErr

	WCSend            = verbs.WCSend
	WCRDMAWrite       = verbs.WCRDMAWrite
	WCRDMARead        = verbs.WCRDMARead
	WCCompSwap        = verbs.WCCompSwap
	WCFetchAdd        = verbs.WCFetchAdd
	WCBindMW          = verbs.WCBindMW
	WCLocalInv        = verbs.WCLocalInv
	WCTSO             = verbs.WCTSO
	WCFlush           = verbs.WCFlush
	WCAtomicWrite     = verbs.WCAtomicWrite
	WCRecv            = verbs.WCRecv
	WCRecvRDMAWithImm = verbs.WCRecvRDMAWithImm

	WCFlagGRH      = verbs.WCFlagGRH
	WCFlagWithImm  = verbs.WCFlagWithImm
	WCFlagIPCsumOK = verbs.WCFlagIPCsumOK
	WCFlagWithInv  = verbs.WCFlagWithInv

	MTU256  = verbs.MTU256
	MTU512  = verbs.MTU512
	MTU1024 = verbs.MTU1024
	MTU2048 = verbs.MTU2048
	MTU4096 = verbs.MTU4096
)

// Errors returned by verbs calls. Calls wrap them with detail; test with
// errors.Is.
var (
	// ErrInvalidArgument: a bad argument (the message says which).
	ErrInvalidArgument = errors.New("rxe: invalid argument")
	// ErrInvalidState: the object is not in a state that allows the call
	// (e.g. PostSend below RTS, an illegal QP transition).
	ErrInvalidState = errors.New("rxe: invalid state")
	// ErrNoResources: a queue or table is full or a device limit is hit.
	ErrNoResources = errors.New("rxe: out of resources")
	// ErrInUse: the object still has dependents (e.g. a PD with MRs).
	ErrInUse = errors.New("rxe: object in use")
	// ErrClosed: the device or object has been closed or destroyed.
	ErrClosed = errors.New("rxe: closed")
)
