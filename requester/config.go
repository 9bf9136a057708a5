package requester

import (
	"errors"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Defaults and limits.
const (
	// DefaultWindow is the default Config.Window: at most this many PSNs
	// may be outstanding (sent and not acknowledged), rxe's
	// RXE_MAX_UNACKED_PSNS.
	DefaultWindow = 128

	// DefaultAckReqEvery is the default Config.AckReqEvery: besides the
	// last packet of every message, every 64th packet carries AckReq, rxe's
	// RXE_MAX_PKT_PER_ACK.
	DefaultAckReqEvery = 64

	// DefaultCreditProbe is the wait before the credit probe when
	// Config.CreditProbe is 0 and the QP has no local ACK timeout
	// (timeout 0 means infinite).
	DefaultCreditProbe = 100 * time.Millisecond

	// MaxMessage is the longest message a work request may describe: the
	// RETH DMA length rxe accepts (2^31 bytes).
	MaxMessage = 1 << 31

	// maxHeaders bounds the header, pad and ICRC bytes of any request
	// packet: BTH 12 + AtomicETH 28 = 40 is the longest header set, plus 3
	// pad and 4 ICRC bytes.
	maxHeaders = 64
)

// Config describes the send side of one RC queue pair: the QP attributes of
// the RTR→RTS transition that the requester needs, and the sizes of the
// send queue to preallocate.
type Config struct {
	// QPN is this QP's number (reported in completions); DestQPN the
	// peer's, written in every BTH.
	QPN, DestQPN uint32
	// PMTU is the path MTU in bytes: 256, 512, 1024, 2048 or 4096.
	PMTU int
	// SQPSN is the first PSN to send (the sq_psn attribute).
	SQPSN packet.PSN
	// Timeout is the local ACK timeout exponent t: the retransmit timer is
	// 4.096 µs × 2^t (retry.AckTimeout); 0 disables it.
	Timeout uint8
	// RetryCnt is the retry_cnt attribute, 0..7: retries after a timeout
	// or PSN sequence error NAK.
	RetryCnt uint8
	// RNRRetry is the rnr_retry attribute, 0..7; 7 means infinite.
	RNRRetry uint8
	// MaxRdAtomic is how many READ/atomic WQEs may be outstanding, and
	// how many READ and atomic requests, a READ asked for in parts
	// (MaxReadPkts) counting one per part in flight: the max_rd_atomic
	// attribute, which must not exceed the peer's max_dest_rd_atomic.
	// With 0, READ and atomic work requests are refused by Post.
	MaxRdAtomic int
	// PKey is the partition key written in every BTH.
	PKey uint16
	// Pseudo is the IP/UDP pseudo-header of the packets this QP sends,
	// covered by their ICRC.
	Pseudo packet.PseudoHeader
	// SigAll is the sq_sig_all attribute: complete every WR, signaled or
	// not.
	SigAll bool
	// MaxWR, MaxSGE and MaxInline size the send queue: at most MaxWR WQE
	// slots (allocated as they are first needed), SGEs per WQE and inline
	// data bytes per WQE. MaxWR and MaxSGE below 1 count as 1.
	MaxWR, MaxSGE, MaxInline int
	// Credits makes the requester honour the end-to-end credits the peer
	// advertises in its ACK AETHs (IBA 9.7.7.2.5). A message that consumes
	// a receive WQE (SEND, RDMA WRITE WITH IMMEDIATE) starts only while its
	// SSN ≤ LSN (MSN + credits of the newest AETH). The one message
	// beyond the limit that IBA allows (SSN = LSN + 1, the probe; rdmavt
	// sends it at once) goes only before any credit was advertised or after
	// CreditProbe without a credit update: a responder that sends credit
	// updates when receive WQEs are posted (ours does) then never draws an
	// RNR NAK, and a lost update costs one probe. Credit code 31 (invalid)
	// lifts the limit for good (rdmavt rvt_get_credit). Kernel rxe ignores
	// credits and relies on RNR NAKs.
	Credits bool
	// CreditProbe is how long a requester blocked by credits waits for a
	// credit update before it sends the probe; 0 selects the local ACK
	// timeout, or DefaultCreditProbe if that is infinite.
	CreditProbe time.Duration
	// Window is the most PSNs that may be outstanding; 0 selects
	// DefaultWindow.
	Window int
	// MaxReadPkts splits a READ work request whose response would be
	// longer than this many packets into READ requests of at most this
	// many packets each (the requester's own receive buffer holds no
	// more); each asks for the next part once the PSN window has room for
	// it. 0 sends every READ as one request, as rxe does.
	MaxReadPkts int
	// Recovery tunes loss recovery in round trips: the RTT estimate, the
	// recovery timer and tail-loss probe, the adaptive window.
	Recovery RecoveryConfig
	// AckReqEvery sets AckReq on every n-th packet without one, besides
	// the last packet of every message; 0 selects DefaultAckReqEvery. It is
	// capped at Window so that a full window always asks for an ACK.
	AckReqEvery int
	// SelectiveRepeat says the peer's responder negotiated selective
	// repeat (docs/recovery.md): it buffers out-of-order requests and
	// reports holes with packet.NAKSelectiveRepeat, so the requester
	// resends only the reported PSNs, and it places READ responses out of
	// order and re-reads only the missing ranges. False is IBTA go-back-N,
	// what kernel rxe and NICs expect.
	SelectiveRepeat bool
	// PeerOOOLimit is the byte bound of the peer responder's out-of-order
	// buffer under SelectiveRepeat (its offer, rxe.ConnInfo.OOOLimit); 0
	// selects packet.DefaultOOOLimit. The requester sends at most
	// packet.OOOPackets(PeerOOOLimit, PMTU) PSNs (at least Window) past the
	// last request it knows executed, and counts the packets the responder
	// reports received as no longer in flight, so that a window of new
	// packets stays in flight while a hole is repaired.
	PeerOOOLimit int
}

// Memory gives the requester access to local memory regions.
type Memory interface {
	// Local returns the length bytes at addr of the memory region whose
	// L_Key is lkey, if the region holds them and grants the access need
	// (0 to read it for sending, verbs.AccessLocalWrite to place read
	// responses and atomic results). The slice must be exactly length
	// bytes long.
	Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool)
}

