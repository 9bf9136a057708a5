package rxe

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/responder"
)

// TraceKind is the kind of a TraceEvent.
type TraceKind string

// Trace event kinds.
const (
	// TraceSend: an engine built a packet (Engine, Opcode, PSN).
	TraceSend TraceKind = "send"
	// TraceRecv: the QP received a packet (Engine: the one it went to).
	TraceRecv TraceKind = "recv"
	// TraceStates: the states one pass of the completer (rxe_comp.c
	// COMPST_*) or the responder (rxe_resp.c RESPST_*) went through.
	TraceStates TraceKind = "states"
	// TraceTimerArm: the retransmission or RNR timer was armed (Deadline).
	TraceTimerArm TraceKind = "timer_arm"
	// TraceTimerFire: a requester timer expired (Timer), and what the
	// requester sends first because of it (Action, PSN). Only the
	// retransmit timer runs the completer: its states and any retry
	// follow.
	TraceTimerFire TraceKind = "timer_fire"
	// TraceRetry: the requester starts to resend (Cause; Resend, PSN): a
	// retry the completer started (one that completer_retry_err counts,
	// not every pass through ERROR_RETRY: rxe starts one per episode
	// unless the timer fired), also outside ERROR_RETRY (a re-read of a
	// READ's rest, a probe's answer), an RNR NAK's that started an RNR
	// wait, or a selective-repeat hole report's.
	TraceRetry TraceKind = "retry"
	// TraceComplete: a completion was posted (WC).
	TraceComplete TraceKind = "complete"
	// TraceQPState: the QP changed state (From, To).
	TraceQPState TraceKind = "qp_state"
)

// Retry causes of a TraceRetry event.
const (
	RetryTimeout    = "timeout"
	RetrySeqNAK     = "sequence NAK"
	RetryImpliedNAK = "implied NAK"
	RetryRNR        = "RNR NAK"
	// RetryReadAhead: a READ after the oldest got a response past the
	// one it waits for; its rest is asked for again (readGapAhead).
	RetryReadAhead = "gap in a later READ"
	// RetryReadHole: the oldest READ, asked for in parts, has a hole
	// before responses placed ahead; its rest is asked for again.
	RetryReadHole = "hole in the oldest READ"
	// RetryProbeAnswered: the answer to a tail-loss probe acknowledged
	// exactly the probed PSN, so the packets after it were lost: go-back-N
	// at once, as a sequence NAK would (probeAnswered).
	RetryProbeAnswered = "probe answered"
	// RetryHoleReport: a selective-repeat responder reported a hole
	// (packet.NAKSelectiveRepeat); its PSNs are resent.
	RetryHoleReport = "hole report"
	// RetryLostResponse: under selective repeat the requester found READ
	// responses or an atomic acknowledgement lost, srReorder later PSNs
	// having been answered (requester.RetryLostDetected).
	RetryLostResponse = "lost response"
)

