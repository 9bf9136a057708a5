package rxe

import (
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// The QP's step: everything the device does to a QP happens here, under
// the QP's lock, in one of two entries (rxe's per-QP tasks: rxe_responder
// and rxe_completer on receive, rxe_requester on transmit):
//
//   - receive: a packet for the QP (from its vector's receive goroutine)
//     goes to the responder (requests) or the completer (responses);
//   - step: its vector's transmit pass (the transmit goroutine, or a
//     receive goroutine sending inline) takes the QP off the run queue and
//     asks it for datagrams: first those it holds after a local drop, once
//     their back-off has passed, then, after running an expired requester
//     deadline, the responder's (ACKs, READ responses) and the
//     requester's packets.
//
// Both end in afterEngines, which moves the QP to ERR on an engine failure,
// files its wake-up time (timers.go) and reports whether it has more to
// send, so that the caller puts it back on the run queue. The QP owns its
// requester, responder, deadlines and held datagrams; its vector owns only
// the run queue, the batch being written and the timer queue.

// localDrop is what a QP keeps after local drops (LocalDropAdaptive): the
// datagrams the local host refused, taken back in order and sent again
// when the back-off ends, and the QP's adaptive back-off estimator
// (retry.Backoff), so that one QP's delay follows its own bursts. It is
// guarded by the QP's lock.
type localDrop struct {
	held    []netdev.Message // held[head:n] wait; buffers are kept for reuse
	head, n int
	until   time.Time // end of the back-off: held datagrams go from then on
	backoff retry.Backoff
	delay   time.Duration // the back-off's current delay once it has moved, for QP.Counters
}

// holding reports whether datagrams are held.
func (l *localDrop) holding() bool { return l.head < l.n }

// drop forgets the held datagrams (their buffers stay for reuse); the
// QP counts those not yet sent again (forgetHeld).
func (l *localDrop) drop() { l.head, l.n = 0, 0 }

// forgetHeld forgets the datagrams the QP holds after local drops and
// counts those not yet sent again in held_dropped (caller holds mu).
func (qp *QP) forgetHeld() {
	qp.countHeldDropped(qp.localDrop.n - qp.localDrop.head)
	qp.localDrop.drop()
}

// countHeldDropped counts n datagrams the QP took back after local drops
// and forgets instead of sending, in QPCounters.HeldDropped and the
// device's Counters.HeldDropped (held_dropped). local_drops counts each
// refusal once, and a datagram sent again counts as sent; one forgotten
// shows only here.
func (qp *QP) countHeldDropped(n int) {
	if n > 0 {
		qp.counter.heldDropped.Add(uint64(n))
		qp.dev.counters.heldDropped.Add(uint64(n))
	}
}

// push appends a copy of m to the held datagrams. A buffer is allocated
// only when the QP holds more datagrams than ever before.
func (l *localDrop) push(m *netdev.Message) {
	if l.n == len(l.held) {
		l.held = append(l.held, netdev.Message{Buf: make([]byte, maxPacket)})
	}
	h := &l.held[l.n]
	h.N = copy(h.Buf[:cap(h.Buf)], m.Buf[:m.N])
	h.Addr, h.Local, h.TOS = m.Addr, m.Local, m.TOS
	l.n++
}

// compact moves the held datagrams not yet sent again, held[head:n], to
// the front of held by swapping (every slot keeps its buffer), so that the
// slots already sent from are the first reused. takeBack runs it before it
// pushes: a QP whose held datagrams go out a part at a time and are
// refused again would otherwise push them after the ones still held and
// grow held by every refused part, without bound while the drops last.
func (l *localDrop) compact() {
	if l.head == 0 {
		return
	}
	for i := l.head; i < l.n; i++ {
		l.held[i-l.head], l.held[i] = l.held[i], l.held[i-l.head]
	}
	l.n -= l.head
	l.head = 0
}

// sent records that one of the QP's datagrams left (retry.Backoff.OnSent).
func (l *localDrop) sent(now time.Time) {
	l.backoff.OnSent(now)
	l.delay = l.backoff.Delay()
}

// receiveRun hands packets of one receive batch, all addressed to this RC
// QP, to the responder or the completer (rxe_rcv's per-QP checks, then
// dispatch by direction) under one hold of the QP's lock. The step after
// the engines (failures, timers, drain) runs once, at the end, and at
// once after a packet whose engine failed, so that the packets after it
// find the QP as a step per packet would leave it. If the QP then has
// packets to send it is queued on its vector; with deferWake the caller
// wakes the vector's transmit goroutine or sends them itself
// (Device.receive), else the transmit goroutine is woken here.
func (qp *QP) receiveRun(now time.Time, run []rcPacket, deferWake bool) {
	qp.mu.Lock()
	if qp.dead() {
		qp.mu.Unlock()
		return
	}
	for i := range run {
		qp.receiveLocked(now, run[i].p, run[i].src)
		if _, _, failed := qp.failed(); failed && qp.state != QPSErr {
			qp.afterEngines()
		}
	}
	more := qp.afterEngines()
	qp.mu.Unlock()
	switch {
	case !more:
	case deferWake:
		qp.vec.enqueue(qp)
	default:
		qp.vec.schedule(qp)
	}
}

// receiveLocked is one packet's part of receiveRun (caller holds mu).
func (qp *QP) receiveLocked(now time.Time, p packet.Packet, src netip.AddrPort) {
	var mark compMark // the requester before p, for tracePass
	if qp.tracing() {
		qp.traceRecv(p)
		mark = qp.markCompleter()
	}
	ok := true
	switch {
	case qp.state == QPSReset || qp.state == QPSInit || qp.state == QPSErr:
		qp.counter.badState.Add(1)
		ok = false
	case src.Addr().Unmap() != qp.dest.Addr():
		// rxe check_addr: RC packets must come from the peer's GID.
		qp.counter.badSrc.Add(1)
		ok = false
	case p.Opcode().Transport() != packet.TransportRC:
		qp.counter.badState.Add(1)
		ok = false
	case p.Mask()&packet.MaskReq != 0:
		qp.resp.Receive(now, p)
	case qp.req != nil:
		qp.req.Receive(now, p)
	default: // a response before RTS
		qp.counter.badState.Add(1)
		ok = false
	}
	if ok {
		qp.counter.rcvdPkts++
		qp.counter.rcvdBytes += uint64(p.Len())
		if qp.tracing() {
			qp.tracePass(p, mark)
		}
	}
}

// step puts the QP's datagrams into msgs[k:] (owners[k:] get the QP) and
// returns the new count and the QP's incarnation (gen) that built them; a
// QP with more to send is queued again. The caller holds its vector's txMu
// and has just taken the QP off the run queue.
//
// The clock is read after queued is cleared: a wake-up that comes before
// the reading has its expiry seen here, and one that comes after it
// queues the QP again, so no expiry is missed.
func (qp *QP) step(msgs []netdev.Message, owners []*QP, k int) (int, uint32) {
	qp.mu.Lock()
	qp.queued.Store(false)
	gen := qp.gen
	now := time.Now()
	if qp.dead() || qp.state == QPSReset {
		qp.dropHeld()
	}
	if qp.localDrop.holding() {
		var done bool
		if k, done = qp.stepHeld(now, msgs, owners, k); !done {
			qp.mu.Unlock()
			return k, gen
		}
	}
	if qp.dead() || qp.state == QPSReset || qp.state == QPSErr {
		qp.mu.Unlock()
		return k, gen
	}
	if qp.req != nil && !qp.timerAt.IsZero() && !now.Before(qp.timerAt) {
		switch qp.readBeforeTimeout(now) {
		case deadlineRead:
			return k, gen
		case deadlineAct:
			qp.timerAt = time.Time{}
			var mark compMark // the requester before the expiry, for traceTimer
			if qp.tracing() {
				mark = qp.markCompleter()
				mark.timers = qp.req.Expired(now)
			}
			qp.req.OnTimeout(now)
			if qp.tracing() {
				qp.traceTimer(now, mark)
			}
		}
	}
	qp.takeShare() // before the requester builds: its window may have grown or shrunk
	k = qp.stepUnreliable(now, msgs, owners, k)
	// Responses first, then requests (in RTR the send queue does not run
	// yet).
	if qp.resp != nil {
		k = qp.takePackets(now, qp.resp, "responder", msgs, owners, k)
	}
	if qp.req != nil && qp.state != QPSRTR {
		k = qp.takePackets(now, qp.req, "requester", msgs, owners, k)
	}
	more := qp.afterEngines()
	qp.mu.Unlock()
	if more {
		qp.vec.schedule(qp)
	}
	return k, gen
}

// readBeforeTimeout runs when the requester's deadline has come (caller
// holds mu). Every requester timer acts on silence: no ACK, no READ
// response, no answer to a probe or a re-read for some time. On a busy
// host that silence is often this end's own: the answers wait unread in
// the socket, or in a batch another goroutine is handling, while the Go
// scheduler runs other goroutines (docs/performance.md, "Reading the
// socket before a timeout"). So once per deadline, where the socket can
// be read from any goroutine (netdev.SharedReader), the QP first reads its
// socket and handles what is there, as a busy poller does
// (connReader.pollLocked), and steps again, as kernel rxe's completer
// handles the responses queued on its QP before it counts a retransmit
// timeout (rxe_completer: a packet in resp_pkts clears timeout_retry).
// The deadline is acted on only if what was read did not answer it.
//
// If another goroutine holds the socket's gate (it is handling a batch),
// the QP tries again timeoutReadWait later. A deadline whose local ACK
// timeout has come (the retransmit timer, the one whose expiries spend
// retry_cnt) keeps trying so until the socket has been read, at most
// gateWaitCap past the deadline: the ACK timeout and retry_cnt are the
// failure budget, which passes only without progress from the peer
// (issue 13), and an answer in the holder's batch, or behind it in the
// socket, is progress this end has not looked at yet. A holder whose
// thread is off the processor keeps the gate for as long as the process
// is starved (0.1-1.8 s seen on a loaded machine: docs/performance.md,
// "RETRY_EXC_ERR on a loaded machine"), so a single try would let such a
// stall spend the budget. Meanwhile the step goes on without the expiry
// (deadlineWait): the QP's ACKs, responses and new requests still leave.
// The timers that resend on silence without spending a retry (the
// recovery timer's probes, selective repeat's hold, recheck and watch of
// READ requests) wait so too, at most silenceGateWaitCap past the
// deadline: an answer in the holder's batch makes their resend a
// spurious one (a whole READ's responses again for a watch's re-read of
// a READ whose responses wait there). The RNR and credit waits end on
// the peer's word, not on silence: they wait one timeoutReadWait, then
// act.
func (qp *QP) readBeforeTimeout(now time.Time) deadlineStep {
	qp.slot.gateRetry = time.Time{}
	r := qp.vec.reader
	if r == nil || r.shared == nil || qp.readFor.Equal(qp.timerAt) {
		return deadlineAct
	}
	if !r.gate.TryLock() {
		retry := now.Add(timeoutReadWait)
		if qp.waitsForGate(now) {
			qp.slot.gateRetry, qp.slot.gateFor = retry, qp.timerAt
			qp.vec.timers.file(qp, retry)
			return deadlineWait
		}
		// The next step acts on the deadline.
		qp.readFor = qp.timerAt
		qp.mu.Unlock()
		qp.vec.timers.file(qp, retry)
		return deadlineRead
	}
	qp.readFor = qp.timerAt
	qp.mu.Unlock()
	r.pollLocked()
	qp.vec.schedule(qp)
	return deadlineRead
}

// deadlineStep is what step does with a due requester deadline
// (readBeforeTimeout).
type deadlineStep uint8

const (
	// deadlineAct: the requester acts on the deadline (OnTimeout).
	deadlineAct deadlineStep = iota
	// deadlineRead: the socket was read, or the deadline waits one
	// timeoutReadWait for the gate; mu is released and the step ends.
	deadlineRead
	// deadlineWait: the retransmit deadline waits for the gate (its next
	// try is filed); the step goes on without acting on it, mu held.
	deadlineWait
)

// waitsForGate reports whether the due deadline may wait longer for the
// socket's gate (readBeforeTimeout; caller holds mu): an expiry of the
// retransmit timer for at most gateWaitCap past the deadline, one of
// silence timers only (silenceTimers) for at most silenceGateWaitCap.
func (qp *QP) waitsForGate(now time.Time) bool {
	exp := qp.req.Expired(now)
	switch {
	case exp&requester.TimerRetransmit != 0:
		return now.Sub(qp.timerAt) < qp.gateWaitCap()
	case exp != 0 && exp&^silenceTimers == 0:
		return now.Sub(qp.timerAt) < qp.silenceGateWaitCap()
	}
	return false
}

// silenceTimers are the requester's timers that resend on silence and
// spend no retry (readBeforeTimeout): the recovery timer and selective
// repeat's hold, recheck and watch.
const silenceTimers = requester.TimerRecovery | requester.TimerSRHold | requester.TimerSRRecheck | requester.TimerSRWatch

// silenceGateWaitCap bounds how long a due silence timer (silenceTimers)
// waits for a socket gate another goroutine holds (readBeforeTimeout):
// silenceGateWaitMax, at most half the QP's local ACK timeout, so that the
// recovery in round trips still comes well before the retransmit timer.
func (qp *QP) silenceGateWaitCap() time.Duration {
	return min(retry.AckTimeout(qp.attr.Timeout)/2, silenceGateWaitMax)
}

// silenceGateWaitMax is silenceGateWaitCap's ceiling: above the 10-20 ms
// for which a gate holder's thread went without a processor in loaded
// loopback READ runs, where a watch that acted after one timeoutReadWait
// re-read whole READs whose responses waited in the holder's batch
// (docs/performance.md, "Silence timers wait for a held socket"), and
// below perftest's default ACK timeout (-u 14, 67 ms).
const silenceGateWaitMax = 25 * time.Millisecond

// gateWaitCap bounds how long a due retransmit deadline waits for a socket
// gate that another goroutine holds (readBeforeTimeout): the QP's local
// ACK timeout T (IBA 9.7.6.1.3), at least gateWaitMin. So a QP whose peer
// is silent fails after at most its retry_cnt+1 timeouts of T plus as many
// waits, even if the gate is never free (a flood read by another
// goroutine, a wedged reader).
func (qp *QP) gateWaitCap() time.Duration {
	return max(retry.AckTimeout(qp.attr.Timeout), gateWaitMin)
}

// gateWaitMin is gateWaitCap's floor, for QPs whose ACK timeout is
// shorter: a gate holder whose thread gets no processor kept the gate up
// to about 1 s in loaded loopback runs, and the process's threads went
// without a processor for 0.6-1.76 s (docs/performance.md, "RETRY_EXC_ERR
// on a loaded machine"), so each expiry outlasts most such stalls on its
// own, and a hold longer than the cap costs the QP one retry of its
// budget, not the whole budget.
const gateWaitMin = time.Second

// timeoutReadWait is how often a due requester deadline tries again for a
// socket gate another goroutine holds (readBeforeTimeout): about the time
// one full batch of 4 KiB packets takes to handle (64 datagrams, 256 KiB,
// at 2-3 GB/s).
const timeoutReadWait = 100 * time.Microsecond

// stepHeld is step's part for held datagrams (caller holds mu): before
// the back-off ends it files the QP's wake-up and reports not done (the
// QP builds nothing new: its held datagrams go first); after it, it puts
// them into msgs[k:] and reports done once all are out, else queues the
// QP again for the rest. An RC QP in ERR, or one whose engine failed,
// first forgets every held datagram but its ACK and NAK packets
// (heldAcksOnly; counted in held_dropped): it sends no request and no
// READ response or atomic acknowledge once its requester is flushed, and
// it reports done at once if nothing is left.
func (qp *QP) stepHeld(now time.Time, msgs []netdev.Message, owners []*QP, k int) (int, bool) {
	l := &qp.localDrop
	acksOnly := qp.heldAcksOnly()
	if acksOnly {
		qp.countHeldDropped(l.keepAcks())
		if !l.holding() {
			l.drop()
			return k, true
		}
	}
	if now.Before(l.until) {
		qp.armTimers()
		return k, false
	}
	if l.head == 0 {
		qp.counter.dropRetries.Add(1)
	}
	for k < len(msgs) && l.holding() {
		h := &l.held[l.head]
		msgs[k].N = copy(msgs[k].Buf[:cap(msgs[k].Buf)], h.Buf[:h.N])
		msgs[k].Addr, msgs[k].Local, msgs[k].TOS, owners[k] = h.Addr, h.Local, h.TOS, qp
		l.head++
		k++
	}
	if qp.req != nil && !acksOnly {
		qp.req.DeferRecovery(now) // the held requests leave only now
	}
	if l.holding() {
		qp.vec.schedule(qp)
		return k, false
	}
	l.drop()
	return k, true
}

// takeBack is the QP's side of a local drop (LocalDropAdaptive): msgs[0],
// which the local host refused, and every later datagram of this QP in the
// batch come back to the QP, in order after any it still holds, and its
// back-off starts; the other datagrams are returned, in order, with their
// owners and incarnations (gens), to be written at once. Datagrams are
// moved by swapping Message values, so every slot of the vector's batch
// keeps a buffer. A QP destroyed, reset, closed, or a UC or UD QP in ERR
// (which sends nothing more: flushUnreliable) keeps none, and its send
// engine learns that they will not leave. An RC QP in ERR, or one whose
// engine failed, keeps only its ACK and NAK packets, those it holds
// already included (heldAcksOnly); its requester is flushed and waits for
// none of the others. Datagrams an earlier incarnation
// of the QP built (gens: it was reset since) are not kept either, and its
// current send engine does not learn of them: a reset drops everything
// the QP had queued, as rxe_qp_reset empties its send queue, and the
// connection brought up since must not send them. Every datagram of the
// QP's that is not kept, of the batch or held before, is counted in
// held_dropped (countHeldDropped). The caller holds the vector's txMu.
func (qp *QP) takeBack(msgs []netdev.Message, owners []*QP, gens []uint32) ([]netdev.Message, []*QP, []uint32) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	now := time.Now()
	l := &qp.localDrop
	delay := l.backoff.OnDrop(now)
	l.delay = delay
	l.compact()
	keep := !qp.dead() && qp.state != QPSReset && !(qp.unreliable() && qp.state == QPSErr)
	acksOnly := keep && qp.heldAcksOnly()
	if acksOnly {
		qp.countHeldDropped(l.keepAcks())
	}
	start, older := l.head, l.n-l.head // held datagrams not yet sent again: they go after these
	w, mine, kept := 0, 0, 0           // mine: the datagrams of the QP's current incarnation taken
	for i := range msgs {
		if owners[i] == qp {
			if gens[i] == qp.gen {
				mine++
				if keep && (!acksOnly || isAck(&msgs[i])) {
					l.push(&msgs[i])
					kept++
				}
			}
			continue
		}
		msgs[w], msgs[i] = msgs[i], msgs[w]
		owners[w], gens[w] = owners[i], gens[i]
		w++
	}
	clear(owners[w:])
	qp.countHeldDropped(len(msgs) - w - kept)
	if !keep {
		if qp.ureq != nil && mine > 0 {
			qp.ureq.Unsent()
		}
		return msgs[:w], owners[:w], gens[:w]
	}
	if older > 0 {
		rotate(l.held[start:l.n], older)
	}
	l.until = now.Add(delay)
	qp.armTimers()
	return msgs[:w], owners[:w], gens[:w]
}

