package responder

import (
	"math"
	"time"

	"github.com/gorxe/gorxe/internal/ring"
	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Config is the responder's view of the QP attributes. New copies it; a
// Modify QP changes the attributes that may change after RTR through the
// setters (SetMinRNRTimer, SetAccess, SetPath).
type Config struct {
	// QPN is the local QP number; DestQPN the peer's, put in the BTH
	// DestQP of every response.
	QPN, DestQPN uint32
	// PMTU is the path MTU in bytes: 256, 512, 1024, 2048 or 4096.
	PMTU int
	// RQPSN is the expected PSN at start (rq_psn, INIT->RTR).
	RQPSN packet.PSN
	// MinRNRTimer is the 5-bit RNR timer code put in RNR NAKs.
	MinRNRTimer uint8
	// MaxDestRdAtomic is the number of responder resources: how many
	// READ/atomic/FLUSH/ATOMIC_WRITE requests are remembered for replay.
	// Zero makes every such request an Invalid Request.
	MaxDestRdAtomic int
	// Access is the QP's remote access flags (qp_access_flags).
	Access verbs.AccessFlags
	// PKey is the BTH P_Key of the responses.
	PKey uint16
	// Pseudo is the ICRC pseudo-header of the packets the responder sends
	// (source = this port, destination = the peer, UDP ports, IPv4 ID 0 and
	// DF).
	Pseudo packet.PseudoHeader
	// Credits makes ACK-type AETHs carry real end-to-end credits computed
	// from RecvQueue.Len() (IBA 9.7.7.2). False sends code 31 ("no flow
	// control") always, as rxe does.
	Credits bool
	// SRQ says the receive queue is a shared receive queue: credits are
	// always 31 and Flush leaves the queue alone.
	SRQ bool
	// SelectiveRepeat says the peer's requester negotiated selective
	// repeat (docs/recovery.md): out-of-order requests are kept in a
	// bounded buffer and executed in PSN order once the hole before them
	// is filled, and each hole is reported with packet.NAKSelectiveRepeat
	// instead of a PSN Sequence Error NAK. False is IBTA go-back-N.
	SelectiveRepeat bool
	// OOOLimit bounds the memory of the out-of-order buffer under
	// SelectiveRepeat, in bytes; 0 selects DefaultOOOLimit. The buffer
	// holds up to OOOLimit / (PMTU + 64) packets, each in a slot of
	// PMTU + 64 bytes (room for any request's headers, pad and ICRC); a
	// limit below one slot holds nothing.
	OOOLimit int
}

// DefaultOOOLimit is the default Config.OOOLimit (packet.DefaultOOOLimit):
// 512 slots of 4096 + 64 bytes, allocated only as out-of-order requests
// arrive.
const DefaultOOOLimit = packet.DefaultOOOLimit

// Memory resolves keys to bytes. Implementations check the key, the QP's
// protection domain, the access rights and that [addr, addr+length) lies in
// the region, and return exactly length bytes. A zero length checks key and
// rights and that addr lies in the region or at its end (rxe_mr.c
// mr_check_range with a length of 0).
type Memory interface {
	// Remote resolves an R_Key (RDMA and atomic requests).
	Remote(rkey uint32, va uint64, length uint32, need verbs.AccessFlags) ([]byte, bool)
	// RemoteRegion checks an R_Key, the protection domain and the
	// access rights only, for a request that names the whole region and
	// no range: a FLUSH at selectivity level memory region, whose VA and
	// DMA length rxe's check_rkey does not check.
	RemoteRegion(rkey uint32, need verbs.AccessFlags) bool
	// Local resolves an L_Key (receive WQE scatter entries).
	Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool)
	// Invalidate invalidates an R_Key for SEND_WITH_INV; false if the key
	// does not exist or may not be invalidated remotely.
	Invalidate(rkey uint32) bool
}

// RecvQueue is the QP's receive queue or its SRQ.
type RecvQueue interface {
	// Peek returns the oldest WQE without removing it. The responder copies
	// what it needs before calling Pop.
	Peek() (*verbs.RecvWR, bool)
	// Pop removes the oldest WQE.
	Pop()
	// Len returns the number of posted WQEs.
	Len() int
}