// TraceEvent is one event of a QP, as Options.Trace receives it.
type TraceEvent struct {
	// Time is when the device recorded the event (time.Now, with its
	// monotonic reading, as it handed the event to Options.Trace): a
	// packet received in a batch is stamped when its QP takes it, not
	// when the batch was read.
	Time time.Time `json:"-"`
	// Device is the device's address; QPN the QP's number.
	Device string    `json:"dev"`
	QPN    uint32    `json:"qpn"`
	Kind   TraceKind `json:"ev"`
	// Engine is "requester", "completer" or "responder" ("qp" for QP
	// state changes).
	Engine string `json:"engine,omitempty"`
	// Opcode and PSN of a sent or received packet; Syndrome and MSN of
	// its AETH.
	Opcode string `json:"op,omitempty"`
	PSN    uint32 `json:"-"`
	// HasPSN says an event other than a packet's names a PSN (written
	// as "psn"): the PSN a retry resends from, or a timer_fire's
	// action's.
	HasPSN   bool   `json:"-"`
	Syndrome string `json:"syndrome,omitempty"`
	MSN      uint32 `json:"msn,omitempty"`
	// States a pass went through, with rxe's names.
	States []string `json:"states,omitempty"`
	// Deadline of an armed timer, from Time; of an RNR retry, the RNR
	// wait it started.
	Deadline time.Duration `json:"deadline_ns,omitempty"`
	// Cause of a retry.
	Cause string `json:"cause,omitempty"`
	// Resend says what is sent again: on a retry, what it resends (from
	// PSN, when known); on a requester's send, the kind of resend the
	// packet is, empty for a first transmission ("go_back_n", "rnr",
	// "tail_probe", "double", "reread", "selective_repeat";
	// requester.Resend).
	Resend string `json:"resend,omitempty"`
	// Timer names the requester timers a timer_fire is for, joined by
	// "+": "retransmit" (the local ACK timeout), "rnr_wait" (the end of
	// an RNR wait), "recovery" (the recovery timer), "credit_probe",
	// "sr_hold", "sr_recheck", "sr_watch" (requester.Timer).
	Timer string `json:"timer,omitempty"`
	// Action of a timer_fire: the resend the requester builds next
	// ("go_back_n", "rnr", "tail_probe", "double", "reread",
	// "selective_repeat", requester.Resend) from PSN, "credit_probe", or
	// "none".
	Action string `json:"action,omitempty"`
	// From and To of a QP state change.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// WC of a completion: its status, opcode and work request ID.
	Status string `json:"status,omitempty"`
	WCOp   string `json:"wc_opcode,omitempty"`
	WRID   uint64 `json:"wr_id,omitempty"`
}

// NewTraceWriter returns an Options.Trace sink that writes one JSON
// object per line to w, with "t", the seconds since the first event
// (monotonic), first. It is safe for concurrent use by several devices.
// The lines' times never go back: an event stamped a moment before the
// line above it, whose goroutine took the writer's lock first, is written
// at that line's time, so the file reads as a timeline in its own order.
// Write errors after the first are dropped, and the first is returned by
// the error func. Each line is one Write of w, made while the device
// holds the traced QP's lock: for a file, pass a bufio.Writer and flush
// it after Device.Close, as rxectl's --trace does, so that the transport
// does not wait for a system call per event.
func NewTraceWriter(w io.Writer) (sink func(TraceEvent), err func() error) {
	var (
		mu    sync.Mutex
		first time.Time
		last  time.Duration // the time of the line written last
		buf   []byte
		werr  error
	)
	sink = func(ev TraceEvent) {
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return
		}
		if first.IsZero() {
			first = ev.Time
		}
		line := traceLine{TraceEvent: ev}
		if ev.Kind == TraceSend || ev.Kind == TraceRecv || ev.HasPSN {
			line.PSN = &ev.PSN
		}
		body, _ := json.Marshal(line) // a struct of strings and numbers
		last = max(last, ev.Time.Sub(first))
		buf = append(buf[:0], `{"t":`...)
		buf = appendSeconds(buf, last)
		buf = append(buf, ',')
		buf = append(buf, body[1:]...)
		buf = append(buf, '\n')
		_, werr = w.Write(buf)
	}
	return sink, func() error {
		mu.Lock()
		defer mu.Unlock()
		return werr
	}
}

// traceLine is a TraceEvent as NewTraceWriter writes it: the PSN only for
// packets (its field shadows the event's).
type traceLine struct {
	TraceEvent
	PSN *uint32 `json:"psn,omitempty"`
}

// appendSeconds appends d in seconds with nanosecond digits.
func appendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	s := int64(d / time.Second)
	ns := int64(d % time.Second)
	b = appendInt(b, s)
	b = append(b, '.')
	for div := int64(100000000); div > 0; div /= 10 {
		b = append(b, byte('0'+ns/div%10))
	}
	return b
}

func appendInt(b []byte, v int64) []byte {
	if v >= 10 {
		b = appendInt(b, v/10)
	}
	return append(b, byte('0'+v%10))
}

// tracing reports whether the device traces (the hot path's only cost).
func (qp *QP) tracing() bool { return qp.dev.opts.Trace != nil }

