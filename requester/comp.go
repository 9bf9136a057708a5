package requester

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// CompState is a state of the completer, named after rxe_comp.c's
// enum comp_state (COMPST_*).
type CompState uint8

// Completer states.
const (
	CompGetAck     CompState = iota // take the response to process
	CompGetWQE                      // find the oldest outstanding WQE
	CompCompWQE                     // complete a WQE acknowledged by a later PSN
	CompCompAck                     // complete the WQE the response ends
	CompCheckPSN                    // place the response's PSN against the WQE and the expected PSN
	CompCheckAck                    // check opcode sequence and syndrome
	CompRead                        // place read response data
	CompAtomic                      // place an atomic's original value
	CompWriteSend                   // an ACK for SEND/WRITE packets
	CompUpdateComp                  // advance the expected PSN
	CompErrorRetry                  // timeout, sequence NAK or implied NAK: go-back-N
	CompRNRRetry                    // RNR NAK: wait, then go-back-N
	CompError                       // complete the WQE with an error; the QP fails
	CompExit                        // nothing (more) to do; re-arm the retransmit timer
	CompDone                        // the response was consumed
)

var compStateNames = [...]string{
	"GET_ACK", "GET_WQE", "COMP_WQE", "COMP_ACK", "CHECK_PSN", "CHECK_ACK", "READ", "ATOMIC",
	"WRITE_SEND", "UPDATE_COMP", "ERROR_RETRY", "RNR_RETRY", "ERROR", "EXIT", "DONE",
}

// String returns the state's name as rxe_comp.c spells it without the
// COMPST_ prefix, e.g. "CHECK_PSN".
func (s CompState) String() string {
	if int(s) < len(compStateNames) {
		return compStateNames[s]
	}
	return "COMPST_" + strconv.Itoa(int(s))
}

// State returns the state the completer's last pass ended in: DONE, EXIT
// or ERROR.
func (r *Requester) State() CompState { return r.state }

// Trace appends to dst the states the completer's last pass (one Receive
// or one timer expiry) went through, up to 64, and returns the extended
// slice.
func (r *Requester) Trace(dst []CompState) []CompState {
	return append(dst, r.trace[:r.ntrace]...)
}

// Receive processes one response packet addressed to this QP whose ICRC
// has been checked: an ACK, NAK, RNR NAK, read response or atomic
// acknowledgement. Completions are posted, in order, as WQEs finish. A
// packet that is not an RC response, or arrives after the requester failed
// or was flushed, is counted and ignored.
func (r *Requester) Receive(now time.Time, p packet.Packet) {
	r.c.ResponsesRcvd++
	if r.stopped || p.Opcode().Transport() != packet.TransportRC || p.Mask()&packet.MaskAck == 0 {
		r.c.ResponsesDropped++
		return
	}
	if r.cfg.Credits {
		r.updateCredits(p)
	}
	oldComp, oldHead, losses := r.compPSN, r.head, r.lossRetries()
	if r.srHandles(&p) {
		r.srReceive(now, &p)
	} else {
		r.run(&p, now, false)
		// A READ that has just become the oldest is placed at its first
		// missing response (completeAhead) before advanceParts looks
		// for holes from the oldest unacknowledged PSN; what
		// advanceParts completes may hand over the next one.
		r.completeAhead()
		r.advanceParts()
		r.completeAhead()
	}
	r.onResponse(now, &p, oldComp, oldHead, losses)
	if r.stopped {
		return
	}
	r.catchUp()
	r.waitCredits(now)
	if r.ack > 0 {
		// rxe_completer re-arms the retransmit timer at COMPST_EXIT, which
		// it reaches after every response it has drained, useful or not,
		// while PSNs are outstanding. Responses that make no progress
		// (trains queued at the responder ahead of a replayed READ) thus
		// hold the timer off, and only silence from the peer times out.
		if r.psn.After(r.compPSN) {
			r.retrans.Arm(now.Add(r.ack))
		} else {
			r.retrans.Stop()
		}
	}
}