// Completions is the receive completion queue.
type Completions interface {
	// Complete posts wc; false means the CQ overflowed. The responder owns
	// wc and reuses it after the call returns.
	Complete(wc *verbs.WC) bool
}

// SolicitedCompletions may be implemented by an Env.CQ that wants to know
// whether a receive completion was solicited (the request's BTH SE bit), for
// solicited-only CQ notification. The responder then calls
// CompleteSolicited instead of Complete.
type SolicitedCompletions interface {
	// CompleteSolicited is Complete with the request's SE bit.
	CompleteSolicited(wc *verbs.WC, solicited bool) bool
}

// Env is what the responder reaches outside itself.
type Env struct {
	Mem Memory
	RQ  RecvQueue
	CQ  Completions
	// Trace, if not nil, is called with every state the machine enters, in
	// order (for debugging and tests; rxe prints these with pr_debug).
	Trace func(State)
}

// Counters are the responder's statistics. The first four carry the names
// of rxe's hardware counters (rxe_hw_counters.c).
type Counters struct {
	// DuplicateRequest counts requests whose PSN was before the expected
	// PSN (rxe duplicate_request).
	DuplicateRequest uint64
	// OutOfSeqRequest counts PSN Sequence Error NAKs, one per gap (rxe
	// out_of_seq_request).
	OutOfSeqRequest uint64
	// SendRNRErr counts RNR NAKs sent (rxe send_rnr_err).
	SendRNRErr uint64
	// RDMARecvs counts successful receive completions the receive CQ
	// took (rxe rdma_recvs), as Unreliable's does: one a full CQ refuses
	// fails the QP instead (class G). Kernel rxe's do_complete counts it
	// before rxe_cq_post, so there it counts the refused one too.
	RDMARecvs uint64

	// OutOfSeqDropped counts out-of-sequence packets dropped silently
	// because a NAK for the gap was already sent.
	OutOfSeqDropped uint64
	// DuplicateDropped counts duplicate READ/atomic requests dropped
	// because no responder resource matched (class D).
	DuplicateDropped uint64
	// Dropped counts packets not processed at all: not an RC request, the
	// responder failed or was flushed, or the output queue was full.
	Dropped uint64

	// AcksSent counts ACKNOWLEDGE packets with an ACK syndrome.
	AcksSent uint64
	// AcksCoalesced counts ACKs that were merged into a newer queued ACK.
	AcksCoalesced uint64
	// NaksSent counts NAK packets, RNR NAKs included.
	NaksSent uint64
	// AtomicAcksSent counts ATOMIC ACKNOWLEDGE packets.
	AtomicAcksSent uint64
	// ReadResponses counts RDMA READ response packets (the empty responses
	// to FLUSH and ATOMIC_WRITE included).
	ReadResponses uint64
	// ReadReplays counts duplicate READs answered from a resource.
	ReadReplays uint64
	// ReadRestarts counts duplicate READs that repositioned the train (or
	// replay) still being sent to their range; ReadsCovered those it
	// answers anyway (restartTrain).
	ReadRestarts, ReadsCovered uint64
	// ReadsClipped counts duplicate READs under selective repeat that were
	// served only up to where a queued stream of the same READ takes over
	// (clipToStream).
	ReadsClipped uint64
	// ReadResponsesResent counts the READ response packets queued a second
	// time for duplicate READs (read_responses_resent): the PSNs of each
	// replay or extra stream, and those a rewound train sends again.
	ReadResponsesResent uint64
	// BytesPlaced counts SEND and RDMA WRITE payload bytes written to
	// memory.
	BytesPlaced uint64
	// BytesRead counts RDMA READ response payload bytes.
	BytesRead uint64
	// BuildErrors counts queued responses dropped because they could not
	// be encoded (an invalid pseudo-header).
	BuildErrors uint64
	// CreditUpdates counts unsolicited ACKs queued by CreditUpdate.
	CreditUpdates uint64

	// Selective repeat (Config.SelectiveRepeat; docs/sr-responder.md).
	// SRHolesReported counts hole reports sent, re-reports included
	// (sr_holes_reported); SRHolesFilled those withdrawn before they were
	// sent because the hole had filled meanwhile (reordering).
	SRHolesReported, SRHolesFilled uint64
	// SRProgressReports counts progress reports sent (sr_progress_reports):
	// hole reports naming no hole, which tell the requester how far the
	// responder has received while a hole persists.
	SRProgressReports uint64
	// SRHolePSNs counts the PSNs first seen missing, the PSNs of each new
	// hole (sr_hole_psns): the packets lost, except that a lost READ
	// request counts all the PSNs it spans.
	SRHolePSNs uint64
	// OOOBuffered is the number of out-of-order requests held now
	// (ooo_buffered); OOOPeak the most held at once (ooo_peak) and
	// OOOBytesPeak the most bytes held at once (ooo_bytes_peak).
	OOOBuffered, OOOPeak, OOOBytesPeak uint64
	// OOODropped counts out-of-order requests dropped (ooo_dropped): the
	// buffer full, a PSN beyond its window, a packet larger than a slot,
	// or a held request passed over without executing (inside a READ's
	// PSN span, or its PSN executed from another copy).
	OOODropped uint64
	// OOODuplicates counts out-of-order requests dropped because a copy
	// of the same PSN was held already.
	OOODuplicates uint64
	// OOOHeld counts the out-of-order requests copied into the buffer
	// (ooo_held): each but those of OOOPlaced costs a copy more than a
	// request executed on arrival, so OOOHeld against the requests
	// received says how much of the stream waited behind holes.
	OOOHeld uint64
	// OOOPlaced counts the out-of-order requests whose payload was placed
	// in memory on arrival and held without it (ooo_placed): the later
	// packets of the WRITE or SEND in progress at the expected PSN, and
	// those of the SEND after a SEND in progress whose end is held
	// (placeAhead). Each is among OOOHeld and saves the second copy.
	OOOPlaced uint64
}

