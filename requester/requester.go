package requester

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/gorxe/gorxe/internal/ring"
	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// compOpNone is the completer's "no read response in progress" opcode
// (rxe's comp.opcode = -1).
const compOpNone = 0xFF

// traceLen is how many completer states Trace keeps from one pass.
const traceLen = 64

// Requester is the send queue and completer of one RC queue pair. See the
// package documentation.
type Requester struct {
	cfg  Config
	icrc packet.ICRCPrefix // starts the ICRC of each packet build seals
	mem  sge.Memory        // the Memory given to New, held as what the SGE walk takes
	cq   Completions
	pmtu uint32
	// pmtuShift is log2(pmtu): a path MTU is a power of two.
	pmtuShift uint8
	ack       time.Duration // local ACK timeout; 0 = none

	// The send queue: WQE i (a running count) is sq.At(i - head). head
	// is the oldest uncompleted WQE, cur the requester's cursor (the next
	// WQE to send packets of), tail the next free slot. The ring starts
	// empty and grows up to MaxWR slots, each with room for MaxSGE SGEs
	// and MaxInline inline bytes, so an idle QP costs little memory.
	sq   ring.Ring[wqe]
	head uint64
	cur  uint64
	tail uint64

	// Requester (rxe qp->req).
	psn       packet.PSN // next PSN to send
	highPSN   packet.PSN // one past the highest PSN ever sent
	noAck     int        // packets since the last one with AckReq
	rdInUse   int        // max_rd_atomic slots held
	partsWQEs int        // WQEs not completed whose READ is asked for in parts (rdRequests)
	ssn       uint32     // next send sequence number (credits)
	lsn       uint32     // limit sequence number from the peer's credits
	unlimited bool       // the peer advertised "no credit limit"
	credited  bool       // the peer has advertised credits at least once
	probeOK   bool       // the probe wait passed: SSN = LSN + 1 may start
	stalled   bool       // the WQE at the cursor waits for credits
	probe     retry.Deadline
	probeWait time.Duration
	draining  bool
	hdr       packet.Headers

	// Completer (rxe qp->comp).
	compPSN      packet.PSN // oldest unacknowledged PSN
	compOp       uint8      // opcode of the read response in progress, or compOpNone
	retryBudget  retry.RetryBudget
	rnrBudget    retry.RNRBudget
	startedRetry bool
	// nakRetry: the retry under way was started by a sequence error NAK,
	// an implied NAK or a probe's answer, not by a timer or an RNR NAK
	// (recoveryTimeout).
	nakRetry bool
	// rnrRewound: the packets sent again since the last rewind are an RNR
	// NAK's retry (flow control, not loss); lossResent counts the others
	// (LossSignals).
	rnrRewound bool
	lossResent uint64
	// gapRetry: the retry errorRetry is about to start is for a gap in
	// READ responses (checkPSN, completeAhead); rereadDue: readAgain asked
	// NextPacket to re-read the oldest READ's rest (readahead.go).
	gapRetry, rereadDue bool
	// doubleFirst: the next packet built at the oldest unacknowledged PSN
	// opens a go-back-N retry that a sequence NAK started, and is sent
	// twice (doubleDue: the second copy is next); see doubleResend.
	doubleFirst, doubleDue bool
	doublePSN              packet.PSN
	// readRepairs counts readAgain's repairs (they are retries, but not
	// losses that shrink the window); readsSinceRepair the READs
	// completed since the last one, up to partsHold (readParts).
	readRepairs      uint64
	readsSinceRepair uint32
	// retryLog: the kinds of the retries started since TakeRetryKinds
	// (RetryKind says which grow CompleterRetryErr), the hole reports
	// taken and the losses srDetect found.
	retryLog RetryKind
	// lostPSN, lostRead: the first PSN srDetect marked lost since
	// TakeRetryKinds, and whether it is a READ's (noteLost).
	lostPSN  packet.PSN
	lostRead bool
	// ooo is the last READ response of the oldest READ that came after a
	// missing one (replayPassedHole): its PSN, and the oldest
	// unacknowledged PSN then.
	ooo struct {
		seen       bool
		psn, since packet.PSN
	}
	retrans retry.Deadline
	rnrWait retry.Deadline
	state   CompState
	trace   [traceLen]CompState
	ntrace  int

	// Errors.
	stopped    bool // no more sending or receiving: failed or flushed
	failed     bool
	failStatus verbs.WCStatus

	rec recovery  // loss recovery in round trips (recovery.go)
	sr  selective // selective repeat (selective.go, srresend.go)

	wc verbs.WC
	c  Counters
}