// OnTimeout handles the caller's timer: an expired RNR wait ends (sending
// resumes), and an expired retransmit timer starts a go-back-N retry (under
// selective repeat a probe of the oldest PSN, unless the lost-READ-request
// watch has just re-read it: srWatchAsked), or fails the oldest WQE with
// RETRY_EXC_ERR when retry_cnt is spent. Calls
// before Deadline (spurious firings) do nothing. Expired names the timers
// it acts on, for the trace: a timer added here is added there.
func (r *Requester) OnTimeout(now time.Time) {
	if r.stopped {
		return
	}
	if r.rnrWait.Expired(now) {
		r.rnrWait.Stop()
	}
	if r.probe.Expired(now) {
		// No credit update came: the probe may go (IBA 9.7.7.2.5).
		r.probe.Stop()
		r.probeOK = true
	}
	if r.sr.hold.Expired(now) {
		r.sr.hold.Stop() // the held resends may go
	}
	if r.sr.recheck.Expired(now) {
		r.srRecheck(now)
	}
	if r.sr.watch.Expired(now) {
		r.srWatchExpired(now)
	}
	if r.retrans.Expired(now) {
		r.retrans.Stop()
		r.c.Timeouts++
		r.run(nil, now, true)
		r.lossSeen(now)
		r.noteFailure()
		r.rec.probeDue, r.rec.probeOut = false, false
		if r.cfg.SelectiveRepeat && !r.stopped {
			if r.srWatchAsked(now) {
				// The oldest READ part was asked for again and the watch
				// waits for that re-read: it re-reads the part at the end
				// of its wait if it is still unanswered. Nothing is asked
				// for twice, and the IB timer runs on from now, so a dead
				// peer still spends retry_cnt.
				r.retrans.Arm(now.Add(r.ack))
			} else {
				// Selective repeat resends the oldest packet only
				// (errorRetry, srProbe).
				r.rec.probeDue = true
			}
		}
		r.rec.due.Stop() // the resend arms it again
	} else if r.rec.due.Expired(now) {
		r.onRecoveryTimeout(now)
	}
}

// Flush completes every WQE still in the send queue, oldest first, with
// WR_FLUSH_ERR (or the local error status a WQE already failed with); a
// completion is posted for each, signaled or not. Call it when the QP
// enters the error state. The requester then sends and accepts nothing;
// WQEs posted afterwards wait for the next Flush.
func (r *Requester) Flush() {
	for r.head != r.tail {
		w := r.slot(r.head)
		st := verbs.WCWRFlushErr
		if w.state == wqeErrored {
			st = w.status
		}
		r.finish(w, st)
	}
	r.cur = r.head
	r.stopped = true
	r.retrans.Stop()
	r.rnrWait.Stop()
	r.probe.Stop()
	r.rec.due.Stop()
	r.sr.hold.Stop()
	r.sr.recheck.Stop()
	r.sr.watch.Stop()
}

// updateCredits takes the end-to-end credits of an ACK-type AETH, also of
// a duplicate or unsolicited ACK that completes nothing: the limit
// sequence number is MSN + credits, never moved back, and the invalid
// credit code means no limit from then on (IBA 9.7.7.2.5; rdmavt
// rvt_get_credit). A raised limit ends the probe wait.
func (r *Requester) updateCredits(p packet.Packet) {
	a := p.AETH()
	if a == nil || !a.Syndrome().IsACK() {
		return
	}
	n, unlimited := packet.Credits(a.Syndrome().Value())
	if unlimited {
		r.unlimited = true
		r.probe.Stop()
		r.probeOK = false
		return
	}
	lsn := (a.MSN() + uint32(n)) & packet.PSNMask
	if !r.credited || packet.PSN(lsn).After(packet.PSN(r.lsn)) {
		r.credited = true
		r.lsn = lsn
		r.c.CreditUpdates++
		r.probe.Stop()
		r.probeOK = false
	}
}

func (r *Requester) resetBudgets() {
	r.retryBudget.Reset()
	r.rnrBudget.Reset()
	r.startedRetry, r.nakRetry = false, false
}