// reqKind classifies a request opcode. ATOMIC_WRITE carries MaskWrite in
// the packet table but is handled like an atomic (rxe's
// RXE_ATOMIC_WRITE_MASK), so the order of the tests in kindOf matters.
type reqKind uint8

const (
	kindNone reqKind = iota
	kindSend
	kindWrite
	kindRead
	kindAtomic
	kindAtomicWrite
	kindFlush
)

func kindOf(m packet.Mask) reqKind {
	switch {
	case m&packet.MaskReq == 0:
		return kindNone
	case m&packet.MaskAtomicWrite != 0:
		return kindAtomicWrite
	case m&packet.MaskFlush != 0:
		return kindFlush
	case m&packet.MaskSend != 0:
		return kindSend
	case m&packet.MaskWrite != 0:
		return kindWrite
	case m&packet.MaskRead != 0:
		return kindRead
	case m&packet.MaskAtomic != 0:
		return kindAtomic
	}
	return kindNone
}

// usesResource reports whether requests of kind k take a responder
// resource (IBA 9.7.5.1.3; rxe RXE_READ_OR_ATOMIC_MASK|...).
func (k reqKind) usesResource() bool {
	return k == kindRead || k == kindAtomic || k == kindAtomicWrite || k == kindFlush
}

// msgState is the message in progress (rxe qp->resp.opcode, reduced to
// what check_op_seq needs).
type msgState uint8

const (
	msgNone msgState = iota
	msgSend
	msgWrite
)

// recvWQE is the receive WQE of the SEND (or WRITE WITH IMMEDIATE) in
// progress: a copy of the posted WR and a scatter cursor. It is taken off
// the queue when the message starts, like rxe's SRQ copy.
type recvWQE struct {
	valid  bool
	id     uint64
	sges   []verbs.SGE
	total  uint64     // sum of SGE lengths
	placed uint64     // bytes written so far
	cur    sge.Cursor // scatter cursor in sges
}