// heldAcksOnly reports whether the QP, an RC QP in ERR or one whose
// engine failed (whose requester afterEngines has flushed while the NAK
// of a responder error waits to be taken), may send of the datagrams it
// holds after local drops only its ACK and NAK packets (caller holds mu).
//
// Kernel rxe sends nothing for a QP in ERR: its requester only flushes
// WQEs there (rxe_requester), and a request whose transmission failed is
// built again from its WQE, which never happens in ERR; its responder
// drops the requests queued and flushes the receive queue (get_req,
// check_resource) and builds no response. So a held request, which the
// peer would execute while its work request here completed with
// WR_FLUSH_ERR, is dropped, and so are READ responses and atomic
// acknowledges: the peer's READ or atomic then ends as it would against
// rxe, after its retries. ACK and NAK packets built before the error are
// kept: rxe_resp.c sends the NAK of a fatal responder error before it
// moves its QP to ERR (do_class_ac_error marks the error, acknowledge
// sends the NAK, the error state follows), and afterEngines keeps the QP
// out of ERR until that NAK is taken, so the peer learns why the QP
// stopped (its work request completes with the NAK's status, not after
// its retries); an ACK likewise reports requests the responder completed
// before the error. Where rxe's own host refused such a packet it would be
// lost; gorxe's local-drop back-off only delays it.
func (qp *QP) heldAcksOnly() bool {
	if qp.typ != QPTypeRC {
		return false
	}
	if qp.state == QPSErr {
		return true
	}
	_, _, failed := qp.failed()
	return failed
}

