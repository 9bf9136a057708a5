package perftest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/rxe"
)

// spinners counts the goroutines of this process in busyPoll that spin
// on a CQ whose socket they cannot read (CQ.PollsSocket false: a device
// on a wrapped netdev that cannot read in turn: --pcap, or fault
// injection with rules that hold, delay or duplicate datagrams). At most
// GOMAXPROCS-1 of them spin at once (with --loopback both ends run in this
// process, and on a two-CPU machine only one of them spins), so that
// spinning never keeps every processor from reading the network for long.
// A spinner that reads the socket itself (CQ.BusyPoll) needs no idle
// processor and is not counted.
var spinners atomic.Int32

// unreadSockets counts the sockets of this process's devices that no
// spinner reads: those a spinner cannot read (netdev.AsSharedReader false
// once the capture and the fault injection are stacked on them: --pcap,
// --ladder, receive rules that queue datagrams), and every socket of a
// device whose side of a latency test waits for no completion and does
// not spin either (the server of read-lat and atomic-lat with -e or
// --busy-poll 0; without them it reads its socket in answerLoop). The
// device goroutines that read them run only on a processor no spinner
// holds, and the Go runtime polls the network from an idle processor (or
// every 10 ms). With --loopback both ends share the process's processors.
var unreadSockets atomic.Int32

// latCheckEvery is how many empty polls pass between two looks at the
// clock and at ctx, and between two yields of the processor (which let
// the goroutines the device woke run).
const latCheckEvery = 32

// stall is a latency test's bound on one wait for the peer.
func (s *session) stall() time.Duration {
	if s.latStall > 0 {
		return s.latStall
	}
	return stallTimeout
}

// spinFor returns how long a latency test spins on cq per completion
// before it sleeps: --busy-poll's duration (defBusyPoll unless given; 0
// with -e and in the bandwidth tests: forceDependencies), except that
// without --busy-poll on the command line nothing spins while a device of
// the process has a socket no spinner reads (unreadSockets), nor on a CQ
// that cannot read its own (CQ.PollsSocket false). A multicast group's
// datagrams (-g) come on a socket of their own (rxe's mcast.go), which
// CQ.BusyPoll reads as it reads the device's, in turn with the goroutine
// that reads it otherwise: -g spins by default as well. The
// goroutines of a device whose socket a spinner cannot read need a
// processor that the spinner would hold: on this
// project's two-CPU machine, a --loopback send-lat with --pcap took 76-83
// µs a half round trip with the server spinning, against 20 with both
// ends sleeping, and a --loopback read-lat with a second processor busy
// took 8 ms (docs/performance.md, "rxectl latency tests spin by
// default").
func (s *session) spinFor(cq *rxe.CQ) time.Duration {
	if !s.o.set["busy-poll"] && (unreadSockets.Load() > 0 || !cq.PollsSocket()) {
		return 0
	}
	return s.o.busyPoll
}

// answersOnly reports whether this end of a latency test waits for no
// completion: the server of read-lat and atomic-lat, whose device answers
// the client's requests by itself.
func (s *session) answersOnly() bool {
	return s.t.lat && !s.client && (s.t.verb == verbRead || s.t.verb == verbAtomic)
}

// choosePolling decides, once both ends' devices are open and before the
// latency runs, how this end waits for its completions: s.spin (spinFor)
// and s.pollMode, "events" (-e: the completion channel), "busy" or "wait"
// (CQ.Wait); an end that only answers waits for nothing and has no mode.
// The waits read s.spin rather than asking spinFor each time.
func (s *session) choosePolling() {
	s.spin, s.pollMode = 0, ""
	switch {
	case s.answersOnly():
		if s.ch == nil && s.rcq.PollsSocket() {
			s.spin = s.spinFor(s.rcq)
		}
		if s.spin > 0 {
			s.pollMode = "busy"
		}
	case s.ch != nil:
		s.pollMode = "events"
	default:
		s.spin = s.spinFor(s.rcq)
		s.pollMode = "wait"
		if s.spin > 0 {
			s.pollMode = "busy"
		}
	}
}