// New returns a Requester for a copy of cfg, with an empty send queue that
// grows as work requests are posted, up to cfg.MaxWR. It panics if
// cfg.PMTU is not a valid IB path MTU or cfg.Pseudo is not a valid
// pseudo-header (the device validates the QP attributes first).
func New(cfg *Config, mem Memory, cq Completions) *Requester {
	c := *cfg
	if verbs.MTUFromBytes(c.PMTU).Bytes() != c.PMTU {
		panic(fmt.Sprintf("requester: PMTU %d is not 256, 512, 1024, 2048 or 4096", c.PMTU))
	}
	if !c.Pseudo.Valid() {
		panic("requester: invalid pseudo-header: " + packet.ErrPseudoHeader.Error())
	}
	c.MaxWR = max(c.MaxWR, 1)
	c.MaxSGE = max(c.MaxSGE, 1)
	c.MaxInline = max(c.MaxInline, 0)
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	c.Window = min(c.Window, packet.PSNWindow-1)
	if c.AckReqEvery <= 0 {
		c.AckReqEvery = DefaultAckReqEvery
	}
	c.AckReqEvery = min(c.AckReqEvery, c.Window)
	if c.SelectiveRepeat && c.MaxReadPkts >= srTrack {
		// A part's responses must fit the tracked PSNs (readFits).
		c.MaxReadPkts = srTrack - 1
	}
	c.SQPSN &= packet.PSNMask
	r := &Requester{
		cfg:       c,
		mem:       mem,
		cq:        cq,
		pmtu:      uint32(c.PMTU),
		pmtuShift: uint8(bits.TrailingZeros32(uint32(c.PMTU))),
		psn:       c.SQPSN,
		highPSN:   c.SQPSN,
		ssn:       1,
		compPSN:   c.SQPSN,
		compOp:    compOpNone,
		// A new QP asks for its READs whole until a repair.
		readsSinceRepair: partsHold,
		retryBudget:      retry.NewRetryBudget(c.RetryCnt),
		rnrBudget:        retry.NewRNRBudget(c.RNRRetry),
		state:            CompDone,
	}
	r.SetTimeout(c.Timeout)
	r.sq.Init(c.MaxWR, r.freshSlots)
	r.initRecovery(&c)
	r.initSelective()
	return r
}

// slot returns WQE i; the queue must hold it (head <= i < tail).
func (r *Requester) slot(i uint64) *wqe { return r.sq.At(int(i - r.head)) }

// freshSlots gives the new slots of a grown send queue their SGE and
// inline stores, in one allocation each.
func (r *Requester) freshSlots(s []wqe) {
	sges := make([]verbs.SGE, len(s)*r.cfg.MaxSGE)
	inl := make([]byte, len(s)*r.cfg.MaxInline)
	for i := range s {
		s0, i0 := i*r.cfg.MaxSGE, i*r.cfg.MaxInline
		s[i].sges = sges[s0 : s0 : s0+r.cfg.MaxSGE]
		s[i].inline = inl[i0 : i0 : i0+r.cfg.MaxInline]
	}
}

// Outstanding returns the number of WQEs posted and not yet completed.
func (r *Requester) Outstanding() int { return int(r.tail - r.head) }

// SQPSN returns the next PSN the requester will send (for Query's sq_psn).
func (r *Requester) SQPSN() packet.PSN { return r.psn }

// Counters returns a snapshot of the statistics.
func (r *Requester) Counters() Counters {
	c := r.c
	c.Recovery = r.recoveryCounters()
	return c
}

// Failed reports whether a fatal error happened — a remote error NAK, an
// exhausted retry budget, a local protection error, a bad response or a
// completion queue overflow — and the status of the WQE it failed. The
// owner must then move the QP to the error state and call Flush.
func (r *Requester) Failed() (verbs.WCStatus, bool) { return r.failStatus, r.failed }

// LossSignals returns a count that grows with every sign of loss
// recovery the requester meets: a sequence-error NAK or a selective-repeat
// hole report received, or a packet sent again other than in an RNR NAK's
// retry (the responder had no receive WQE: flow control, not loss),
// without the cost of a Counters snapshot. The device spins its receive
// goroutines while it grows (rxe.Options.ReceiveSpin).
func (r *Requester) LossSignals() uint64 {
	return r.c.RcvdSeqErr + r.c.SRHolesReceived + r.lossResent
}