// run is one pass of the completer state machine (rxe_completer) over the
// response p, or over no response after a retransmit timeout. Each state
// has its method, as in rxe_comp.c; run only moves between them and
// records the trace.
func (r *Requester) run(p *packet.Packet, now time.Time, timeout bool) {
	r.ntrace = 0
	var w *wqe
	exited := false // EXIT has sent a timeout pass to ERROR_RETRY
	st := CompGetAck
	for {
		if r.ntrace < traceLen {
			r.trace[r.ntrace] = st
			r.ntrace++
		}
		r.state = st
		switch st {
		case CompGetAck:
			st = CompGetWQE
		case CompGetWQE:
			w, st = r.getWQE(p)
		case CompCheckPSN:
			st = r.checkPSN(p, w)
		case CompCheckAck:
			st = r.checkAck(p, w)
		case CompRead:
			st = r.doRead(p, w)
		case CompAtomic:
			st = r.doAtomic(p, w)
		case CompWriteSend:
			st = r.writeSend(p, w)
		case CompCompAck:
			st = r.completeAck(p, w)
		case CompCompWQE:
			st = r.completeWQE(p, w)
		case CompUpdateComp:
			st = r.updateComp(p)
		case CompErrorRetry:
			st = r.errorRetry(p, w, timeout)
		case CompRNRRetry:
			st = r.rnrRetry(p, w, now)
		case CompError:
			r.doError(w)
			return
		case CompExit:
			if timeout && w != nil && !exited {
				exited = true
				st = CompErrorRetry
				continue
			}
			r.exit(now)
			return
		case CompDone:
			return
		}
	}
}

// getWQE finds the oldest outstanding WQE (rxe get_wqe): with none started,
// a response is stale and a timeout pass has nothing to retry.
func (r *Requester) getWQE(p *packet.Packet) (*wqe, CompState) {
	var w *wqe
	if r.head != r.tail && !r.stopped {
		w = r.slot(r.head)
	}
	switch {
	case w == nil || !w.started:
		if p != nil {
			r.c.ResponsesDropped++
			return w, CompDone
		}
		return w, CompExit
	case w.state == wqeErrored:
		return w, CompError
	case p == nil:
		return w, CompExit
	}
	return w, CompCheckPSN
}

// doAtomic places an atomic's original value, in the local machine's byte
// order (rxe do_atomic copies the host u64).
func (r *Requester) doAtomic(p *packet.Packet, w *wqe) CompState {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], p.AtomicAckETH().Orig())
	if !r.scatter(w, b[:]) {
		w.status = verbs.WCLocProtErr
		return CompError
	}
	return CompCompAck
}

// writeSend handles an ACK for SEND/WRITE packets: it completes the WQE if
// it acknowledges the WQE's last PSN (rxe COMPST_WRITE_SEND).
func (r *Requester) writeSend(p *packet.Packet, w *wqe) CompState {
	if w.sentAll && p.PSN() == w.lastPSN {
		return CompCompAck
	}
	return CompUpdateComp
}

// completeAck completes the WQE the response ends (rxe complete_ack).
func (r *Requester) completeAck(p *packet.Packet, w *wqe) CompState {
	r.finish(w, verbs.WCSuccess)
	if !p.PSN().Before(r.compPSN) {
		return CompUpdateComp
	}
	return CompDone
}

// completeWQE completes w, which a later PSN acknowledged (rxe
// complete_wqe), and looks at the next WQE.
func (r *Requester) completeWQE(p *packet.Packet, w *wqe) CompState {
	if p != nil && !w.lastPSN.Before(r.compPSN) {
		r.compPSN = w.lastPSN.Next()
		r.compOp = compOpNone
	}
	r.finish(w, verbs.WCSuccess)
	return CompGetWQE
}

// updateComp advances the oldest unacknowledged PSN past p and records the
// read response in progress (rxe COMPST_UPDATE_COMP).
func (r *Requester) updateComp(p *packet.Packet) CompState {
	if p.Mask()&packet.MaskEnd != 0 {
		r.compOp = compOpNone
	} else {
		r.compOp = uint8(p.Opcode())
	}
	if !p.PSN().Before(r.compPSN) {
		r.compPSN = p.PSN().Next()
	}
	return CompDone
}