// heldWC is a receive completion held behind a READ response stream
// (Responder.hold), its request's BTH SE bit, and, if ack, the ACK (PSN
// and MSN) that its request's ACK replaced in the output queue.
type heldWC struct {
	wc        verbs.WC
	solicited bool
	ack       bool
	ackPSN    packet.PSN
	ackMSN    uint32
}

// Responder is the RC responder of one QP. Create it with New.
type Responder struct {
	cfg  Config
	icrc packet.ICRCPrefix // starts the ICRC of each packet emit seals
	env  Env
	lmem sge.Memory           // env.Mem, held as what the SGE walk takes
	scq  SolicitedCompletions // env.CQ, if it implements it
	mtu  int

	epsn packet.PSN // expected PSN (rxe qp->resp.psn)
	msn  uint32     // message sequence number, 24 bits
	// The newest end-to-end credit advertisement (Config.Credits): the
	// limit sequence number MSN + credits of the last ACK-type AETH built.
	advLSN     uint32
	advertised bool
	nakSent    bool // a sequence (or RNR) NAK is outstanding (rxe sent_psn_nak)
	inMsg      msgState

	// RDMA WRITE in progress (rxe qp->resp.va/rkey/resid/length).
	wva    uint64
	wrkey  uint32
	wresid uint32
	wlen   uint32

	wqe recvWQE

	res     []resource // responder resources, recycled circularly
	resHead int
	q       outQueue

	// Per-packet state, valid during Receive.
	pkt      packet.Packet
	mask     packet.Mask
	kind     reqKind
	psn      packet.PSN
	dst      []byte    // memory resolved by CHK_RKEY
	cur      *resource // resource being created or replayed
	replay   bool      // the request is a duplicate being replayed
	rd       readReq   // READ parameters (new or replayed)
	status   verbs.WCStatus
	nakSyn   packet.Syndrome
	nak      bool // an error NAK must be sent (rxe aeth_syndrome != ACK)
	gotoErr  bool // pass through ERROR at the end (rxe goto_error)
	lenLocal bool // the length error is a receive buffer overflow
	errState State

	failed     bool
	failStatus verbs.WCStatus
	failState  State
	flushed    bool

	ooo      oooBuf // Config.SelectiveRepeat's out-of-order buffer
	draining bool   // drainOOO is running held requests through Receive
	// placed is the payload length of the request being run whose payload
	// placeAhead placed on arrival (its held copy has no payload); 0 for
	// any other. drainOOO sets nextPlaced for begin to take.
	placed, nextPlaced int
	// noPlaceAhead holds every out-of-order request whole: the
	// benchmarks set it to measure what placeAhead saves.
	noPlaceAhead bool

	wc   verbs.WC
	hdr  packet.Headers
	ctrs Counters

	// held are the completions of requests that ran while a READ
	// response stream was queued ahead of them, oldest first, each
	// waiting for its outHeld item in the output queue (hold). It grows
	// only when more are held than ever before; every one holds a
	// receive WQE the consumer posted, which bounds it.
	held ring.Ring[heldWC]
	// heldIn counts the completions ever held (hold), so that
	// heldIn - held.Len() is the number already taken off held.
	heldIn uint64
}

// New returns a responder for a copy of cfg. It allocates the responder resources
// (cfg.MaxDestRdAtomic of them); the bounded output queue, the copy of
// the receive WQE in use and the out-of-order buffer of selective repeat
// grow when first needed. It panics if cfg.PMTU is not one of the IB path
// MTUs.
func New(cfg *Config, env Env) *Responder {
	switch cfg.PMTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		panic("responder: PMTU must be 256, 512, 1024, 2048 or 4096")
	}
	nres := max(cfg.MaxDestRdAtomic, 0)
	r := &Responder{
		cfg:  *cfg,
		env:  env,
		lmem: env.Mem,
		mtu:  cfg.PMTU,
		epsn: cfg.RQPSN & packet.PSNMask,
		res:  make([]resource, nres),
	}
	// Every request queues at most one item. Read trains and atomic ACKs
	// are bounded by the resources; leave room for as many replays, the
	// ACKs between them and a few NAKs. A full queue drops requests.
	r.q.Init(4*nres+16, nil)
	r.held.Init(math.MaxInt, nil)
	if cfg.SelectiveRepeat {
		r.ooo.init(cfg.PMTU, cfg.OOOLimit)
	}
	if s, ok := env.CQ.(SolicitedCompletions); ok {
		r.scq = s
	}
	return r
}