// RNRWait returns when the RNR wait under way ends, the zero time if none
// is: rxe's rnr_nak_timer, which COMPST_RNR_RETRY arms as it starts an RNR
// retry (IBA 9.7.5.2.8). An RNR NAK that starts no retry (rnrRetry: a late
// one, from before the retry under way) leaves it as it was; the wait's end
// (OnTimeout, NextPacket) stops it.
func (r *Requester) RNRWait() time.Time { return r.rnrWait.When() }

// SetDraining starts (true) or ends (false) draining the send queue for
// the SQD state: while draining no new WQE starts; WQEs already started,
// including their retransmissions, go on.
func (r *Requester) SetDraining(on bool) { r.draining = on }

// Drained reports whether the requester is draining and no started WQE is
// outstanding (the moment rxe raises IB_EVENT_SQ_DRAINED).
func (r *Requester) Drained() bool {
	if !r.draining {
		return false
	}
	return r.head == r.tail || r.head == r.cur && !r.slot(r.cur).started
}

// Deadline returns the earliest time OnTimeout must be called: the
// retransmit timer, the RNR timer or the credit probe wait, whichever is
// earliest; the zero time if none is armed.
func (r *Requester) Deadline() time.Time {
	return retry.Earliest(r.retrans.When(), r.rnrWait.When(), r.probe.When(), r.rec.due.When(), r.sr.hold.When(), r.sr.recheck.When(), r.sr.watch.When())
}

// Pending reports whether NextPacket would return a packet now. It is false
// during an RNR wait even after its deadline has passed, until OnTimeout (or
// a NextPacket call with a later now) ends it.
func (r *Requester) Pending() bool {
	return !r.rnrWait.Armed() && (r.rec.probeDue || r.doubleReady() || r.rereadDue && r.rereadPending() || r.sr.ndue > 0 && !r.srHeldBack() && !r.stopped || r.sendable() != nil)
}

// sendable returns the WQE the next packet belongs to, or nil if nothing
// may be sent: empty queue, SQD, fence, PSN window, credits or
// max_rd_atomic (rxe_requester's checks, in its order).
func (r *Requester) sendable() *wqe {
	r.stalled = false
	if r.stopped || r.cur == r.tail {
		return nil
	}
	w := r.slot(r.cur)
	if r.draining && !w.started {
		return nil
	}
	if w.flags&verbs.SendFence != 0 && w.state == wqePosted {
		// The fence indicator: a fenced WQE waits for earlier READ and
		// atomic WQEs to complete (rxe req_next_wqe waits for all).
		for i := r.head; i != r.cur; i++ {
			if r.slot(i).kind.rdAtomic() {
				return nil
			}
		}
	}
	if r.windowFull() || !r.readFits(w) {
		return nil
	}
	if r.creditBound(w) && !r.creditOK(w) {
		return nil
	}
	if !r.rdAtomicOK(w) {
		return nil
	}
	return w
}

// rdAtomicOK reports whether the next request of w, the WQE at the send
// cursor, stays within max_rd_atomic: a READ or atomic that holds no slot
// yet needs one, and while READs are asked for in parts (Config.
// MaxReadPkts, readParts) a new READ request, the first of a WQE or a
// further part of one, needs the READ and atomic requests outstanding
// (rdRequests) to be below max_rd_atomic. Each READ request holds one of
// the responder's READ/atomic resources, of which the peer's
// max_dest_rd_atomic, and so our max_rd_atomic, counts requests: rxe
// check_init_depth takes one credit per READ WQE, which it asks for in
// one request.
func (r *Requester) rdAtomicOK(w *wqe) bool {
	if !w.kind.rdAtomic() {
		return true
	}
	if !w.hasRdAtomic && r.rdInUse >= r.cfg.MaxRdAtomic {
		return false
	}
	if r.partsWQEs > 0 && (!w.hasRdAtomic || w.parts > 0 && w.state == wqeProcessing) {
		return r.rdRequests() < r.cfg.MaxRdAtomic
	}
	return true
}