// doError completes w with its error status and fails the requester (rxe
// COMPST_ERROR): the owner moves the QP to the error state.
func (r *Requester) doError(w *wqe) {
	r.fail(w.status)
	r.finish(w, w.status)
	r.state = CompError
}

// exit re-arms the retransmit timer while PSNs are outstanding (rxe
// COMPST_EXIT).
func (r *Requester) exit(now time.Time) {
	if r.ack > 0 && !r.stopped && r.psn.After(r.compPSN) {
		r.retrans.Arm(now.Add(r.ack))
	}
}

// checkPSN places the response against the oldest WQE and the expected PSN
// (rxe check_psn).
func (r *Requester) checkPSN(p *packet.Packet, w *wqe) CompState {
	psn := p.PSN()
	if p.Opcode() == packet.RCAcknowledge && !psn.Before(r.highPSN) {
		// An ACK or NAK for a PSN never sent (a ghost, e.g. from an
		// earlier incarnation of the QP) answers nothing. Taken, it
		// would move the oldest unacknowledged PSN past the send cursor,
		// which catchUp follows, and the rest of the message in progress
		// would go with PSNs not its own (IBA 9.7.1).
		r.c.ResponsesDropped++
		return CompDone
	}
	if psn.After(w.lastPSN) {
		// The response is past this WQE: it acknowledges a SEND/WRITE
		// cumulatively, and means a READ/atomic response was lost (an
		// implied NAK).
		if w.kind.rdAtomic() {
			if w.state == wqePending {
				if w.kind == kindRead && p.Opcode() != packet.RCAcknowledge && r.readAheadOK() {
					// A response past the oldest READ: that READ's
					// last responses were lost; keep this one.
					r.placeAhead(p)
					r.gapRetry = true
				}
				return CompErrorRetry
			}
		} else if w.sentAll {
			r.resetBudgets()
			return CompCompWQE
		}
		r.c.ResponsesDropped++
		return CompDone
	}
	switch d := psn.Diff(r.compPSN); {
	case d < 0:
		// Most likely the ACK of a retried packet: it completes the WQE if
		// it is the WQE's last PSN.
		if psn == w.lastPSN && w.kind.segmented() && w.sentAll {
			return CompCompAck
		}
		if r.nakInReadTrain(p) {
			return CompCheckAck
		}
		r.c.ResponsesDropped++
		return CompDone
	case d > 0 && w.kind.rdAtomic():
		// Read responses and atomic ACKs must arrive in order: this one is
		// dropped. Inside a READ that has been sent, the gap means earlier
		// responses were lost or overtaken (a veth under a qdisc reorders
		// across CPUs), and the responses still to come of this train will
		// all be out of order too. rxe's check_psn leaves recovery to the
		// retransmit timer, which costs an ACK timeout (67 ms at perftest's
		// -u 14) and the rest of the train; this requester asks again from
		// the missing PSN at once, as for an implied NAK: one retry per
		// episode (errorRetry), a new episode after in-order progress. The
		// responder restarts the train it is sending at the duplicate's PSN
		// (responder.readReply), so little is sent twice.
		if w.kind == kindRead && w.state != wqePosted && p.Opcode() != packet.RCAcknowledge {
			// (An ACK there, the responder's re-ACK of a duplicate at
			// its ePSN-1, is no response of the READ: rxe check_psn
			// drops it, and every copy of it would start an episode.)
			if !psn.Before(r.psn) {
				// Past the send cursor: a response to a request of the
				// round before a go-back-N retry, which the cursor has
				// not asked for again yet. Not a gap of this round: a
				// retry for it would go back over nothing, and spent
				// retry_cnt on every such response (RETRY_EXC_ERR while
				// the peer was answering).
				r.c.ResponsesDropped++
				return CompDone
			}
			r.c.ReadGaps++
			r.gapRetry = true
			if r.replayPassedHole(w, psn) {
				// A new episode: errorRetry asks for the hole again.
				r.c.ReadRereadsLost++
				r.startedRetry = false
			}
			if r.partsAheadOK(w, p) {
				return r.placePart(p, w)
			}
			r.c.ResponsesDropped++
			return CompErrorRetry
		}
		r.c.ResponsesDropped++
		return CompDone
	}
	return CompCheckAck
}