// pollingSummary is s.pollMode for the header, with the spin and, when
// the default spin was left out, why.
func (s *session) pollingSummary() string {
	switch p := s.pollMode; {
	case s.answersOnly() && s.spin > 0:
		return fmt.Sprintf("busy (this end only answers: it spins reading the socket and answers on the spinning goroutine, up to %v after each request)", s.spin)
	case s.answersOnly():
		return "none (this end only answers: its device's goroutines do the work)"
	case p == "events":
		return "events (-e: sleeps on the completion channel)"
	case p == "busy" && s.rcq.PollsSocket():
		return fmt.Sprintf("busy (spins up to %v a completion, reading the socket)", s.o.busyPoll)
	case p == "busy":
		return fmt.Sprintf("busy (spins up to %v a completion; the device's goroutines read the socket)", s.o.busyPoll)
	case s.o.busyPoll > 0 && !s.o.set["busy-poll"]:
		return "wait (CQ.Wait: the default does not spin while a device of this process has sockets no spinner reads: --pcap, --ladder, fault rules that queue received packets)"
	}
	return "wait (CQ.Wait)"
}

// spinPoll waits for one completion on cq. It first spins on CQ.BusyPoll
// for up to s.spin (choosePolling; as perftest spins on ibv_poll_cq), then sleeps in
// CQ.Wait; with -e it sleeps on the completion channel (waitCQ). It gives
// up with an error after the stall bound without a completion, or when
// ctx is done, or, when the completion is the receive of one of the
// peer's messages (fromPeer), soon after the peer has closed the exchange
// or written its next message (s.peerDone: it will send nothing more).
// A completion of this end's own request needs the peer's
// acknowledgement (RC): once the peer is done, ownAfterPeerDone waits for
// it, and ends soon with errPeerDone when the peer left the TCP exchange
// and stopped answering.
//
// CQ.BusyPoll reads the device's socket and handles what arrived on this
// goroutine, so a spinner gets its completion without a goroutine wake-up
// (docs/performance.md, "Busy polling reads the socket").
func (s *session) spinPoll(ctx context.Context, cq *rxe.CQ, wc []rxe.WC, what string, fromPeer bool) error {
	bound := s.stall()
	lossy := fromPeer && s.unreliable()
	if lossy {
		bound = s.lossWait()
	}
	start := time.Now()
	pctx := ctx
	if s.peerDone != nil {
		pctx = s.peerDone // ends with ctx, or when the peer is done
	}
	spin := min(s.spin, bound) // the spin counts against the bound
	if s.ch == nil && spin > 0 && busyPoll(pctx, cq, wc[:1], spin) == 1 {
		return s.checkLatWC(wc[0], what)
	}
	wctx, cancel := context.WithTimeout(pctx, bound-spin)
	defer cancel()
	n, err := s.waitCQ(wctx, cq, wc[:1])
	if n == 1 {
		return s.checkLatWC(wc[0], what)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted while waiting for %s", what)
	}
	if pctx.Err() != nil && !fromPeer {
		return s.ownAfterPeerDone(ctx, cq, wc, what, bound-min(bound, time.Since(start)))
	}
	if pctx.Err() != nil {
		// The peer is done: what it sent before may still be on its
		// way (its exchange message can overtake its last packet).
		qctx, cancel := context.WithTimeout(ctx, peerDoneQuiet)
		defer cancel()
		if n, _ := s.waitCQ(qctx, cq, wc[:1]); n == 1 {
			// Its last message, or the flush of this receive that
			// the peer's disconnect caused (checkLatWC).
			return s.checkLatWC(wc[0], what)
		}
		return fmt.Errorf("waiting for %s: %w", what, errPeerDone)
	}
	if lossy {
		return s.lostError(bound, what)
	}
	return fmt.Errorf("nothing for %v while waiting for %s: the peer stopped (%v)", bound, what, err)
}

// ownAfterPeerDone is spinPoll's wait for a completion of this end's own
// request on cq once the peer is done (s.peerDone), for at most left.
// The request completes when the peer acknowledges it. A peer that went
// on with the exchange (it finished its run, and keeps its QP until the
// exchange is over) does, and so does one that left the TCP exchange
// (peerLeft) but keeps its QP a while: write-lat's Finish waits for this
// end's close. The wait ends with errPeerDone once the peer has left and
// then let a retransmit timer of this end's QP expire (the requester's
// Timeouts counter, at the QP's ACK timeout, -u) and peerDoneQuiet pass
// after it without an answer: a peer process that ended has no QP to
// answer the retries, and the rest of the retry budget (retry_cnt+1 ACK
// timeouts in all, then RETRY_EXC_ERR) would be spent for nothing.
func (s *session) ownAfterPeerDone(ctx context.Context, cq *rxe.CQ, wc []rxe.WC, what string, left time.Duration) error {
	deadline := time.Now().Add(left)
	if !s.peerLeft() {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		n, err := s.waitCQ(wctx, cq, wc[:1])
		switch {
		case n == 1:
			return s.checkLatWC(wc[0], what)
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while waiting for %s", what)
		}
		return fmt.Errorf("nothing for %v while waiting for %s: the peer stopped (%v)", s.stall(), what, err)
	}
	timeouts := func() uint64 { return s.qps[0].Counters().Requester.Timeouts }
	since := timeouts()
	expired := false
	for time.Now().Before(deadline) {
		// Each turn waits peerDoneQuiet at most: one after the expiry
		// gives the retransmit's answer its time.
		wctx, cancel := context.WithTimeout(ctx, min(peerDoneQuiet, time.Until(deadline)))
		n, _ := s.waitCQ(wctx, cq, wc[:1])
		cancel()
		switch {
		case n == 1:
			return s.checkLatWC(wc[0], what)
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while waiting for %s", what)
		case expired:
			return fmt.Errorf("waiting for %s: %w", what, errPeerDone)
		}
		expired = timeouts() > since
	}
	return fmt.Errorf("waiting for %s: %w", what, errPeerDone)
}