// isAck reports whether m, an RC datagram the QP built (its UDP payload,
// which starts with the BTH), is an ACK or NAK (the opcode ACKNOWLEDGE),
// not a request, a READ response or an atomic acknowledge.
func isAck(m *netdev.Message) bool {
	return m.N >= packet.BTHSize && packet.BTH(m.Buf[:m.N]).Opcode() == packet.RCAcknowledge
}

// keepAcks forgets the held datagrams not yet sent again, held[head:n],
// other than ACK and NAK packets (isAck), which keep their order; every
// slot keeps its buffer. It returns how many it forgot.
func (l *localDrop) keepAcks() int {
	w := l.head
	for i := l.head; i < l.n; i++ {
		if isAck(&l.held[i]) {
			l.held[w], l.held[i] = l.held[i], l.held[w]
			w++
		}
	}
	forgot := l.n - w
	l.n = w
	return forgot
}

// rotate moves the first k messages of ms to its end, in order, by
// swapping (every Message keeps its buffer).
func rotate(ms []netdev.Message, k int) {
	reverse := func(a []netdev.Message) {
		for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
	}
	reverse(ms[:k])
	reverse(ms[k:])
	reverse(ms)
}

// afterEngines runs at the end of a step (caller holds mu): it moves the
// QP to ERR on a fatal engine error, reports SQ drain, takes the
// requester's deadline and files the QP's wake-up (timers.go). It returns
// whether the QP has packets to send.
//
// A responder error is answered with a NAK that the transmit pass has yet
// to take; rxe sends that NAK before its QP enters ERR (rxe_resp.c:
// ACKNOWLEDGE, then ERROR), and a step builds nothing for a QP in ERR, so
// the QP keeps its state until the NAK is out. Meanwhile the requester is
// stopped (flushed), so no request leaves after the error, neither a new
// one nor one held after a local drop (heldAcksOnly).
func (qp *QP) afterEngines() bool {
	qp.noteLossSignals()
	if qp.state != QPSErr {
		if st, resp, failed := qp.failed(); failed {
			if resp && qp.resp.Pending() {
				if qp.req != nil {
					qp.req.Flush()
				}
				qp.timerAt = time.Time{}
				return true
			}
			qp.dev.counters.qpErrors.Add(1)
			if resp {
				qp.raiseResponderError(st)
			}
			qp.enterError()
			qp.syncShare() // the others take their larger shares
			return false
		}
	}
	if qp.state == QPSSQD && !qp.drainSent && qp.sendDrained() {
		qp.drainSent = true
		if qp.attr.SQDrainNotify {
			qp.dev.raise(AsyncEvent{Type: verbs.EventSQDrained, QP: qp})
		}
	}
	if qp.req != nil && qp.state != QPSErr {
		dl := qp.req.Deadline()
		if qp.tracing() && !dl.IsZero() && !dl.Equal(qp.timerAt) {
			qp.traceArm(dl)
		}
		qp.timerAt = dl
		qp.armTimers()
	}
	return qp.pending()
}