// Completions receives send work completions, in send queue order.
type Completions interface {
	// Complete posts wc (which the requester reuses after the call) and
	// reports false if the completion queue overflowed.
	Complete(wc *verbs.WC) bool
}

// Errors returned by Post.
var (
	// ErrQueueFull: the send queue holds MaxWR outstanding WQEs.
	ErrQueueFull = errors.New("requester: send queue full")
	// ErrUnsupportedOpcode: the opcode is not one this send queue sends: on
	// RC LOCAL_INV, BIND_MW, TSO, FLUSH or an unknown one; on UC anything
	// but SEND and RDMA WRITE; on UD anything but SEND (with or without
	// immediate data).
	ErrUnsupportedOpcode = errors.New("requester: opcode not supported by this send queue")
	// ErrTooManySGE: the SGE list is longer than MaxSGE.
	ErrTooManySGE = errors.New("requester: more SGEs than max_send_sge")
	// ErrInlineTooLong: the inline data is longer than MaxInline.
	ErrInlineTooLong = errors.New("requester: inline data longer than max_inline_data")
	// ErrInlineNotAllowed: SendInline on a READ or atomic work request.
	ErrInlineNotAllowed = errors.New("requester: inline data only for SEND, RDMA WRITE and ATOMIC_WRITE")
	// ErrAtomicLength: an atomic work request whose local buffer is not
	// exactly 8 bytes.
	ErrAtomicLength = errors.New("requester: atomic operation needs exactly 8 bytes of local buffer")
	// ErrAtomicAlign: an atomic remote address not 8-byte aligned.
	ErrAtomicAlign = errors.New("requester: atomic remote address not 8-byte aligned")
	// ErrMessageTooLong: the message is longer than MaxMessage.
	ErrMessageTooLong = errors.New("requester: message longer than 2^31 bytes")
	// ErrReadPSNSpan: a READ whose responses would take 2^23 PSNs or more,
	// half the 24-bit PSN space (2^31 bytes at a PMTU of 256): PSN
	// comparison (IBA 9.7.1) cannot order a span that long.
	ErrReadPSNSpan = errors.New("requester: READ needs 2^23 response PSNs or more at this path MTU; use a larger MTU or a shorter READ")
	// ErrNoRdAtomic: a READ or atomic work request on a QP whose
	// max_rd_atomic is 0.
	ErrNoRdAtomic = errors.New("requester: READ/atomic posted with max_rd_atomic 0")
)