// Receive processes one RC request packet, already ICRC-checked and
// addressed to this QP. It never blocks and, in steady state, does not
// allocate. Packets that are not RC requests are counted and dropped.
// Under selective repeat a request after the expected PSN is copied into
// the out-of-order buffer, and the buffered requests it makes in order run
// after it. After Receive, Pending says whether there is something to send,
// and Failed whether the QP must go to the error state.
func (r *Responder) Receive(now time.Time, p packet.Packet) {
	r.begin(p)
	st := StateGetReq
	for {
		if r.env.Trace != nil {
			r.env.Trace(st)
		}
		switch st {
		case StateGetReq:
			st = r.getReq()
		case StateCheckPSN:
			if st = r.checkPSN(); st == StateErrPSNOutOfSeq {
				st = r.outOfSequence()
			}
		case StateCheckOpSeq:
			st = r.checkOpSeq()
		case StateCheckOpValid:
			st = r.checkOpValid()
		case StateCheckResource:
			st = r.checkResource()
		case StateCheckLength:
			st = r.checkLength()
		case StateCheckRKey:
			st = r.checkRKey()
		case StateExecute:
			st = r.execute()
		case StateReadReply:
			st = r.readReply()
		case StateAtomicReply:
			st = r.atomicReply()
		case StateAtomicWriteReply:
			st = r.atomicWriteReply()
		case StateProcessFlush:
			st = r.processFlush()
		case StateComplete:
			st = r.complete()
		case StateAcknowledge:
			st = r.acknowledge()
		case StateCleanup:
			st = r.cleanup()
		case StateDuplicateRequest:
			st = r.duplicateRequest()
		case StateDone, StateExit:
			if r.gotoErr {
				st = StateError
				continue
			}
			r.end()
			if r.ooo.n > 0 && !r.draining {
				r.drainOOO(now)
			}
			return
		default: // the ERR_* states and ERROR
			st = r.onError(st)
		}
	}
}

// onError handles the ERR_* states and ERROR (rxe_resp.c's error cases):
// the NAK each error class sends, the completion status it reports, and
// the responder failure that classes A, C, G and J cause.
func (r *Responder) onError(st State) State {
	switch st {
	case StateErrPSNOutOfSeq:
		// Class B: one NAK carrying the expected PSN, packet dropped.
		r.queueNAK(packet.NAKSyndrome(packet.NAKPSNSeqError), r.epsn, false)
		return StateCleanup
	case StateErrRNR:
		// Class B: RNR NAK for this PSN, packet dropped, QP stays up.
		// Like hfi1/rdmavt (and unlike rxe) the NAK also opens a
		// "NAK sent" window, so the packets already in flight behind
		// it are dropped silently instead of drawing a sequence NAK
		// that would cost the requester a retry. Under selective
		// repeat the out-of-order buffer is emptied too: the
		// requester resends from this PSN after the RNR delay (rxe
		// completer RNR_RETRY, then req_retry; protocol notes §3.5),
		// so that whatever was held behind it comes again.
		r.ctrs.SendRNRErr++
		r.nakSent = true
		r.ctrs.OOODropped += uint64(r.ooo.clear())
		r.queueNAK(packet.RNRSyndrome(r.cfg.MinRNRTimer), r.psn, false)
		return StateCleanup
	case StateErrTooManyRDMAAtmReq, StateErrMissingOpcodeFirst, StateErrMissingOpcodeLastC,
		StateErrUnsupportedOpcode, StateErrMisalignedAtomic:
		return r.classC(st, packet.NAKInvalidRequest, verbs.WCRemInvReqErr)
	case StateErrRKeyViolation:
		return r.classC(st, packet.NAKRemoteAccess, verbs.WCRemAccessErr)
	case StateErrLength:
		status := verbs.WCRemInvReqErr
		if r.lenLocal {
			// A receive buffer too small for the message: an
			// Invalid Request NAK and, here, local length error
			// (ibv_poll_cq(3)), as IBA's length error is sorted.
			// Kernel rxe differs: its copy_data returns -EINVAL,
			// not the -ENOSPC send_data_in maps to
			// RESPST_ERR_LENGTH, so rxe takes the overflow for a
			// malformed WQE (Remote Operational Error NAK,
			// LOC_QP_OP_ERR).
			status = verbs.WCLocLenErr
		}
		return r.classC(st, packet.NAKInvalidRequest, status)
	case StateErrMalformedWQE:
		// Class A.
		return r.classC(st, packet.NAKRemoteOperation, verbs.WCLocQPOpErr)
	case StateErrInvalidateRKey:
		// Class J: the message is acknowledged, then the QP fails.
		r.errState, r.gotoErr, r.status = st, true, verbs.WCRemInvReqErr
		return StateComplete
	case StateErrCQOverflow:
		// Class G: no NAK.
		r.errState, r.gotoErr, r.status = st, true, verbs.WCGeneralErr
		return StateError
	case StateError:
		r.fail(r.status, r.errState)
		r.gotoErr = false
		return StateExit
	}
	panic("responder: bad state " + st.String())
}