// raiseResponderError raises the affiliated asynchronous error of a
// responder failure (IBA 11.6.3.1; mlx4/mlx5 WQ_INVAL_REQ_ERROR,
// WQ_ACCESS_ERROR and WQ_CATAS_ERROR): an R_Key, range or rights violation
// is a Local Access Violation Work Queue Error (QP_ACCESS_ERR); an invalid
// request (opcode, QP rights, length, misaligned atomic, failed
// invalidation) an Invalid Request Local Work Queue Error (QP_REQ_ERR); a
// malformed receive WQE a Local Work Queue Catastrophic Error (QP_FATAL).
// A receive CQ overflow raises only the CQ's CQ_ERR. The requester side
// raises nothing: its error is in the failed WQE's completion. (Kernel rxe
// raises none of these.)
func (qp *QP) raiseResponderError(st verbs.WCStatus) {
	var ev AsyncEventType
	switch st {
	case verbs.WCRemAccessErr:
		ev = verbs.EventQPAccessErr
	case verbs.WCRemInvReqErr, verbs.WCLocLenErr:
		ev = verbs.EventQPReqErr
	case verbs.WCLocQPOpErr:
		ev = verbs.EventQPFatal
	default:
		return
	}
	qp.dev.raise(AsyncEvent{Type: ev, QP: qp})
}