// emit stamps ev (unless its Time is set), fills in the QP's identity and
// hands ev to the sink.
func (qp *QP) emit(ev TraceEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Device = qp.dev.Addr().String()
	ev.QPN = qp.qpn
	qp.dev.opts.Trace(ev)
}

// tracePacket describes the packet b (BTH onwards) into ev.
func tracePacket(ev *TraceEvent, b []byte) {
	p, err := packet.Parse(b)
	if err != nil {
		ev.Opcode = "MALFORMED"
		return
	}
	ev.Opcode, ev.PSN = p.Opcode().String(), uint32(p.PSN())
	if a := p.AETH(); a != nil {
		ev.Syndrome, ev.MSN = a.Syndrome().String(), a.MSN()
	}
}

// sendMark is the requester's counters before it built a packet, from
// which traceSend tells what kind of resend the packet is; ok is false for
// the responder's packets.
type sendMark struct {
	c    requester.Counters
	loss uint64 // LossSignals
	ok   bool
}

// markSend returns the sendMark before src builds a packet.
func (qp *QP) markSend(src packetSource) sendMark {
	if qp.req == nil || src != packetSource(qp.req) {
		return sendMark{}
	}
	return sendMark{c: qp.req.Counters(), loss: qp.req.LossSignals(), ok: true}
}

// resendKind tells from the requester's counters before (m) and after a
// packet was built what kind of resend it is: a tail-loss probe (counted
// by probeSent), the second copy of a go-back-N retry's first packet
// (retry_doubled), a re-read of a READ's missing range (read_holes_rereads),
// a selective-repeat resend (sr_packets_resent), or else, for a PSN sent
// before (Retransmits), go-back-N: an RNR NAK's retry if it is no loss
// resend (LossSignals did not grow: rnrRewound), else a loss's (rxe
// req_retry).
func (qp *QP) resendKind(m *sendMark) requester.Resend {
	c := qp.req.Counters()
	switch {
	case c.Recovery.TailProbes != m.c.Recovery.TailProbes:
		return requester.ResendProbe
	case c.RetryDoubled != m.c.RetryDoubled:
		return requester.ResendDouble
	case c.ReadHoleRereads != m.c.ReadHoleRereads:
		return requester.ResendReread
	case c.SRPacketsResent != m.c.SRPacketsResent:
		return requester.ResendSelective
	case c.Retransmits == m.c.Retransmits:
		return requester.ResendNone
	case qp.req.LossSignals() == m.loss:
		return requester.ResendRNR
	}
	return requester.ResendGoBackN
}

// traceSend records a packet an engine built; m is the requester before
// it (caller holds mu).
func (qp *QP) traceSend(engine string, b []byte, m *sendMark) {
	ev := TraceEvent{Kind: TraceSend, Engine: engine}
	tracePacket(&ev, b)
	if m.ok {
		ev.Resend = qp.resendKind(m).String()
	}
	qp.emit(ev)
}

// takePacketsTraced is takePackets when the device traces: it records
// each packet with the kind of resend it is (the requester's counters
// before and after it, sendMark), which the untraced loop never reads.
func (qp *QP) takePacketsTraced(now time.Time, src packetSource, who string, msgs []netdev.Message, owners []*QP, k int) int {
	var mark sendMark
	for ; k < len(msgs); k++ {
		mark = qp.markSend(src)
		n := src.NextPacket(now, msgs[k].Buf[:cap(msgs[k].Buf)])
		if n == 0 {
			break
		}
		qp.traceSend(who, msgs[k].Buf[:n], &mark)
		qp.addressed(msgs, owners, k, n)
	}
	return k
}

// traceRecv records a received packet, before the engine takes it
// (caller holds mu).
func (qp *QP) traceRecv(p packet.Packet) {
	ev := TraceEvent{Kind: TraceRecv, Engine: "responder"}
	if p.Mask()&packet.MaskReq == 0 {
		ev.Engine = "completer"
	}
	tracePacket(&ev, p.Bytes())
	qp.emit(ev)
}

// compMark is the requester as traceCompleter compares it after a pass:
// the end of its RNR wait before the pass; for a timer expiry, the timers
// that expired.
type compMark struct {
	rnrWait time.Time
	timers  requester.Timer
}