// begin loads the per-packet state.
func (r *Responder) begin(p packet.Packet) {
	r.pkt = p
	r.mask = p.Mask()
	r.kind = kindOf(r.mask)
	r.psn = p.PSN()
	r.dst = nil
	r.cur = nil
	r.replay = false
	r.status = verbs.WCSuccess
	r.nak = false
	r.gotoErr = false
	r.lenLocal = false
	r.errState = StateNone
	r.placed, r.nextPlaced = r.nextPlaced, 0
}

// payloadLen is the current request's payload length: what placeAhead
// placed for a request held without its payload, else the packet's.
func (r *Responder) payloadLen() int {
	if r.placed > 0 {
		return r.placed
	}
	return r.pkt.PayloadLen()
}

// end forgets the packet, so that the responder keeps no reference to the
// caller's buffer or to memory regions.
func (r *Responder) end() {
	r.pkt = packet.Packet{}
	r.dst = nil
	r.cur = nil
}

// classC records a class A or C error (rxe do_class_ac_error): the NAK to
// send, the completion status, and that the QP must fail.
func (r *Responder) classC(st State, code packet.NAKCode, status verbs.WCStatus) State {
	r.errState = st
	r.nak, r.nakSyn = true, packet.NAKSyndrome(code)
	r.status = status
	r.gotoErr = true
	return StateComplete
}

// fail moves the responder to its failed state. The first failure wins,
// except that a READ's fault at emit time overrides one recorded behind it
// (readFault).
// The out-of-order buffer is emptied: nothing held executes any more.
func (r *Responder) fail(status verbs.WCStatus, st State) {
	if r.failed {
		return
	}
	r.failed, r.failStatus, r.failState = true, status, st
	r.ctrs.OOODropped += uint64(r.ooo.clear())
}

// NextPacket writes the next outgoing packet — ACK, NAK, RDMA READ
// response, ATOMIC ACKNOWLEDGE — with its ICRC into buf and returns its
// length, or 0 if there is nothing to send. buf must hold at least
// PMTU + 64 bytes; if it is too small NextPacket returns 0 and keeps the
// packet. Under selective repeat it first resumes executing buffered
// requests that waited for room in the output queue. Read responses
// re-validate the memory region for every packet: if it is gone the train
// is replaced by a Remote Access NAK and the responder fails (check Failed
// after NextPacket too). The receive completions held behind a READ
// response stream (hold) are posted as the responses queued ahead of them
// are taken, ahead of any hole or progress report still queued (such a
// report acknowledges nothing); a receive CQ that overflows then fails
// the responder too.
func (r *Responder) NextPacket(now time.Time, buf []byte) int {
	if r.ooo.n > 0 && r.oooReady() {
		r.drainOOO(now)
	}
	for r.q.Len() > 0 {
		n, ok := r.emit(buf)
		if ok {
			return n
		}
		if n < 0 { // buffer too small: keep the item
			return 0
		}
	}
	return 0
}