// nakInReadTrain reports whether p, a response before the oldest
// unacknowledged PSN, is a fatal NAK (invalid request, remote access or
// remote operational error) that ends the read response train in
// progress. Kernel rxe's responder NAKs a READ that fails after some of
// its responses were sent with the READ request's PSN (read_reply,
// then acknowledge with pkt->psn), which the requester has passed by
// then; rxe check_psn therefore sends an ACKNOWLEDGE that arrives while
// a READ_RESPONSE_FIRST or MIDDLE is the last response placed to
// check_ack instead of dropping it. Only fatal NAKs are taken here: an
// ACK there acknowledges nothing (checkAETH drops it), and a sequence or
// RNR NAK for an old PSN names nothing to resend.
func (r *Requester) nakInReadTrain(p *packet.Packet) bool {
	if p.Opcode() != packet.RCAcknowledge ||
		r.compOp != uint8(packet.RCRDMAReadResponseFirst) && r.compOp != uint8(packet.RCRDMAReadResponseMiddle) {
		return false
	}
	syn := p.AETH().Syndrome()
	return syn.Type() == packet.SyndromeTypeNAK && syn.NAKCode() != packet.NAKPSNSeqError
}

// replayPassedHole reports whether psn, a response of the oldest READ w
// after its missing response at the oldest unacknowledged PSN, shows that
// the answer to the retry of that hole was lost. A responder answers
// requests in PSN order, so the responses that reach the requester out of
// order after a hole come with rising PSNs, except where a stream that
// answers a repeated request (the retry's, or a probe's) starts over;
// that stream starts at the hole (IBA 9.7.5.1.1: a duplicate READ is
// answered from its PSN; rxe serves it after its current stream, this
// responder rewinds the train to it, responder.restartTrain). So a PSN
// not after the out-of-order one before it, while the oldest PSN has not
// moved, belongs to a stream that passed the hole without delivering it.
// It counts only once the retry left (the READ is not waiting to be sent
// again) and only within srReorder PSNs of the hole, where such a stream
// resumes: responses merely reordered on the way also fall back, but
// anywhere, and the retries they started, each rewinding the responder's
// train to the hole, spent retry_cnt (RETRY_EXC_ERR in a read-bw -s
// 4194304 run with --reorder 0.02,dir=recv,by=3 and no loss; none in 12
// such runs with this rule). Every later PSN of the same stream rises
// again. Without it each lost answer to a retry waited for the recovery
// timer: 161 of the 228 expiries of a traced read-bw -s 1048576 run with
// 5 % of the responses lost and selective repeat off followed a re-read
// whose first response never came.
func (r *Requester) replayPassedHole(w *wqe, psn packet.PSN) bool {
	o := &r.ooo
	end := r.holeEnd(w)
	passed := o.seen && o.since == r.compPSN && !psn.After(o.psn) && psn.Before(end) &&
		int(psn.Diff(r.compPSN)) <= srReorder && r.startedRetry && !w.rereadDue
	o.seen, o.psn, o.since = true, psn, r.compPSN
	return passed
}

// holeEnd returns the PSN after the last one a retry of the oldest READ w
// asks for: the end of the READ, or of the part with the hole.
func (r *Requester) holeEnd(w *wqe) packet.PSN {
	if w.kind == kindRead && r.multiPart(w) {
		return w.origFirst.Add(int((r.partOf(w, r.compPSN) + 1) * w.parts))
	}
	return w.lastPSN.Next()
}

// forgetOldStream is called as a retry of the oldest WQE w leaves (a
// re-read of its hole, or a go-back-N rewind). An out-of-order response
// recorded before it (r.ooo) short of the end of the range the retry asks
// for belongs to a stream whose later responses may still come, overtaken
// on the way: one of them falling below it is no sign that the retry's
// answer passed the hole (replayPassedHole), and taken for one it started
// a retry and spent retry_cnt for a reordering. A stream seen to its end
// before the retry left sends nothing more; the mark stays.
func (r *Requester) forgetOldStream(w *wqe) {
	if o := &r.ooo; o.seen && o.psn.Next().Before(r.holeEnd(w)) {
		o.seen = false
	}
}