// markCompleter returns the requester's compMark before it takes a
// packet or a timer expiry; the zero compMark without a requester.
func (qp *QP) markCompleter() compMark {
	if qp.req == nil {
		return compMark{}
	}
	qp.req.TakeRetryKinds() // those of passes no trace followed
	return compMark{rnrWait: qp.req.RNRWait()}
}

// tracePass records the pass of the engine that took p; mark is the
// requester before it took p (caller holds mu).
func (qp *QP) tracePass(p packet.Packet, mark compMark) {
	if p.Mask()&packet.MaskReq == 0 {
		if qp.req != nil {
			qp.traceCompleter(&p, mark)
		}
		return
	}
	qp.traceResponder()
}

// traceCompleter records the completer's last pass and a retry event
// for each retry the requester started since mark (mark is the requester
// before it): the pass ran for p, or for the timer when p is nil. A
// response that the selective-repeat completer took (a hole report, an
// ACK, a READ response) leaves no states, but may start resends.
func (qp *QP) traceCompleter(p *packet.Packet, mark compMark) {
	states := qp.req.Trace(nil)
	rnr := false
	if len(states) > 0 {
		names := make([]string, len(states))
		for i, s := range states {
			names[i] = s.String()
			if s == requester.CompRNRRetry {
				// rxe's COMPST_RNR_RETRY starts an RNR retry, and arms
				// rnr_nak_timer, only while the WQE is still being
				// processed: an RNR NAK that comes after the retry under
				// way reset it (req_retry) starts none, and the wait
				// stays as it was. A wait armed anew is one started.
				wait := qp.req.RNRWait()
				rnr = !wait.IsZero() && !wait.Equal(mark.rnrWait)
			}
		}
		qp.emit(TraceEvent{Kind: TraceStates, Engine: "completer", States: names})
	}
	kinds := qp.req.TakeRetryKinds()
	if kinds == 0 && !rnr {
		return
	}
	retry := func(cause string, k requester.Resend, psn packet.PSN, hasPSN bool) TraceEvent {
		return TraceEvent{Kind: TraceRetry, Engine: "requester", Cause: cause, Resend: k.String(),
			PSN: uint32(psn), HasPSN: hasPSN}
	}
	if kinds&requester.RetryRewind != 0 {
		// rxe's COMPST_ERROR_RETRY starts a retry once per episode
		// unless the timer fired, and none with nothing sent yet or
		// retry_cnt spent: only a pass that started one has its event.
		cause := RetryImpliedNAK
		switch {
		case p == nil:
			cause = RetryTimeout
		case p.AETH() != nil && p.AETH().Syndrome().IsNAK():
			cause = RetrySeqNAK
		}
		qp.emit(retry(cause, requester.ResendGoBackN, qp.req.SQPSN(), true))
	}
	if kinds&requester.RetryRereadOldest != 0 {
		// A gap in the oldest READ's responses: a response past the
		// READ (an implied NAK, IBA 9.7.5.1.1; rxe check_psn's
		// COMPST_ERROR_RETRY) or inside it (which rxe check_psn drops,
		// leaving it to the timer; checkPSN takes it alike). errorRetry
		// asks for the READ's rest again from the oldest unacknowledged
		// PSN instead of going back N (readahead.go).
		qp.emit(retry(RetryImpliedNAK, requester.ResendReread, qp.req.OldestPSN(), true))
	}
	if kinds&requester.RetryPartsHole != 0 {
		qp.emit(retry(RetryReadHole, requester.ResendReread, qp.req.OldestPSN(), true))
	}
	if kinds&requester.RetryReadAhead != 0 {
		// The re-read's PSN is the later READ's; its send event names it.
		qp.emit(retry(RetryReadAhead, requester.ResendReread, 0, false))
	}
	if kinds&requester.RetryProbeAnswered != 0 {
		qp.emit(retry(RetryProbeAnswered, requester.ResendGoBackN, qp.req.SQPSN(), true))
	}
	if rnr {
		ev := retry(RetryRNR, requester.ResendRNR, qp.req.SQPSN(), true)
		ev.Time = time.Now()
		ev.Deadline = qp.req.RNRWait().Sub(ev.Time)
		qp.emit(ev)
	}
	if kinds&requester.RetryHoleReport != 0 && p != nil {
		// A selective-repeat hole report the requester took: the PSNs
		// from p's to its AETH's go on the resend list (srHole).
		qp.emit(retry(RetryHoleReport, requester.ResendSelective, p.PSN(), true))
	}
	if kinds&requester.RetryLostDetected != 0 {
		psn, read := qp.req.LostDetected()
		k := requester.ResendSelective
		if read {
			k = requester.ResendReread
		}
		qp.emit(retry(RetryLostResponse, k, psn, true))
	}
}