// creditOK reports whether the unstarted WQE w, which needs a credit, may
// start (IBA 9.7.7.2.5): its SSN is within the limit, or it is the probe
// (SSN = LSN + 1) and either no credit was ever advertised (the first
// message after connecting) or the probe wait has passed. A probe that
// must wait sets stalled; a WQE further beyond the limit waits for the
// response to the probe already sent, which the retransmit timer covers.
func (r *Requester) creditOK(w *wqe) bool {
	switch d := packet.PSN(w.ssn).Diff(packet.PSN(r.lsn)); {
	case d <= 0:
		return true
	case d == 1:
		if !r.credited || r.probeOK {
			return true
		}
		r.stalled = true
	}
	return false
}

// waitCredits arms the probe wait when the WQE at the cursor is blocked by
// credits; a credit update stops it. It evaluates sendable, after a
// response may have changed the credits.
func (r *Requester) waitCredits(now time.Time) {
	if r.cfg.Credits && !r.unlimited && r.sendable() == nil {
		r.armProbe(now)
	}
}

// armProbe arms the probe wait if the last sendable found the WQE at the
// cursor blocked by credits (stalled).
func (r *Requester) armProbe(now time.Time) {
	if r.stalled && r.probe.ArmIfStopped(now.Add(r.probeWait)) {
		r.c.CreditStalls++
	}
}

// creditBound reports whether w, not started yet, needs one of the peer's
// credits to start (Config.Credits, and the peer has a limit).
func (r *Requester) creditBound(w *wqe) bool {
	return r.cfg.Credits && !r.unlimited && !w.started && r.needsCredit(w)
}

// isProbe reports whether starting w now sends the credit probe.
func (r *Requester) isProbe(w *wqe) bool {
	return r.creditBound(w) && packet.PSN(w.ssn).Diff(packet.PSN(r.lsn)) == 1
}

// needsCredit reports whether w consumes a receive WQE at the responder:
// the SENDs and RDMA WRITE WITH IMMEDIATE (IBA 9.7.7.2).
func (r *Requester) needsCredit(w *wqe) bool {
	return w.kind == kindSend || w.op == verbs.WRRDMAWriteWithImm
}

// NextPacket builds the next request packet into buf and returns its
// length, BTH through ICRC, or 0 if nothing may be sent now. buf must hold
// at least PMTU+64 bytes. The payload is copied once from the memory
// region (or the inline data) into buf, and the ICRC is folded in as it is
// copied. A packet is built at most once per call; the caller sends it and
// calls again while Pending.
//
// A failed L_Key lookup fails the WQE with LOC_PROT_ERR, fails the
// requester (see Failed) and returns 0.
func (r *Requester) NextPacket(now time.Time, buf []byte) int {
	if r.stopped {
		return 0
	}
	if r.rnrWait.Armed() {
		if !r.rnrWait.Expired(now) {
			return 0
		}
		r.rnrWait.Stop()
	}
	if r.probe.Expired(now) {
		r.probe.Stop()
		r.probeOK = true
	}
	if len(buf) < int(r.pmtu)+maxHeaders {
		panic("requester: NextPacket buffer shorter than PMTU+64")
	}
	if r.rec.probeDue {
		if n := r.nextProbe(now, buf); n > 0 {
			return n
		}
	}
	if r.doubleDue {
		if n := r.doubleResend(now, buf); n > 0 {
			return n
		}
	}
	if r.rereadDue {
		if n := r.nextReread(now, buf); n > 0 {
			return n
		}
	}
	if r.srReady(now) {
		if n := r.srResend(now, buf); n > 0 {
			return n
		}
	}
	w := r.sendable()
	if w == nil {
		r.armProbe(now) // sendable has just set stalled
		return 0
	}
	if r.isProbe(w) {
		r.probeOK = false
		r.c.CreditProbes++
	}
	high := r.highPSN
	n := r.build(w, buf)
	if n > 0 {
		if r.doubleFirst {
			r.doubleFirst = false
			r.doubleDue = r.hdr.BTH.PSN == r.compPSN && w.kind.segmented()
			r.doublePSN = r.compPSN
		}
		r.onSent(now, r.hdr.BTH.PSN, r.hdr.BTH.AckReq, high)
		if w.kind == kindRead && r.cfg.SelectiveRepeat {
			r.srWatchRead(now) // a READ sent after the last response: watch it
		}
	}
	if n > 0 && r.ack > 0 && !r.retrans.Armed() {
		// rxe update_state: arm the retransmit timer if it is not pending.
		r.retrans.Arm(now.Add(r.ack))
	}
	return n
}