// checkAck checks the opcode sequence of read responses and dispatches on
// opcode and syndrome (rxe check_ack).
func (r *Requester) checkAck(p *packet.Packet, w *wqe) CompState {
	op := p.Opcode()
	psn := p.PSN()
	if r.compOp == compOpNone {
		if p.Mask()&packet.MaskStart == 0 {
			return r.badResponse(w)
		}
	} else if op != packet.RCRDMAReadResponseMiddle && op != packet.RCRDMAReadResponseLast &&
		op != packet.RCAcknowledge {
		// A retried READ may be answered from the retry PSN with FIRST or
		// ONLY (rdmavt, and our responder) as well as with MIDDLE/LAST (rxe);
		// a READ asked in parts (readchunk.go) restarts at any part's PSN.
		restart := psn == w.firstPSN || r.readInParts(w)
		if !(op == packet.RCRDMAReadResponseFirst && restart ||
			op == packet.RCRDMAReadResponseOnly && (w.firstPSN == w.lastPSN || restart)) {
			return r.badResponse(w)
		}
	}

	switch op {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly:
		if !p.AETH().Syndrome().IsACK() {
			return r.badResponse(w)
		}
		fallthrough
	case packet.RCRDMAReadResponseMiddle:
		if w.kind != kindRead && !(w.kind == kindAtomicWrite && op == packet.RCRDMAReadResponseOnly) {
			w.status = verbs.WCFatalErr
			return CompError
		}
		r.resetBudgets()
		return CompRead

	case packet.RCAtomicAcknowledge:
		if !p.AETH().Syndrome().IsACK() || w.kind != kindAtomic {
			return r.badResponse(w)
		}
		r.resetBudgets()
		return CompAtomic

	case packet.RCAcknowledge:
		return r.checkAETH(p, w)
	}
	return r.badResponse(w)
}

// checkAETH dispatches an ACKNOWLEDGE on its AETH syndrome (rxe
// check_ack, IB_OPCODE_RC_ACKNOWLEDGE): an ACK of SEND/WRITE packets, an
// RNR NAK, a PSN sequence error NAK (a retry) or a fatal NAK.
func (r *Requester) checkAETH(p *packet.Packet, w *wqe) CompState {
	psn := p.PSN()
	syn := p.AETH().Syndrome()
	switch syn.Type() {
	case packet.SyndromeTypeACK:
		if w.kind.rdAtomic() {
			// An ACK cannot answer a READ or an atomic.
			r.c.ResponsesDropped++
			return CompDone
		}
		r.resetBudgets()
		return CompWriteSend
	case packet.SyndromeTypeRNR:
		r.c.RcvdRNRErr++
		return CompRNRRetry
	case packet.SyndromeTypeNAK:
		switch syn.NAKCode() {
		case packet.NAKPSNSeqError:
			// A sequence NAK implicitly acknowledges the PSNs before it.
			// If that moves the oldest unacknowledged PSN, it is forward
			// progress: the retry budget is refilled and this retry is a
			// new episode (rxe leaves both alone, so under steady loss a
			// long message could exhaust retry_cnt while advancing).
			r.c.RcvdSeqErr++
			if psn.After(r.compPSN) {
				r.compPSN = psn
				r.resetBudgets()
			}
			return CompErrorRetry
		case packet.NAKInvalidRequest:
			w.status = verbs.WCRemInvReqErr
		case packet.NAKRemoteAccess:
			w.status = verbs.WCRemAccessErr
		default: // remote operational error, and unknown codes (rxe)
			w.status = verbs.WCRemOpErr
		}
		// VendorErr names the NAK that ends the WQE; a sequence NAK
		// above only starts a retry, and names a RETRY_EXC_ERR only if
		// it is the one that spends retry_cnt (errorRetry).
		w.vendor = uint32(syn)
		return CompError
	}
	return r.badResponse(w)
}