// peerLeft reports whether the peer of a TCP exchange has left it once
// its watch (s.peerDone) has ended: it closed or reset the connection
// (peerClosed: it failed or was interrupted, or finished write-lat, whose
// ends just close), even after a message of its that this end has not
// read (a peer that wrote its next exchange message and was then
// interrupted or killed), or wrote oob.DoneMsg (peekDone), which it
// writes only as it closes the exchange. A key message that the peer
// wrote and left the connection open after (its run finished) is not
// leaving, nor is anything over -R's rdma_cm
// exchange, whose peer's disconnect flushes this end's requests
// (checkLatWC).
func (s *session) peerLeft() bool {
	if s.conn == nil {
		return false
	}
	return peerClosed(s.conn) || peekDone(s.conn, peerDoneQuiet)
}

// unreliable reports whether the test's QPs are UC or UD: nothing resends
// a message they lose.
func (s *session) unreliable() bool {
	return s.qpType() != rxe.QPTypeRC
}

// lossWait is a UC or UD latency test's bound on a wait for the peer's
// message (--loss-wait; defLossWait when the options leave it 0).
func (s *session) lossWait() time.Duration {
	if s.o.lossWait > 0 {
		return s.o.lossWait
	}
	return defLossWait
}

// errLost marks the error of a UC or UD latency wait that ended after
// lossWait without the peer's message (errors.Is).
var errLost = errors.New("a message lost on an unreliable transport")

// lostError is the error of a UC or UD latency wait for what that got
// nothing for bound: a lost ping or pong stops the ping-pong for good.
// lostAfter adds how far the run got.
func (s *session) lostError(bound time.Duration, what string) error {
	why := fmt.Sprintf("-c %s resends nothing, so one lost message stops the ping-pong; or the peer stopped", s.o.connType)
	if len(s.o.rules) > 0 {
		why += fmt.Sprintf("; faults are injected here (%s): see their counters", s.o.ruleList())
	}
	return fmt.Errorf("nothing for %v (--loss-wait) while waiting for %s: likely %w (%s)", bound, what, errLost, why)
}

// lostAfter adds to a lost-message error (errLost) how many round trips
// of the run completed before it: done of total, or done with -D (lw on).
// Other errors it returns as they are.
func lostAfter(err error, done, total int, lw *latWindow) error {
	if !errors.Is(err, errLost) {
		return err
	}
	if lw.on {
		return fmt.Errorf("%w; %d round trips completed", err, done)
	}
	return fmt.Errorf("%w; %d of %d round trips completed", err, done, total)
}

// checkLatWC is checkWC for a latency test's completion of what, except
// that a flush because the peer disconnected (-R: flushedByPeer, with the
// run's watch) is errPeerDone.
func (s *session) checkLatWC(wc rxe.WC, what string) error {
	if flushedByPeer(wc, s.peerDone) {
		return fmt.Errorf("waiting for %s: %w", what, errPeerDone)
	}
	return s.checkWC(wc)
}

// errPeerDone is the error of a latency test's wait that the peer left:
// it closed the exchange (it failed or was killed) or went on with it.
var errPeerDone = errors.New("the peer closed the exchange or ended its run instead (it failed or was stopped: see its output)")

// watchLat makes a latency run's waits end once the peer is done
// (watchPeer, s.peerDone) and returns the function that ends the watch.
func (s *session) watchLat(ctx context.Context) (stop func()) {
	done, watching, stopWatch := s.watchPeer(ctx)
	if !watching {
		return stopWatch
	}
	s.peerDone = done
	return func() {
		stopWatch()
		s.peerDone = nil
	}
}