// traceTimer records a timer expiry at now: which of the requester's
// timers expired, what the requester sends first because of it (the
// resend NextPacket builds next, or "none") and, for the retransmit timer
// only, the completer pass it ran (rxe's retrans_timer runs the completer;
// rnr_nak_timer and the recovery, credit and selective-repeat timers do
// not, and the requester's last pass is not repeated for them). mark is
// the requester before the expiry.
func (qp *QP) traceTimer(now time.Time, mark compMark) {
	ev := TraceEvent{Kind: TraceTimerFire, Engine: "completer", Timer: mark.timers.String()}
	ev.Action = "none"
	if k, psn := qp.req.NextResend(now); k != requester.ResendNone {
		ev.Action, ev.PSN, ev.HasPSN = k.String(), uint32(psn), true
	} else if mark.timers&requester.TimerCredit != 0 && qp.req.Pending() {
		ev.Action = "credit_probe" // the message past the credit limit may go (IBA 9.7.7.2.5)
	}
	qp.emit(ev)
	if mark.timers&requester.TimerRetransmit != 0 {
		qp.traceCompleter(nil, mark)
	}
}

// traceArm records the timer being armed for dl.
func (qp *QP) traceArm(dl time.Time) {
	now := time.Now()
	qp.emit(TraceEvent{Time: now, Kind: TraceTimerArm, Engine: "requester", Deadline: dl.Sub(now)})
}

// traceState records a QP state change.
func (qp *QP) traceState(from, to QPState) {
	if from != to {
		qp.emit(TraceEvent{Kind: TraceQPState, Engine: "qp", From: from.String(), To: to.String()})
	}
}

// responderTrace is the responder's Env.Trace when tracing: it collects the
// states of one pass, which traceResponder then emits.
func (qp *QP) responderTrace() func(responder.State) {
	if !qp.tracing() {
		return nil
	}
	return func(s responder.State) { qp.respStates = append(qp.respStates, s.String()) }
}

// traceResponder emits the responder's collected states (caller holds mu).
func (qp *QP) traceResponder() {
	if len(qp.respStates) == 0 {
		return
	}
	qp.emit(TraceEvent{Kind: TraceStates, Engine: "responder", States: qp.respStates})
	qp.respStates = nil
}

// tracedSink is the CQ sink of a traced QP: it records each completion.
type tracedSink struct {
	cqSink
	qp     *QP
	engine string
}

// sink returns the completion sink for cq: cqSink, or tracedSink when the
// device traces.
func (qp *QP) sink(cq *CQ, engine string) interface {
	Complete(*WC) bool
	CompleteSolicited(*WC, bool) bool
} {
	if !qp.tracing() {
		return cqSink{cq}
	}
	return tracedSink{cqSink{cq}, qp, engine}
}

func (s tracedSink) record(wc *WC) {
	s.qp.emit(TraceEvent{Kind: TraceComplete, Engine: s.engine,
		Status: wc.Status.String(), WCOp: wc.Opcode.String(), WRID: wc.ID})
}

// Complete implements the engines' completion sink.
func (s tracedSink) Complete(wc *WC) bool {
	s.record(wc)
	return s.cqSink.Complete(wc)
}

// CompleteSolicited implements responder.SolicitedCompletions.
func (s tracedSink) CompleteSolicited(wc *WC, solicited bool) bool {
	s.record(wc)
	return s.cqSink.CompleteSolicited(wc, solicited)
}