// badResponse fails w with BAD_RESP_ERR: an unexpected opcode or a
// malformed response (the IBA "bad response" requester error).
func (r *Requester) badResponse(w *wqe) CompState {
	w.status = verbs.WCBadRespErr
	return CompError
}

// doRead places the data of an in-order read response at its offset in
// the WQE's SGEs (rxe do_read); the response to an ATOMIC_WRITE is an
// empty READ_RESPONSE_ONLY.
func (r *Requester) doRead(p *packet.Packet, w *wqe) CompState {
	data := p.Payload()
	n := uint32(len(data))
	if w.kind == kindAtomicWrite {
		if n != 0 {
			return r.badResponse(w)
		}
		return CompCompAck
	}
	// Responses carry request PSN + i and data offset i × PMTU.
	if d := p.PSN().Diff(w.origFirst); d < 0 || uint64(d)*uint64(r.pmtu) != uint64(w.rcvd) {
		r.c.ResponsesDropped++
		return CompDone
	}
	if !r.readLenOK(w, p.Opcode(), n) {
		return r.badResponse(w)
	}
	if !r.scatter(w, data) {
		w.status = verbs.WCLocProtErr
		return CompError
	}
	w.rcvd += n
	r.c.ReadBytes += uint64(n)
	if r.sr.ngot > 0 {
		// This PSN may be marked as placed past a hole (placePart); the
		// oldest unacknowledged PSN now passes it here, not in
		// advanceParts (which does not run while a retry has rewound the
		// READ). Its mark goes with it: left set, it would stand for the
		// response srTrack PSNs later, never received, and advanceParts
		// would count that response's bytes as placed.
		r.sr.clearGot(p.PSN())
	}
	if p.Mask()&packet.MaskEnd != 0 && w.rcvd == w.length {
		return CompCompAck
	}
	return CompUpdateComp
}

// readLenOK reports whether a READ response of opcode op carrying n bytes
// fits the READ w at its next offset (w.rcvd): FIRST and MIDDLE carry a
// full PMTU with more of the message to come; LAST and ONLY carry the
// rest, or end a READ part (chunkEnd). doRead checks it for the oldest
// READ, placeAhead for the ones after it.
func (r *Requester) readLenOK(w *wqe, op packet.Opcode, n uint32) bool {
	resid := w.length - w.rcvd
	switch op {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle:
		return n == r.pmtu && resid > r.pmtu
	default: // LAST, ONLY
		return n == resid && resid <= r.pmtu || r.chunkEnd(w, n, resid)
	}
}

// errorRetry starts a go-back-N retry after a timeout, a sequence NAK or
// an implied NAK, or fails the oldest WQE when retry_cnt is spent (rxe
// COMPST_ERROR_RETRY).
//
// A RETRY_EXC_ERR carries the syndrome of the sequence error NAK p that
// spent the last retry as VendorErr, and 0 when a timeout or an implied
// NAK did.
func (r *Requester) errorRetry(p *packet.Packet, w *wqe, timeout bool) CompState {
	gap := r.gapRetry && !timeout
	r.gapRetry = false
	if w == nil || w.state == wqePosted {
		return CompDone // nothing sent in this round: a retry is under way
	}
	if r.startedRetry && !timeout {
		return CompDone // one retry per episode, unless the timer fired
	}
	if !r.retryBudget.Consume() {
		r.c.RetryExceededErr++
		w.status = verbs.WCRetryExcErr
		if p != nil && p.Opcode() == packet.RCAcknowledge && p.AETH().Syndrome().Type() == packet.SyndromeTypeNAK {
			w.vendor = uint32(p.AETH().Syndrome())
		}
		return CompError
	}
	if timeout && r.cfg.SelectiveRepeat {
		// Selective repeat never goes back N: the timeout resends the
		// oldest unacknowledged packet only (OnTimeout, srProbe).
		return CompDone
	}
	if gap && r.readAheadOK() {
		// Only the oldest READ's rest is asked for again; the READs
		// after it keep their responses (readahead.go).
		r.c.CompleterRetryErr++
		r.retryLog |= RetryRereadOldest
		r.startedRetry, r.nakRetry = true, true
		r.rereadOldest(w)
		return CompDone
	}
	if r.psn.After(r.compPSN) {
		r.c.CompleterRetryErr++
		r.retryLog |= RetryRewind
		r.rewind()
		r.startedRetry, r.nakRetry = true, !timeout
		r.doubleFirst = !timeout && !r.rec.cfg.Off
	}
	return CompDone
}

