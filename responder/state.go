package responder

import "strconv"

// State is a state of the responder's state machine. The states and their
// names mirror enum resp_states of rxe_resp.c (RESPST_*); the error states
// say which NAK and which completion status they produce.
type State uint8

// Responder states.
const (
	// StateNone: no state (the zero value).
	StateNone State = iota
	// StateGetReq takes the request packet (rxe get_req); a failed or
	// flushed responder drops it here.
	StateGetReq
	// StateCheckPSN compares the PSN with the expected PSN (check_psn).
	StateCheckPSN
	// StateCheckOpSeq checks FIRST/MIDDLE/LAST ordering (check_op_seq).
	StateCheckOpSeq
	// StateCheckOpValid checks the QP's access flags (check_op_valid).
	StateCheckOpValid
	// StateCheckResource takes a receive WQE or checks that responder
	// resources exist (check_resource).
	StateCheckResource
	// StateCheckLength checks payload and DMA lengths (check_length).
	StateCheckLength
	// StateCheckRKey validates R_Key, range and rights (check_rkey).
	StateCheckRKey
	// StateExecute places data and updates MSN and ePSN (execute).
	StateExecute
	// StateReadReply accepts or replays an RDMA READ and queues its
	// response train (read_reply).
	StateReadReply
	// StateAtomicReply executes or replays COMPARE_SWAP/FETCH_ADD
	// (atomic_reply).
	StateAtomicReply
	// StateAtomicWriteReply executes or replays ATOMIC_WRITE
	// (atomic_write_reply).
	StateAtomicWriteReply
	// StateProcessFlush executes or replays FLUSH (process_flush).
	StateProcessFlush
	// StateComplete posts the receive completion (do_complete).
	StateComplete
	// StateAcknowledge queues the ACK, NAK, ATOMIC ACKNOWLEDGE or empty
	// READ RESPONSE ONLY (acknowledge).
	StateAcknowledge
	// StateCleanup releases the packet (cleanup).
	StateCleanup
	// StateDuplicateRequest handles a PSN before the expected one
	// (duplicate_request).
	StateDuplicateRequest
	// StateErrMalformedWQE: a receive SGE cannot be written (bad L_Key).
	// NAK Remote Operational Error, LOC_QP_OP_ERR, QP to ERR (class A).
	StateErrMalformedWQE
	// StateErrUnsupportedOpcode: the QP's access flags do not allow the
	// operation. NAK Invalid Request, REM_INV_REQ_ERR, QP to ERR (class C).
	StateErrUnsupportedOpcode
	// StateErrMisalignedAtomic: atomic VA (or its host address) not 8-byte
	// aligned. NAK Invalid Request, REM_INV_REQ_ERR, QP to ERR (class C).
	StateErrMisalignedAtomic
	// StateErrPSNOutOfSeq: PSN after the expected PSN. One NAK PSN
	// Sequence Error carrying the expected PSN; the QP stays up (class B).
	StateErrPSNOutOfSeq
	// StateErrMissingOpcodeFirst: MIDDLE or LAST without FIRST. NAK Invalid
	// Request, REM_INV_REQ_ERR, QP to ERR (class C).
	StateErrMissingOpcodeFirst
	// StateErrMissingOpcodeLastC: a new message inside an unfinished one.
	// NAK Invalid Request, REM_INV_REQ_ERR, QP to ERR (class C).
	StateErrMissingOpcodeLastC
	// StateErrTooManyRDMAAtmReq: READ/atomic with max_dest_rd_atomic = 0.
	// NAK Invalid Request, REM_INV_REQ_ERR, QP to ERR (class C).
	StateErrTooManyRDMAAtmReq
	// StateErrRNR: no receive WQE. RNR NAK with min_rnr_timer; the packet
	// is dropped and the QP stays up (class B).
	StateErrRNR
	// StateErrRKeyViolation: R_Key, range or MR rights check failed. NAK
	// Remote Access Error, REM_ACCESS_ERR, QP to ERR (class C).
	StateErrRKeyViolation
	// StateErrInvalidateRKey: SEND_WITH_INV named an R_Key that cannot be
	// invalidated. ACK as usual, REM_INV_REQ_ERR, QP to ERR (class J).
	StateErrInvalidateRKey
	// StateErrLength: a length rule of IBA 9.7.5.1 / rxe check_length or a
	// receive buffer overflow. NAK Invalid Request; REM_INV_REQ_ERR
	// (LOC_LEN_ERR for a receive buffer overflow); QP to ERR (class C).
	StateErrLength
	// StateErrCQOverflow: the receive CQ was full. No NAK; QP to ERR
	// (class G).
	StateErrCQOverflow
	// StateError moves the responder to its failed state (Failed reports it).
	StateError
	// StateDone ends the processing of a packet.
	StateDone
	// StateExit ends a pass with nothing processed.
	StateExit

	numStates
)

var stateNames = [numStates]string{
	StateNone:                  "NONE",
	StateGetReq:                "GET_REQ",
	StateCheckPSN:              "CHK_PSN",
	StateCheckOpSeq:            "CHK_OP_SEQ",
	StateCheckOpValid:          "CHK_OP_VALID",
	StateCheckResource:         "CHK_RESOURCE",
	StateCheckLength:           "CHK_LENGTH",
	StateCheckRKey:             "CHK_RKEY",
	StateExecute:               "EXECUTE",
	StateReadReply:             "READ_REPLY",
	StateAtomicReply:           "ATOMIC_REPLY",
	StateAtomicWriteReply:      "ATOMIC_WRITE_REPLY",
	StateProcessFlush:          "PROCESS_FLUSH",
	StateComplete:              "COMPLETE",
	StateAcknowledge:           "ACKNOWLEDGE",
	StateCleanup:               "CLEANUP",
	StateDuplicateRequest:      "DUPLICATE_REQUEST",
	StateErrMalformedWQE:       "ERR_MALFORMED_WQE",
	StateErrUnsupportedOpcode:  "ERR_UNSUPPORTED_OPCODE",
	StateErrMisalignedAtomic:   "ERR_MISALIGNED_ATOMIC",
	StateErrPSNOutOfSeq:        "ERR_PSN_OUT_OF_SEQ",
	StateErrMissingOpcodeFirst: "ERR_MISSING_OPCODE_FIRST",
	StateErrMissingOpcodeLastC: "ERR_MISSING_OPCODE_LAST_C",
	StateErrTooManyRDMAAtmReq:  "ERR_TOO_MANY_RDMA_ATM_REQ",
	StateErrRNR:                "ERR_RNR",
	StateErrRKeyViolation:      "ERR_RKEY_VIOLATION",
	StateErrInvalidateRKey:     "ERR_INVALIDATE_RKEY_VIOLATION",
	StateErrLength:             "ERR_LENGTH",
	StateErrCQOverflow:         "ERR_CQ_OVERFLOW",
	StateError:                 "ERROR",
	StateDone:                  "DONE",
	StateExit:                  "EXIT",
}

// String returns rxe's name of the state without the RESPST_ prefix, for
// example "CHK_PSN", or "STATE_n" for an unknown value.
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "STATE_" + strconv.Itoa(int(s))
}