// nextProbe builds the tail-loss probe: buildProbe's, or under selective
// repeat srProbe's.
func (r *Requester) nextProbe(now time.Time, buf []byte) int {
	if r.cfg.SelectiveRepeat {
		return r.srProbe(now, buf)
	}
	return r.buildProbe(now, buf)
}

// pkts returns the number of packets (and PSNs) of a message of n bytes:
// max(1, ceil(n/pmtu)).
func (r *Requester) pkts(n uint32) uint32 {
	if n == 0 {
		return 1
	}
	return (n-1)>>r.pmtuShift + 1
}

// seg is the packet of a WQE that build sends next.
type seg struct {
	op         packet.Opcode
	payload    uint32
	npkts      uint32 // PSNs from this packet to the end of the message (of the READ part)
	readLen    uint32 // READ: the bytes this request asks for
	start, end bool   // the packet starts / ends the message
}

// build writes the next packet of w into buf and advances the requester;
// rxe init_req_packet, finish_packet and update_*.
func (r *Requester) build(w *wqe, buf []byte) int {
	psn := r.psn
	sg := r.nextSeg(w)
	// AckReq on the last packet of a message and on every AckReqEvery-th
	// packet (rxe init_req_packet, RXE_MAX_PKT_PER_ACK).
	noAck := r.noAck + 1
	ackReq := sg.end || noAck >= r.cfg.AckReqEvery || r.forceAckReq(psn) || r.sr.forceAck
	if ackReq {
		noAck = 0
	}
	r.setHeaders(w, sg, psn, ackReq)
	f, err := packet.Begin(buf, &r.hdr, int(sg.payload), &r.cfg.Pseudo)
	if err != nil {
		panic("requester: " + err.Error()) // unreachable: known opcode, buffer and pseudo-header checked
	}
	// The payload is folded into the ICRC as it is copied from the
	// memory region (packet.ICRCCopy): one read of it, not two.
	crc := f.StartICRC(&r.icrc)
	if sg.payload > 0 {
		var ok bool
		if crc, ok = r.gather(w, f.Payload(), crc); !ok {
			r.localError(w, verbs.WCLocProtErr)
			return 0
		}
	}
	n := f.SealICRC(crc)
	r.noAck = noAck
	r.commit(w, sg, psn)
	r.c.PacketsSent++
	r.c.BytesSent += uint64(n)
	r.c.PayloadSent += uint64(sg.payload)
	return n
}

// nextSeg returns the opcode, payload length and position in the message
// of w's next packet (rxe next_opcode).
func (r *Requester) nextSeg(w *wqe) seg {
	sg := seg{start: true, end: true, npkts: 1}
	switch w.kind {
	case kindSend, kindWrite:
		resid := w.length - w.off
		sg.start = w.off == 0
		sg.end = resid <= r.pmtu
		sg.payload = min(resid, r.pmtu)
		sg.npkts = r.pkts(resid)
		sg.op = segOpcode(w.op, sg.start, sg.end)
	case kindRead:
		sg.op = packet.RCRDMAReadRequest
		if k := r.sr.rereadPkts; k > 0 {
			// A re-read of a missing range (srResend).
			sg.readLen = min(k*r.pmtu, w.length-w.off)
			sg.npkts, sg.end = k, w.off+sg.readLen == w.length
			break
		}
		sg.readLen, sg.npkts, sg.end = r.readChunk(w)
	case kindAtomic:
		sg.op = packet.RCFetchAdd
		if w.op == verbs.WRAtomicCmpAndSwp {
			sg.op = packet.RCCompareSwap
		}
	case kindAtomicWrite:
		sg.op = packet.RCAtomicWrite
		sg.payload = 8
	}
	return sg
}