// busyPoll polls cq with CQ.BusyPoll until it returns completions, spin
// has passed or ctx is done, yielding the processor every latCheckEvery
// empty polls (after each one when it cannot read the socket); it returns
// how many completions it moved into wcs (0: none within spin).
func busyPoll(ctx context.Context, cq *rxe.CQ, wcs []rxe.WC, spin time.Duration) int {
	if n := cq.BusyPoll(wcs); n > 0 {
		return n
	}
	yieldEvery := latCheckEvery
	if !cq.PollsSocket() {
		defer spinners.Add(-1)
		if int(spinners.Add(1)) >= runtime.GOMAXPROCS(0) {
			return 0
		}
		yieldEvery = 1
	}
	end := time.Now().Add(spin)
	for i := 1; ; i++ {
		if n := cq.BusyPoll(wcs); n > 0 {
			return n
		}
		if i%yieldEvery == 0 {
			runtime.Gosched()
		}
		if i%latCheckEvery == 0 && (!time.Now().Before(end) || ctx.Err() != nil) {
			return 0
		}
	}
}

// busyPollWrite is one turn of write-lat's wait for the peer's WRITE when
// it spins (s.spin, without -e) on a CQ that reads its socket: it reads
// the socket with CQ.BusyPoll on qp's receive CQ (the WRITE completes
// nothing there; a completion would be one of ours, which write-lat has
// reaped before it waits) and reports true. It yields the processor every
// latCheckEvery turns. Otherwise it does nothing and reports false, and
// the caller yields or sleeps. The spin is bounded by the stall bound,
// which the caller checks, not by --busy-poll's duration.
func (s *session) busyPollWrite(qp *rxe.QP, spins int) (bool, error) {
	if s.ch != nil || s.spin <= 0 || !s.rcq.PollsSocket() {
		return false, nil
	}
	var wc [1]rxe.WC
	if s.rcq.BusyPoll(wc[:]) > 0 {
		return true, fmt.Errorf("unexpected completion while waiting for the peer's RDMA WRITE: %v of %v (wr_id %d)", wc[0].Status, wc[0].Opcode, wc[0].ID)
	}
	if spins%latCheckEvery == latCheckEvery-1 {
		runtime.Gosched()
	}
	return true, nil
}

// answerLoop is the spinning of a latency test's end that only answers
// (answersOnly: the server of read-lat and atomic-lat) when choosePolling
// gave it a spin: until stop is closed it reads the device's socket with
// CQ.BusyPoll on its receive CQ, so the responder runs and its READ
// response or atomic ACK leaves on this goroutine, the way a spinning
// requester gets its completion (busyPoll): no goroutine wake-up between a
// request's arrival and its answer. A NIC or kernel rxe answers without
// waking a process; the device's receive goroutine, which serves the
// socket while nothing spins, is woken by the Go runtime's network poller
// (about 10 µs a 2-byte read-lat round trip on this project's machine:
// docs/performance.md, "The answering end of read-lat spins"). After
// s.spin without a request (the QP's expected PSN unchanged) it polls
// only a burst of latCheckEvery times a millisecond, leaving the socket
// to the device's goroutines in between, and spins again once a request
// came. It yields the processor every latCheckEvery polls. The answering
// end's CQ receives no completion in these tests; an error completion
// that comes all the same (a flush) ends the loop with checkWC's error.
func (s *session) answerLoop(stop <-chan struct{}) error {
	qp := s.qps[0]
	var wc [1]rxe.WC
	last := qp.Query().RQPSN
	idleSince := time.Now()
	for i := 1; ; i++ {
		if s.rcq.BusyPoll(wc[:]) > 0 && wc[0].Status != rxe.WCSuccess {
			return s.checkWC(wc[0])
		}
		if i%latCheckEvery != 0 {
			continue
		}
		select {
		case <-stop:
			return nil
		default:
		}
		runtime.Gosched()
		now := time.Now()
		if psn := qp.Query().RQPSN; psn != last {
			last, idleSince = psn, now
			continue
		}
		if now.Sub(idleSince) < s.spin {
			continue
		}
		// Idle: a burst of polls once a millisecond until a request comes.
		select {
		case <-stop:
			return nil
		case <-time.After(time.Millisecond):
		}
	}
}

// startAnswering starts answerLoop on its own goroutine when this end
// only answers and choosePolling gave it a spin, and returns the function
// that stops it and returns its error; otherwise it starts nothing and
// the function returns nil.
func (s *session) startAnswering() (stop func() error) {
	if !s.answersOnly() || s.spin <= 0 {
		return func() error { return nil }
	}
	quit, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- s.answerLoop(quit) }()
	return func() error {
		close(quit)
		return <-done
	}
}