// failed reports a fatal engine error, its status, and whether the
// responder (rather than the requester) failed.
func (qp *QP) failed() (st verbs.WCStatus, resp, failed bool) {
	if qp.req != nil {
		if st, ok := qp.req.Failed(); ok {
			return st, false, true
		}
	}
	if qp.resp != nil {
		if st, ok := qp.resp.Failed(); ok {
			return st, true, true
		}
	}
	if qp.ureq != nil {
		if st, ok := qp.ureq.Failed(); ok {
			return st, false, true
		}
	}
	return 0, false, false
}

// packetSource is an RC engine's send side: the responder's responses or
// the requester's requests.
type packetSource interface {
	NextPacket(now time.Time, buf []byte) int
}

// takePackets takes src's packets into msgs[k:] (owners[k:] get the QP) until src
// has none or msgs is full, and returns the new k (caller holds mu). who
// names src in the trace.
func (qp *QP) takePackets(now time.Time, src packetSource, who string, msgs []netdev.Message, owners []*QP, k int) int {
	if qp.tracing() {
		return qp.takePacketsTraced(now, src, who, msgs, owners, k)
	}
	for ; k < len(msgs); k++ {
		n := src.NextPacket(now, msgs[k].Buf[:cap(msgs[k].Buf)])
		if n == 0 {
			break
		}
		qp.addressed(msgs, owners, k, n)
	}
	return k
}

// addressed makes msgs[k] the QP's n-byte packet to its peer, owned by qp.
func (qp *QP) addressed(msgs []netdev.Message, owners []*QP, k, n int) {
	msgs[k].N, msgs[k].Addr, msgs[k].Local, owners[k] = n, qp.dest, qp.dev.addr, qp
	msgs[k].TOS = qp.attr.AH.TrafficClass // 0: the device's (Options.TrafficClass)
}

// noteLossSignals starts the device's receive spin (Device.noteLoss) when
// the engines met a sign of loss recovery since the last look
// (requester.LossSignals, responder.LossSignals: NAKs and hole reports
// sent or received, requests sent or received again), caller holds mu. A
// count that went down (a new requester after a reset) is only taken as
// the new base.
func (qp *QP) noteLossSignals() {
	var n uint64
	if qp.req != nil {
		n += qp.req.LossSignals()
	}
	if qp.resp != nil {
		n += qp.resp.LossSignals()
	}
	if n > qp.lossSeen {
		qp.dev.noteLoss(time.Now())
	}
	qp.lossSeen = n
}