// setHeaders fills r.hdr for the packet sg of w with PSN psn (rxe
// init_req_packet).
func (r *Requester) setHeaders(w *wqe, sg seg, psn packet.PSN, ackReq bool) {
	h := &r.hdr
	h.BTH = packet.BTHFields{
		Opcode: sg.op,
		// SE only on the last packet of a SEND or WRITE WITH IMMEDIATE.
		SE: sg.end && w.flags&verbs.SendSolicited != 0 &&
			(w.kind == kindSend || w.op == verbs.WRRDMAWriteWithImm),
		PKey:   r.cfg.PKey,
		DestQP: r.cfg.DestQPN,
		AckReq: ackReq,
		PSN:    psn,
	}
	switch w.kind {
	case kindWrite, kindAtomicWrite:
		// The RETH (on FIRST/ONLY only) carries the whole length.
		h.RETH = packet.RETHFields{VA: w.remote + uint64(w.off), RKey: w.rkey, DMALen: w.length - w.off}
	case kindRead:
		// A READ asks from its request cursor (rewind sets it to the bytes
		// received, rxe req_retry), all the rest or a part (readChunk).
		h.RETH = packet.RETHFields{VA: w.remote + uint64(w.off), RKey: w.rkey, DMALen: sg.readLen}
	case kindAtomic:
		// AtomicETH: swap (or add) data before compare data on the wire.
		h.AtomicETH = packet.AtomicETHFields{VA: w.remote, RKey: w.rkey, SwapAdd: w.compareAdd}
		if sg.op == packet.RCCompareSwap {
			h.AtomicETH.SwapAdd, h.AtomicETH.Compare = w.swap, w.compareAdd
		}
	}
	h.Imm, h.IETH = w.imm, w.invRKey
}

// commit advances w and the requester past the packet sg sent with PSN
// psn (rxe update_wqe_state, update_wqe_psn, update_state).
func (r *Requester) commit(w *wqe, sg seg, psn packet.PSN) {
	if sg.start {
		w.firstPSN = psn
		w.lastPSN = psn.Add(int(sg.npkts) - 1)
		if w.kind == kindRead {
			w.lastPSN = psn.Add(int(r.pkts(w.length-w.off)) - 1)
			if w.off == 0 {
				w.origFirst = psn
			}
		}
	}
	if w.kind == kindRead {
		r.psn = psn.Add(int(sg.npkts))
		w.off += sg.readLen
	} else {
		r.psn = psn.Next()
	}
	w.started = true
	if sg.end {
		w.state = wqePending
		w.sentAll = true
		r.cur++
		defer r.skipReceived()
	} else {
		w.state = wqeProcessing
	}
	if w.kind.rdAtomic() && !w.hasRdAtomic {
		w.hasRdAtomic = true
		r.rdInUse++
	}
	if psn.Before(r.highPSN) {
		r.c.Retransmits++
		if !r.rnrRewound {
			r.lossResent++
		}
	}
	if r.psn.After(r.highPSN) {
		r.highPSN = r.psn
		r.rnrRewound = false
	}
}

// gather copies the next len(dst) bytes of w's message into dst, folding
// them into the ICRC register crc, and advances the send cursor (rxe
// copy_data from the MR); it returns the register after them.
func (r *Requester) gather(w *wqe, dst []byte, crc uint32) (uint32, bool) {
	if w.isInline {
		if int(w.off)+len(dst) > len(w.inline) {
			return crc, false
		}
		crc = packet.ICRCCopy(crc, dst, w.inline[w.off:int(w.off)+len(dst)])
	} else {
		var ok bool
		if crc, ok = w.snd.GatherICRC(r.mem, w.sges, dst, crc); !ok {
			return crc, false
		}
	}
	w.off += uint32(len(dst))
	return crc, true
}

// scatter places src at w's placement cursor (read response data, an
// atomic's original value) and advances it.
func (r *Requester) scatter(w *wqe, src []byte) bool {
	return w.place.Scatter(r.mem, w.sges, src)
}

// segOpcode returns the RC opcode of a SEND or WRITE packet (rxe
// next_opcode_rc).
func segOpcode(op verbs.WROpcode, start, end bool) packet.Opcode {
	var first, middle, last, only packet.Opcode
	switch op {
	case verbs.WRSend:
		first, middle, last, only = packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLast, packet.RCSendOnly
	case verbs.WRSendWithImm:
		first, middle, last, only = packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLastWithImmediate, packet.RCSendOnlyWithImmediate
	case verbs.WRSendWithInv:
		first, middle, last, only = packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLastWithInvalidate, packet.RCSendOnlyWithInvalidate
	case verbs.WRRDMAWrite:
		first, middle, last, only = packet.RCRDMAWriteFirst, packet.RCRDMAWriteMiddle, packet.RCRDMAWriteLast, packet.RCRDMAWriteOnly
	default: // WRRDMAWriteWithImm
		first, middle, last, only = packet.RCRDMAWriteFirst, packet.RCRDMAWriteMiddle, packet.RCRDMAWriteLastWithImm, packet.RCRDMAWriteOnlyWithImm
	}
	switch {
	case start && end:
		return only
	case start:
		return first
	case end:
		return last
	}
	return middle
}