// Pending reports whether NextPacket would return a packet.
func (r *Responder) Pending() bool { return r.q.Len() > 0 || r.ooo.n > 0 && r.oooReady() }

// Failed reports whether the responder hit a fatal error (IBA classes A, C,
// G and J; §3.4 of the protocol notes) and the QP must move to ERR, with
// the completion status that describes it (WCGeneralErr for a receive CQ
// overflow). The packets already queued, the error NAK last, are still
// returned by NextPacket.
func (r *Responder) Failed() (verbs.WCStatus, bool) { return r.failStatus, r.failed }

// FailState returns the ERR_* state that failed the responder, or
// StateNone.
func (r *Responder) FailState() State { return r.failState }

// Flush is called when the QP enters ERR. It completes the receive WQEs
// whose completions are held behind a READ response stream (hold), the one
// of the message in progress and, unless the queue is an SRQ, every WQE
// still posted, with WR_FLUSH_ERR (rxe check_resource in QP_STATE_ERROR), and
// drops the pending output except the error NAK of a failure, so that the
// peer still learns why. Afterwards Receive drops every packet. Flush may
// be called again, e.g. after WQEs are posted to a QP in ERR.
func (r *Responder) Flush() {
	r.flushed = true
	// The WQEs of the completions held behind a READ response stream
	// (hold) were taken from the queue before the one in progress.
	for r.held.Len() > 0 {
		id := r.held.Front().wc.ID
		r.held.Pop()
		r.postFlush(id)
	}
	if r.wqe.valid {
		r.wqe.valid = false
		r.postFlush(r.wqe.id)
	}
	if !r.cfg.SRQ && r.env.RQ != nil {
		for {
			wr, ok := r.env.RQ.Peek()
			if !ok {
				break
			}
			id := wr.ID
			r.env.RQ.Pop()
			r.postFlush(id)
		}
	}
	r.inMsg = msgNone
	r.q.keepFatal()
	r.ctrs.OOODropped += uint64(r.ooo.n)
	r.ooo.reset()
}

func (r *Responder) postFlush(id uint64) {
	r.wc = verbs.WC{ID: id, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: r.cfg.QPN}
	r.post(&r.wc, false)
}

// post delivers a completion.
func (r *Responder) post(wc *verbs.WC, solicited bool) bool {
	if r.scq != nil {
		return r.scq.CompleteSolicited(wc, solicited)
	}
	return r.env.CQ.Complete(wc)
}

// Counters returns a snapshot of the statistics.
func (r *Responder) Counters() Counters {
	c := r.ctrs
	c.OOOBuffered = uint64(r.ooo.n)
	return c
}

// LossSignals returns a count that grows with every sign of loss
// recovery the responder meets: a request received again (a requester's
// resend or re-read: Counters.DuplicateRequest), or a sequence-error NAK
// or selective-repeat hole report sent (OutOfSeqRequest,
// SRHolesReported), without the cost of a Counters snapshot. The device
// spins its receive goroutines while it grows (rxe.Options.ReceiveSpin).
func (r *Responder) LossSignals() uint64 {
	return r.ctrs.DuplicateRequest + r.ctrs.OutOfSeqRequest + r.ctrs.SRHolesReported
}

// EPSN returns the expected PSN of the next new request.
func (r *Responder) EPSN() packet.PSN { return r.epsn }

// MSN returns the current message sequence number.
func (r *Responder) MSN() uint32 { return r.msn }

// State returns where the machine rests between packets: StateError once
// failed or flushed, StateReadReply while READ responses are queued, else
// StateGetReq (waiting for the next request). Env.Trace shows every state.
func (r *Responder) State() State {
	switch {
	case r.failed || r.flushed:
		return StateError
	case r.q.hasRead():
		return StateReadReply
	}
	return StateGetReq
}
