package requester

import (
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// RecoveryConfig tunes loss recovery in round trips (docs/recovery.md). The
// zero value turns everything on with the defaults; nothing here changes
// the wire format, so it works against any IBTA peer.
type RecoveryConfig struct {
	// Off turns the recovery timer, the tail-loss probe and the second
	// copy of a go-back-N retry's first packet (doubleResend) off: losses
	// that no NAK reports are then recovered by the IB local ACK timeout
	// only, and every retry sends each packet once, as kernel rxe does.
	Off bool
	// FixedWindow keeps the go-back-N window at Config.Window instead of
	// adapting it to loss (retry.Window).
	FixedWindow bool
	// Floor is the shortest recovery timeout. 0 selects
	// retry.DefaultRecoveryFloor for the recovery timer, retry.RetryFloor
	// during a go-back-N retry that a NAK started, and no floor beyond the
	// RTO for the lost-READ-request watch of selective repeat
	// (srWatchRead). A Floor set here bounds all three from below.
	Floor time.Duration
	// MinWindow is the smallest adaptive window; 0 selects
	// retry.DefaultWindowMin.
	MinWindow int
}

// RecoveryCounters count loss recovery (docs/recovery.md).
type RecoveryCounters struct {
	SRTT        time.Duration // smoothed round-trip time; 0 before the first sample
	RTTVar      time.Duration // its mean deviation
	RTTSamples  uint64        // round-trip samples taken
	KarnSkipped uint64        // samples refused because the timed PSN was sent again
	RTOExpiries uint64        // recovery timer expiries (each sends a tail-loss probe)
	RTODeferred uint64        // late expiries timed again instead (retry.RecoveryTimer.OnExpiry)
	RTOSpurious uint64        // expiries whose probe was answered for packets sent before it
	TailProbes  uint64        // probes sent: the oldest unacknowledged packet (or re-read) with AckReq
	Window      int           // the go-back-N window in effect, in PSNs
	WindowDecr  uint64        // losses the adaptive window took (retry.Window.OnLoss, at most one per round trip): it halved, or stayed at its minimum
	// RetryResponses is the number of responses received from the peer
	// between the last progress and the RETRY_EXC_ERR that failed the QP:
	// zero means the peer did not answer at all during the retries.
	RetryResponses uint64
	// RetryFailed is set once the requester failed with RETRY_EXC_ERR, so
	// that RetryResponses can be told from "not failed".
	RetryFailed bool
}

// recovery is the requester's loss recovery state: the RTT estimator, the
// recovery timer and the tail-loss probe, and the adaptive window.
type recovery struct {
	cfg    RecoveryConfig
	rtt    retry.RTT
	timer  retry.RecoveryTimer
	win    retry.Window
	due    retry.Deadline // the recovery timer
	timing bool           // a first transmission with AckReq is being timed
	timed  packet.PSN     // its PSN
	sentAt time.Time      // and when it left
	// timedRead: under go-back-N the timed packet is a READ request,
	// whose sample ends on its own first response (onResponse).
	timedRead bool
	// firstSent is when the first packet left: until the first RTT
	// sample, the first response gives an upper bound (bootstrap).
	firstSent time.Time
	// probeDue asks NextPacket to send the tail-loss probe next;
	// probing is set while it is built (it forces AckReq); probeOut
	// while it waits for its answer, probePSN being its PSN.
	probeDue, probing, probeOut bool
	probePSN                    packet.PSN
	probeAt                     time.Time // when the probe left
	sinceProgress               uint64    // responses since the last progress
	heard                       time.Time // when the last response came
	c                           RecoveryCounters
}

// initRecovery sets up loss recovery for the configuration c and the local
// ACK timeout ack (called by New).
func (r *Requester) initRecovery(c *Config) {
	r.rec.cfg = c.Recovery
	r.rec.timer = retry.RecoveryTimer{Floor: c.Recovery.Floor, Ceiling: r.ack}
	r.rec.win.Init(retry.WindowConfig{Max: c.Window, Min: minWindow(c)})
}

// minWindow is the smallest the adaptive window may shrink to under c:
// Recovery.MinWindow, and under selective repeat, which resends only what
// was lost (each resend reports a loss, srResend), rxe's 128, or
// Config.Window if that is smaller.
func minWindow(c *Config) int {
	if c.SelectiveRepeat {
		return max(c.Recovery.MinWindow, min(DefaultWindow, c.Window))
	}
	return c.Recovery.MinWindow
}

// sendWindow returns how many PSNs may be outstanding now: the adaptive
// window, or Config.Window.
func (r *Requester) sendWindow() int {
	if r.rec.cfg.FixedWindow {
		return r.cfg.Window
	}
	return min(r.cfg.Window, r.rec.win.Size())
}

// ackPerWindow is how many packets of a window ask for an ACK at least
// (forceAckReq). Two per window (a half window apart) left a 128-PSN
// window idle between ACKs on loopback, where the loaded round trip is
// about 100 packets (docs/performance.md, "AckReq every eighth of the
// window").
const ackPerWindow = 8

// forceAckReq reports whether the packet with PSN psn must ask for an
// acknowledgement besides the requester's usual rule: the probe does, so
// does the packet that fills the window, so that a window smaller than
// AckReqEvery is still answered, and so does every packet that is an
// eighth of a window (ackPerWindow) after the last one with AckReq: the
// ACKs then arrive while the rest of the window is in flight and the
// window slides on, instead of draining to nothing before each ACK (a
// window of one ACK per window is stop-and-wait: a window bound to a
// small peer receive buffer, rxe.windowFor, or shrunk after a loss).
func (r *Requester) forceAckReq(psn packet.PSN) bool {
	w := r.sendWindow()
	full := int(psn.Next().Diff(r.compPSN)) >= w // a packet sent again
	if psn == r.psn {
		full = r.inFlight()+1 >= w // a new packet
	}
	return r.rec.probing || full || r.noAck+1 >= max(w/ackPerWindow, 1)
}

// onSent records a packet just built at now: its PSN, whether it asked for
// an acknowledgement and whether it was sent before (its PSN is below
// highBefore, the high-water mark before it was built). A first
// transmission with AckReq starts an RTT measurement if none is running; a
// retransmission that makes the timed packet's answer ambiguous voids the
// running one (Karn's rule): under go-back-N any at or before the timed
// PSN (the cumulative ACK that ends the sample may answer it), unless the
// timed packet is a READ request, and under selective repeat only the
// timed PSN's own (the sample ends on the timed packet's own answer,
// srTimedAnswered). A timed READ request's sample ends on its own first
// response, which answers nothing sent before it: only its own resend
// voids it, so the re-reads of earlier holes (read-ahead) leave it
// running. The recovery timer is armed if it is not running.
func (r *Requester) onSent(now time.Time, psn packet.PSN, ackReq bool, highBefore packet.PSN) {
	rec := &r.rec
	if psn.Before(highBefore) {
		if rec.timing && (psn == rec.timed || !r.cfg.SelectiveRepeat && !rec.timedRead && psn.Before(rec.timed)) {
			rec.timing = false
			rec.rtt.Sample(0, true)
		}
	} else if ackReq && !rec.timing {
		rec.timing, rec.timed, rec.sentAt = true, psn, now
		rec.timedRead = !r.cfg.SelectiveRepeat && r.hdr.BTH.Opcode == packet.RCRDMAReadRequest
	}
	if rec.firstSent.IsZero() {
		rec.firstSent = now
	}
	if rec.cfg.Off {
		return
	}
	// An AckReq packet re-arms the timer, any other packet arms it only if
	// it is stopped (the timeout is computed only then: this runs per
	// packet sent).
	if ackReq || !rec.due.Armed() {
		r.armRecovery(now)
	}
}

// onResponse runs after the completer processed the response p at now:
// oldComp and oldHead are the oldest unacknowledged PSN and the oldest WQE
// before it, losses the retries that count as losses (lossRetries) before
// it. It takes the RTT sample, grows or shrinks the window, ends a probe,
// and re-arms or stops the recovery timer.
func (r *Requester) onResponse(now time.Time, p *packet.Packet, oldComp packet.PSN, oldHead, losses uint64) {
	rec := &r.rec
	rec.sinceProgress++
	if rec.probeOut {
		rec.probeOut = false
		if r.spuriousExpiry(now) {
			// Not the probe's answer but one that was on its way: the
			// peer was only slow, and nothing it shows was lost.
			rec.timer.Spurious(now, now.Sub(rec.heard))
		} else {
			if r.compPSN.After(oldComp) {
				rec.timer.LossFound(now)
			}
			r.probeAnswered(now, oldComp)
		}
	}
	rec.heard = now
	if d := r.compPSN.Diff(oldComp); d > 0 || r.head != oldHead {
		rec.sinceProgress = 0
		rec.timer.Progress()
		if d > 0 {
			rec.win.OnAck(int(d))
		}
	}
	switch {
	case rec.timing && rec.timedRead:
		if op := p.Opcode(); p.PSN() == rec.timed &&
			(op == packet.RCRDMAReadResponseFirst || op == packet.RCRDMAReadResponseOnly) {
			rec.timing = false
			rec.rtt.Sample(now.Sub(rec.sentAt), false)
		} else if r.compPSN.After(rec.timed) {
			// Passed without its own first response (lost, and the
			// re-read that replaced it is a resend): no sample.
			rec.timing = false
		}
	case rec.timing && (r.compPSN.After(rec.timed) || r.cfg.SelectiveRepeat && r.srTimedAnswered()):
		rec.timing = false
		rec.rtt.Sample(now.Sub(rec.sentAt), false)
	}
	if !rec.rtt.Valid() && !rec.firstSent.IsZero() && r.c.Retransmits == 0 {
		// No sample yet (the timed packet's answer was lost, or is
		// still to come, or Karn voided it): the first response, to a
		// packet sent no earlier than the first one and never sent
		// twice, bounds the RTT from above. Without it the recovery
		// timer would stay at the IB timeout until a new packet is
		// timed: a timed READ request whose own first response was
		// lost is re-read (a resend, which voids its sample and ends
		// this bound) before any sample is taken.
		rec.rtt.Sample(now.Sub(rec.firstSent), false)
	}
	if r.lossRetries() != losses {
		r.lossSeen(now)
	}
	r.noteFailure()
	r.rearmRecovery(now)
}

// spuriousExpiry reports whether the first response after a probe, at
// now, proves the expiry spurious: it acknowledges packets sent before
// the probe (the probed PSN's first copy among them), and it came sooner
// after the probe than the fastest round trip measured, so it cannot be
// the peer's answer to the probe: the peer had the packets and answered
// them late (a stall), rather than an acknowledgement being lost (then
// the probe's own answer, a round trip later, acknowledges them). A READ
// response is one PSN, so the first one on its way after a re-read probe
// acknowledges just the probed PSN.
func (r *Requester) spuriousExpiry(now time.Time) bool {
	rec := &r.rec
	if rec.heard.IsZero() || !rec.rtt.Valid() || !r.compPSN.After(rec.probePSN) {
		return false
	}
	return now.Sub(rec.probeAt) < rec.rtt.Stats().Min
}

// recoveryTimeout returns the recovery timeout now: the short one of a
// go-back-N retry that a NAK (or a probe's answer) started
// (retry.RecoveryTimer.RetryTimeout), from its rewind until the next
// progress, else the usual one. Selective repeat finds its lost resends
// otherwise (srRecheck, srDetect, srWatchRead).
func (r *Requester) recoveryTimeout() time.Duration {
	if r.nakRetry && !r.cfg.SelectiveRepeat {
		return r.rec.timer.RetryTimeout(&r.rec.rtt)
	}
	return r.rec.timer.Timeout(&r.rec.rtt)
}

// rearmRecovery arms the recovery timer a timeout from now while PSNs are
// outstanding, and stops it otherwise and during an RNR wait: the
// responder has answered, the RNR timer decides when the resend goes
// (IBA 9.7.5.2.8), and an expiry could send no probe before it ends
// (onRecoveryTimeout); the resend arms the recovery timer again.
func (r *Requester) rearmRecovery(now time.Time) {
	rec := &r.rec
	rec.timer.Decay(now) // also when the timer stops: the learned delay stays current
	if rec.cfg.Off || r.stopped || r.rnrWait.Armed() || r.head == r.tail || !r.highPSN.After(r.compPSN) {
		rec.due.Stop()
		return
	}
	r.armRecovery(now)
}

// armRecovery arms the recovery timer a recovery timeout from now, the
// learned delay decayed to now first (retry.RecoveryTimer.Decay): after a
// pause with nothing received, nothing else has decayed it, and a stall
// learned seconds before would time the next loss.
func (r *Requester) armRecovery(now time.Time) {
	r.rec.timer.Decay(now)
	if d := r.recoveryTimeout(); d > 0 {
		r.rec.due.Arm(now.Add(d))
	}
}

// lossRetries returns the retries started so far that count as losses
// for the window: all of them but readAgain's READ repairs, which resend
// one READ's (or part's) rest and nothing else.
func (r *Requester) lossRetries() uint64 { return r.c.CompleterRetryErr - r.readRepairs }

// lossSeen shrinks the adaptive window after a loss detected at now.
func (r *Requester) lossSeen(now time.Time) {
	if r.rec.win.OnLoss(now, r.rec.rtt.SRTT()) {
		r.rec.c.WindowDecr++
	}
}

// noteFailure records, once, how many responses the peer sent since the
// last progress when the requester failed with RETRY_EXC_ERR.
func (r *Requester) noteFailure() {
	if r.failed && r.failStatus == verbs.WCRetryExcErr && !r.rec.c.RetryFailed {
		r.rec.c.RetryFailed = true
		r.rec.c.RetryResponses = r.rec.sinceProgress
	}
}

// onRecoveryTimeout handles an expired recovery timer at now: nothing has
// been heard for a recovery timeout while PSNs are outstanding, so the
// tail of the window, a NAK, a re-read or an acknowledgement was lost, or
// the peer (or this process) was only slow. The requester sends one
// tail-loss probe (buildProbe), with AckReq, without moving its send
// cursor: a slow peer costs one packet and nothing else. The probe is the
// oldest unacknowledged packet rather than the last (RFC 8985 7.3)
// because an IB responder that has NAKed a gap drops later packets
// silently until the missing PSN arrives (IBA 9.7.5.1.2; rxe check_psn),
// while the oldest packet is always answered: executed and ACKed if it
// was lost, re-ACKed as a duplicate if only its ACK was (probeAnswered).
// The timer backs off; retry_cnt is not consumed (the IB timer alone
// spends it).
func (r *Requester) onRecoveryTimeout(now time.Time) {
	rec := &r.rec
	due := rec.due.When()
	rec.due.Stop()
	if r.stopped || r.rnrWait.Armed() || r.head == r.tail {
		return
	}
	if w := r.slot(r.head); !w.started || !r.highPSN.After(r.compPSN) || w.state == wqePosted {
		// Nothing outstanding, or a retry is already waiting to go.
		r.rearmRecovery(now)
		return
	}
	// Lateness counts against the timeout the timer was armed with: the
	// short RetryTimeout during a NAK's go-back-N retry (recoveryTimeout).
	if !rec.timer.OnExpiryAfter(r.recoveryTimeout(), due, now) {
		// Late: this end was not running; time the silence again.
		r.rearmRecovery(now)
		return
	}
	if r.srWatchHasHead() {
		// The lost-READ-request watch has the oldest READ part: it
		// re-reads the part itself (srWatchExpired), and no probe goes.
		rec.timer.Expired()
		r.rearmRecovery(now)
		return
	}
	rec.c.RTOExpiries++
	rec.timer.Expired()
	rec.probeDue = true
	r.armRecovery(now)
}

// probeAnswered runs on the first response after a probe that is not a
// spurious expiry's (spuriousExpiry: one that was on its way), oldComp being
// the oldest unacknowledged PSN before it. A response that acknowledges
// exactly the probe's PSN (and nothing after it) means the responder was
// waiting for that very packet: every later PSN sent before the probe
// reached it before the probe did and was lost or dropped out of
// sequence, so the go-back-N starts at once from the next PSN, as a PSN
// sequence error NAK would start it (one retry episode, no retry_cnt
// spent; the window shrinks). A READ probe's answer is its responses;
// gaps after it are found as usual.
func (r *Requester) probeAnswered(now time.Time, oldComp packet.PSN) {
	if r.cfg.SelectiveRepeat {
		r.srProbeAnswered(oldComp)
		return
	}
	if oldComp != r.rec.probePSN || r.compPSN != r.rec.probePSN.Next() || r.stopped || r.head == r.tail {
		return
	}
	if r.slot(r.head).kind == kindRead || !r.highPSN.After(r.compPSN) {
		return
	}
	r.lossSeen(now)
	r.c.CompleterRetryErr++
	r.retryLog |= RetryProbeAnswered
	r.rewind()
	r.startedRetry, r.nakRetry = true, true
}

// doubleReady reports whether doubleResend has a packet to send: the
// second copy is due, nothing has acknowledged the first (the oldest
// unacknowledged PSN is still the one sent), and the oldest WQE is a
// started SEND or WRITE.
func (r *Requester) doubleReady() bool {
	if !r.doubleDue || r.stopped || r.head == r.tail || r.compPSN != r.doublePSN || !r.highPSN.After(r.compPSN) {
		return false
	}
	w := r.slot(r.head)
	return w.kind.segmented() && w.started && w.state != wqePosted
}

// doubleResend sends the first packet of a go-back-N retry a second time,
// right after the first copy, and returns its length (0 if there is none
// to send). An IB responder that has NAKed a gap drops every later packet
// silently until the missing PSN arrives, and NAKs the gap only once (IBA
// 9.7.5.1.2; rxe check_psn), so a resend of the missing packet lost again
// would leave nothing to hear until the recovery timer, a few round trips
// later. Its second copy fills the gap at once when the first is lost, and
// is a duplicate otherwise, which the responder acknowledges without
// executing it (IBA 9.7.5.1.1; rxe duplicate_request): one packet and one
// ACK per retry. Only SEND and WRITE packets go twice: a duplicate READ
// request would be answered with the whole READ again, and atomics go
// once. The send cursor is left where it stood (buildRest).
func (r *Requester) doubleResend(now time.Time, buf []byte) int {
	ready := r.doubleReady()
	r.doubleDue = false
	if !ready {
		return 0
	}
	high := r.highPSN
	n := r.buildRest(r.head, buf)
	if n > 0 {
		r.c.RetryDoubled++
		r.onSent(now, r.compPSN, r.hdr.BTH.AckReq, high)
	}
	return n
}

// buildProbe builds the tail-loss probe into buf and returns its length,
// or 0 if there is none: the packet with the oldest unacknowledged PSN,
// with AckReq; for a READ at the head of the queue a READ request for the
// bytes not yet received (rxe req_retry's rule). The send cursor, the
// WQE's cursors and the AckReq count are left as they were, so the probe
// is one extra packet and normal sending resumes where it stood. A READ
// probe keeps the PSN it was sent with as the WQE's first PSN: its
// responses start there.
func (r *Requester) buildProbe(now time.Time, buf []byte) int {
	r.rec.probeDue = false
	if r.head == r.tail || !r.highPSN.After(r.compPSN) {
		return 0
	}
	high := r.highPSN
	r.rec.probing = true
	n := r.buildRest(r.head, buf)
	r.rec.probing = false
	if n > 0 {
		r.probeSent(now)
		r.onSent(now, r.compPSN, true, high)
	}
	return n
}

// probeSent counts a tail-loss probe that left at now (buildProbe,
// srProbe) and waits for its answer (onResponse): spuriousExpiry times the
// first response from now, and probeAnswered reads it against the oldest
// unacknowledged PSN, the probe's.
func (r *Requester) probeSent(now time.Time) {
	r.rec.c.TailProbes++
	r.rec.probeOut, r.rec.probePSN, r.rec.probeAt = true, r.compPSN, now
}

// DeferRecovery restarts a running recovery timer from now. The owner
// calls it when packets the requester built earlier actually leave (after
// a local-drop back-off held them): the peer cannot have answered them
// before.
func (r *Requester) DeferRecovery(now time.Time) {
	if !r.rec.due.Armed() {
		return
	}
	r.armRecovery(now)
}

// recoveryCounters returns the recovery counters with the live estimates.
func (r *Requester) recoveryCounters() RecoveryCounters {
	c := r.rec.c
	st := r.rec.rtt.Stats()
	c.SRTT, c.RTTVar, c.RTTSamples, c.KarnSkipped = st.SRTT, st.RTTVar, st.Samples, st.Discarded
	c.RTODeferred, c.RTOSpurious = r.rec.timer.Deferrals(), r.rec.timer.SpuriousExpiries()
	c.Window = r.sendWindowSize()
	return c
}

// sendWindowSize is the window in effect, ignoring a probe in progress.
func (r *Requester) sendWindowSize() int {
	if r.rec.cfg.FixedWindow {
		return r.cfg.Window
	}
	return min(r.cfg.Window, r.rec.win.Size())
}