// rnrRetry waits the RNR NAK's timer, then retries from its PSN, or fails
// the oldest WQE when rnr_retry is spent (rxe COMPST_RNR_RETRY).
//
// The rewind counts as a retry in progress (startedRetry), which rxe's
// RNR path does not set: a sequence NAK the responder sent before its RNR
// NAK, arriving after it, then starts no retry of its own and spends no
// retry_cnt. The price: should the resend after the RNR wait itself be
// lost, a sequence NAK for it also starts nothing, and the recovery timer
// (or, with the recovery off, the IB timeout) resends it.
func (r *Requester) rnrRetry(p *packet.Packet, w *wqe, now time.Time) CompState {
	if w.state == wqePosted {
		return CompDone // a late RNR NAK from before the current retry
	}
	if !r.rnrBudget.Consume() {
		r.c.RNRRetryExceededErr++
		w.status = verbs.WCRNRRetryExcErr
		w.vendor = uint32(p.AETH().Syndrome())
		return CompError
	}
	if p.PSN().After(r.compPSN) {
		r.compPSN = p.PSN()
	}
	r.rewind()
	r.startedRetry, r.nakRetry, r.rnrRewound = true, false, true
	r.rnrWait.Arm(now.Add(retry.RNRDelay(p.AETH().Syndrome().Value())))
	return CompDone
}

// finish completes the oldest WQE w with status: releases its
// max_rd_atomic slot, posts its completion if it is signaled or failed
// (IBA 10.7.3.1), and removes it from the queue (rxe do_complete).
func (r *Requester) finish(w *wqe, status verbs.WCStatus) {
	if w.hasRdAtomic {
		w.hasRdAtomic = false
		r.rdInUse--
	}
	if w.partsSet && w.parts > 0 {
		w.partsSet = false
		r.partsWQEs--
	}
	if status != verbs.WCSuccess || r.cfg.SigAll || w.flags&verbs.SendSignaled != 0 {
		r.wc = verbs.WC{
			ID:     w.id,
			Status: status,
			Opcode: verbs.WCOpcodeOf(w.op),
			// rxe reports the message length for every send completion.
			ByteLen: w.length,
			QPNum:   r.cfg.QPN,
		}
		if status != verbs.WCSuccess {
			r.wc.VendorErr = w.vendor
		}
		if w.op == verbs.WRSendWithImm || w.op == verbs.WRRDMAWriteWithImm {
			r.wc.Flags = verbs.WCFlagWithImm
		}
		r.c.Completions++
		if !r.cq.Complete(&r.wc) {
			r.c.CQOverflow++
			r.fail(verbs.WCFatalErr)
		}
	}
	if status != verbs.WCWRFlushErr && (w.op == verbs.WRSend || w.op == verbs.WRSendWithImm || w.op == verbs.WRSendWithInv) {
		r.c.RDMASends++ // rxe do_complete counts a completed SEND WQE; flush_send_wqe does not
	}
	if r.sr.ngot > 0 && !r.cfg.SelectiveRepeat {
		r.forgetMarks(w)
	}
	if w.kind == kindRead && r.readsSinceRepair < partsHold {
		r.readsSinceRepair++
	}
	r.head++
	r.sq.Pop()
}

// fail records the first fatal error and stops the requester.
func (r *Requester) fail(status verbs.WCStatus) {
	if !r.failed {
		r.failed, r.failStatus = true, status
	}
	r.stopped = true
	r.retrans.Stop()
	r.rnrWait.Stop()
	r.probe.Stop()
	r.rec.due.Stop()
	r.sr.hold.Stop()
	r.sr.recheck.Stop()
	r.sr.watch.Stop()
}