// Counters are the requester's statistics. The names follow the kernel
// rxe counters (hw_counters in sysfs) where one exists.
type Counters struct {
	PacketsSent uint64 // request packets built, retransmissions included
	BytesSent   uint64 // request packet bytes, BTH through ICRC
	PayloadSent uint64 // payload bytes in request packets
	Retransmits uint64 // request packets whose PSN had been sent before
	Timeouts    uint64 // retransmit timer expiries (not spurious firings)

	ResponsesRcvd    uint64 // packets given to Receive
	ResponsesDropped uint64 // responses ignored: stale, duplicate, out of order, or not a response
	ReadBytes        uint64 // read response payload bytes placed

	RcvdSeqErr          uint64 // rcvd_seq_err: PSN sequence error NAKs
	RcvdRNRErr          uint64 // rcvd_rnr_err: RNR NAKs
	ReadGaps            uint64 // READ responses past a missing one (the first of an episode starts a re-read at once)
	CompleterRetryErr   uint64 // completer_retry_err: go-back-N retries started
	RetryDoubled        uint64 // retry_doubled: go-back-N retries whose first packet went twice (doubleResend)
	RetryExceededErr    uint64 // retry_exceeded_err: retry_cnt exhausted
	RNRRetryExceededErr uint64 // retry_rnr_exceeded_err: rnr_retry exhausted
	RDMASends           uint64 // rdma_sends: SEND WQEs completed, in error too but not flushed (rxe do_complete)

	CreditStalls  uint64 // times a message waited for end-to-end credits
	CreditProbes  uint64 // messages sent as the credit probe (SSN = LSN + 1)
	CreditUpdates uint64 // AETHs that raised the limit sequence number

	Recovery RecoveryCounters // RTT estimate, recovery timer, probes, window

	SRHolesReceived    uint64 // sr_holes_received: selective-repeat hole reports received
	SRHolesIgnored     uint64 // hole reports ignored: PSNs never sent, or none outstanding
	SRPacketsResent    uint64 // sr_packets_resent: packets resent under selective repeat (READ re-reads included)
	ReadHoleRereads    uint64 // read_holes_rereads: READ requests for a missing range (selective repeat, and go-back-N's re-reads of the oldest READ's rest, readahead.go)
	ReadRereadsLost    uint64 // read_rereads_lost: go-back-N retries of the oldest READ's hole whose answer was found lost (a response stream that starts over passed the hole, replayPassedHole), asked for again at once
	ReadResponsesAhead uint64 // READ responses placed for a READ after the oldest one while that one was repaired (go-back-N, readahead.go)
	SRResendsLost      uint64 // resends found lost and sent again: still unacknowledged an interval later (srRecheck), named missing again by a report that shows packets sent after the resend received (srResendLost), or a re-read's response missing after later re-reads, later PSNs of the same one or requests sent after it were answered (srStreamsLost)
	SRProgressReceived uint64 // sr_progress_received: progress reports (hole reports naming no hole) taken
	SRReadRequestsLost uint64 // sr_read_requests_lost: READ parts re-read because no response followed the requests before them (srWatchRead)
	SRReadRequestsSlow uint64 // sr_read_requests_slow: of those, the re-reads answered sooner than a round trip (the request was only slow)

	Completions uint64 // work completions posted
	CQOverflow  uint64 // completions the CQ refused
	LocalErrors uint64 // WQEs failed by a local error (bad L_Key or access)
}