// rewind starts a go-back-N retry from the oldest unacknowledged PSN (rxe
// req_retry): the send cursor returns to the oldest WQE and every started
// WQE becomes posted again. The oldest one resumes mid-message if it is a
// SEND/WRITE (skipping the acknowledged packets) or re-asks for the missing
// bytes if it is a READ; later ones restart from their beginning. PSNs are
// stable across rounds: each WQE gets the same PSNs again.
func (r *Requester) rewind() {
	r.rnrRewound = false // rnrRetry sets it again after the rewind
	r.rereadDue = false
	r.doubleFirst, r.doubleDue = false, false
	r.cur = r.head
	r.psn = r.compPSN
	if r.head != r.tail {
		r.forgetOldStream(r.slot(r.head))
	}
	for i := r.head; i != r.tail; i++ {
		w := r.slot(i)
		if !w.started {
			break
		}
		switch {
		case i == r.head && w.kind.segmented():
			r.seekPSN(w, r.compPSN)
		case i == r.head && w.kind == kindRead:
			// Keep the received data; build asks for the rest.
			w.off = w.rcvd
			w.rereadAsked, w.rereadDue, w.rereadPart = false, false, 0
		default:
			if r.sr.ngot > 0 && !r.cfg.SelectiveRepeat && w.kind == kindRead {
				r.forgetMarks(w) // its responses placed ahead (markAhead) go with its data
			}
			w.resetCursors()
		}
		w.state = wqePosted
	}
}

// skipReceived moves the send cursor past started READs whose data has
// all been placed. After a rewind their responses may come before they
// are asked for again (a selective-repeat responder executes the
// requests it buffered once the hole or RNR-refused request is filled):
// asking again would send a READ for 0 bytes at the READ's end, a request
// the original at that PSN never made.
func (r *Requester) skipReceived() {
	if !r.cfg.SelectiveRepeat {
		return // go-back-N: rewind forgets the data of all but the oldest WQE
	}
	for r.cur != r.tail {
		w := r.slot(r.cur)
		if w.kind != kindRead || !w.started || w.state != wqePosted && w.state != wqeProcessing || w.length == 0 || w.rcvd < w.length {
			return
		}
		n := int(r.pkts(w.length))
		if d := int(r.psn.Diff(w.origFirst)); d < 0 || d >= n {
			return
		}
		r.psn = w.origFirst.Add(n)
		w.off = w.length
		w.state = wqePending
		r.cur++
	}
}

// seekPSN moves the send cursor of the started SEND/WRITE w to the packet
// with PSN psn (clamped to the message), as rxe retry_first_write_send.
func (r *Requester) seekPSN(w *wqe, psn packet.PSN) {
	k := int64(psn.Diff(w.firstPSN))
	k = min(max(k, 0), int64(r.pkts(w.length))-1)
	w.seek(uint32(k) * r.pmtu)
}

// catchUp keeps the send cursor from lagging behind the completer: after a
// rewind, ACKs for packets of the previous round may complete WQEs or move
// the oldest unacknowledged PSN past the cursor, which then skips ahead.
func (r *Requester) catchUp() {
	if r.cur < r.head {
		r.cur = r.head
	}
	if r.psn.Before(r.compPSN) {
		if r.cur == r.head && r.cur != r.tail {
			if w := r.slot(r.cur); w.started && w.kind.segmented() {
				r.seekPSN(w, r.compPSN)
			}
		}
		r.psn = r.compPSN
	}
	r.skipReceived()
}

// localError fails w with a local error status found while building its
// packet (rxe_requester's err path): the QP must go to the error state.
// If w is the oldest WQE it completes now; otherwise it completes, with
// its status, when Flush reaches it.
func (r *Requester) localError(w *wqe, status verbs.WCStatus) {
	r.c.LocalErrors++
	w.state = wqeErrored
	w.status = status
	r.fail(status)
	if r.slot(r.head) == w {
		r.finish(w, status)
	}
	r.state = CompError
}
