package perftest

// The measured data phase of each test, as perftest_resources.c runs it:
// run_iter_bw (the BW client), run_iter_bw_server (the send-bw server),
// run_iter_lat (read/atomic latency), run_iter_lat_send and
// run_iter_lat_write. Times are in nanoseconds, which play the role of
// perftest's CPU cycles (1000 per microsecond).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/rxe"
)

// errAddrInUse is what binding a taken UDP port fails with.
var errAddrInUse = syscall.EADDRINUSE

// errPeerQP marks completion errors caused by the peer or the path
// (errors.Is); it adds nothing to their text.
var errPeerQP = peerQPError{}

// peerQPError is errPeerQP's type: a completion error blamed on the peer
// or the path, with its message.
type peerQPError struct{ msg string }

func (e peerQPError) Error() string { return e.msg }

// Is makes every peerQPError match errPeerQP.
func (e peerQPError) Is(target error) bool { _, ok := target.(peerQPError); return ok }

// defRetryCount is the retry_cnt rxectl's QPs use unless --retry_count
// says otherwise (perftest's DEF_RETRY_COUNT, 7): the IB timeout may pass
// retry_cnt+1 times without progress.
const defRetryCount = 7

// stallTimeout is how long a side waits for the peer without any progress
// before giving up (perftest's send-bw server gives up after 60 s too).
const stallTimeout = 60 * time.Second

// clock returns monotonic nanoseconds since its creation, on time.Now or
// on hooks.now (hookedClock).
type clock struct {
	t0   time.Time
	time func() time.Time // hooks.now (nil: time.Now)
}

func newClock() clock { return clock{t0: time.Now()} }

func (c clock) now() int64 {
	if c.time != nil {
		return int64(c.time().Sub(c.t0))
	}
	return int64(time.Since(c.t0))
}

// timeNow is the clock of the runs that take hooks.now: hooks.now when it
// is set, else time.Now.
func (o *options) timeNow() func() time.Time {
	if o.hooks.now != nil {
		return o.hooks.now
	}
	return time.Now
}

// hookedClock is a new clock on hooks.now when it is set.
func (o *options) hookedClock() clock {
	if o.hooks.now == nil {
		return newClock()
	}
	return clock{t0: o.hooks.now(), time: o.hooks.now}
}

// stamps returns n timestamps with every page of them written once. A
// large allocation's pages are faulted in by their first write, and
// perftest's timestamp arrays (tposted, tcompleted) take those faults
// inside the timed loop: in a 2-byte write-bw of 2 million messages the
// stores into 32 MB of fresh stamps were 2.3 % of the CPU samples and the
// page faults behind them as much again (docs/performance.md), and in a
// latency test each fault lands in one sample.
func stamps(n int) []int64 {
	s := make([]int64, n)
	for i := 0; i < n; i += stampsPerPage {
		s[i] = 0
	}
	return s
}

// stampsPerPage is the number of timestamps in a 4 KiB page.
const stampsPerPage = 4096 / 8

// sendWR builds the work request of the test's verb for QP q.
func (s *session) sendWR(q, size int) rxe.SendWR {
	wr := rxe.SendWR{SGList: []rxe.SGE{s.mr.SGE(s.localRegion(q), size)},
		RemoteAddr: s.rem[q].VAddr, RKey: s.rem[q].RKey}
	if s.o.inline > 0 && size <= s.o.inline && (s.t.verb == verbSend || s.t.verb == verbWrite) {
		off := s.localRegion(q)
		wr.Flags, wr.InlineData, wr.SGList = rxe.SendInline, s.mr.Bytes()[off:off+size], nil
	}
	if s.ahs != nil {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = s.ahs[q], s.rem[q].QPN, s.udQKey()
	}
	switch s.t.verb {
	case verbSend:
		wr.Opcode = rxe.WRSend
	case verbWrite:
		wr.Opcode = rxe.WRRDMAWrite
	case verbRead:
		wr.Opcode = rxe.WRRDMARead
	case verbAtomic:
		wr.Opcode, wr.CompareAdd = rxe.WRAtomicFetchAndAdd, 1
		if s.o.atomicType == "CMP_AND_SWAP" {
			wr.Opcode, wr.CompareAdd, wr.Swap = rxe.WRAtomicCmpAndSwp, 0, 1
		}
	}
	return wr
}

// checkWC turns an error completion into an error a user can act on.
func (s *session) checkWC(wc rxe.WC) error {
	if wc.Status == rxe.WCSuccess {
		return nil
	}
	head := fmt.Sprintf("completion with status %v (vendor_err %#x) on QP %#x", wc.Status, wc.VendorErr, wc.QPNum)
	var why string
	switch wc.Status {
	case rxe.WCRetryExcErr:
		why = s.retryExcWhy(wc.QPNum)
		if len(s.o.rules) > 0 {
			why += fmt.Sprintf("; or the faults injected here (%s): see their counters above", s.o.ruleList())
		}
	case rxe.WCRNRRetryExcErr:
		why = "receiver-not-ready retries exceeded: the receiver is not posting receive work requests (a different test or size on the other end?)"
	case rxe.WCRemAccessErr:
		why = "the peer refused the access: its memory region lacks the right or the rkey/address is wrong (the other end runs a different test?)"
	case rxe.WCRemInvReqErr:
		why = "the peer's QP rejected the request as invalid (the other end runs a different test or message size?)"
	case rxe.WCRemOpErr:
		why = "the peer's QP failed to execute the request: its QP is in error"
	case rxe.WCWRFlushErr:
		why = "flushed: this QP had already gone to the error state"
		if s.peerDisconnected(wc.QPNum) {
			why = "flushed: the peer disconnected (CM DREQ), which put this QP in the error state: it stopped, failed or was interrupted (see its output)"
		}
	case rxe.WCLocLenErr:
		why = "a message arrived longer than this end's receive buffer: the other end sends larger messages (a larger -s, or -a on one end only?)"
	default:
		return errors.New(head)
	}
	return peerQPError{msg: head + ": " + why}
}

// peerDisconnected reports whether, with -R, the rdma_cm connection of
// QP qpn has ended while the test runs: the peer's DREQ moved the QP to
// ERR (rxe.CMConn.Done, as cma_modify_qp_err on IB_CM_DREQ_RECEIVED), so
// its flushed work requests are the peer's doing.
func (s *session) peerDisconnected(qpn uint32) bool {
	if s.cm == nil {
		return false
	}
	for _, c := range s.cm.conns {
		if c.QP.QPN() != qpn {
			continue
		}
		select {
		case <-c.Done():
			return true
		default:
		}
	}
	return false
}

// runBWClient is run_iter_bw: keep tx-depth work requests outstanding per
// QP, signal every cq-mod'th and the last, and time every post and every
// signaled completion. A cancelled ctx ends the run early, reporting what
// was measured.
func (s *session) runBWClient(ctx context.Context, size int) (report.BW, error) {
	o := s.o
	if o.duration > 0 {
		return s.runBWClientDuration(ctx, size)
	}
	nq := len(s.qps)
	total := o.iters * nq
	tposted := stamps(total)
	tcompleted := stamps(total)
	scnt, ccnt := make([]int, nq), make([]int, nq)
	lists := s.sendLists(size)
	totscnt, totccnt := 0, 0
	wcs := make([]rxe.WC, 64)
	clk := newClock()
	pace := o.newPacer(size, time.Now())
	stopped := false
	for totccnt < total {
		if !stopped && ctx.Err() != nil {
			stopped = true // stop posting; drain what is outstanding
		}
		for q, qp := range s.qps {
			// A post list (-l) is posted whole, timed at its first
			// request (run_iter_bw).
			for l := o.postList; !stopped && scnt[q] < o.iters && scnt[q]+l-ccnt[q] <= o.txDepth && pace.ready(); {
				list := lists.next(q, scnt[q], o.iters)
				tposted[totscnt] = clk.now()
				if _, err := qp.PostSend(list...); err != nil {
					return report.BW{}, fmt.Errorf("post send: %w", err)
				}
				scnt[q] += l
				totscnt += l
				pace.posted(l)
			}
		}
		signaled := s.signaledBefore(scnt)
		if stopped && totccnt == signaled {
			break
		}
		if totscnt == total {
			pace = nil // all posted: nothing left to pace
		}
		n, err := s.waitSendCQPaced(ctx, wcs, pace, signaled-totccnt, time.Time{})
		if err != nil {
			return report.BW{}, err
		}
		now := clk.now()
		for _, wc := range wcs[:n] {
			if err := s.checkWC(wc); err != nil {
				return report.BW{}, err
			}
			q, i := int(wc.ID>>32), int(uint32(wc.ID))
			totccnt += i + 1 - ccnt[q]
			ccnt[q] = i + 1
			tcompleted[totccnt-1] = now
		}
		if o.hooks.sent != nil {
			o.hooks.sent(n)
		}
	}
	if totccnt == 0 {
		return report.BW{Size: uint64(size)}, nil
	}
	elapsed := tcompleted[totccnt-1] - tposted[0]
	r := report.BW{Size: uint64(size), Iters: uint64(totccnt)}
	if elapsed > 0 {
		r.Avg = float64(size) * float64(totccnt) * 1e9 / float64(elapsed) / report.BWFactor(o.gbits)
		r.MsgRate = float64(totccnt) * 1e9 / float64(elapsed) / 1e6
	}
	if !o.noPeak && totccnt == total {
		r.Peak = report.PeakBW(size, tposted, tcompleted, o.cqMod, o.postList) / report.BWFactor(o.gbits)
	}
	return r, nil
}

// signaledBefore is how many work requests the completions of everything
// posted so far account for: up to each QP's last signaled request.
func (s *session) signaledBefore(scnt []int) int {
	n := 0
	for _, c := range scnt {
		n += c / s.o.cqMod * s.o.cqMod
		if c == s.o.iters {
			n += c % s.o.cqMod
		}
	}
	return n
}

// waitSendCQ waits for completions on the send CQs for at most stallTimeout
// and explains the stall when none come.
func (s *session) waitSendCQ(wcs []rxe.WC) (int, error) {
	n, err := s.waitCQsFor(context.Background(), &s.sset, wcs, stallTimeout)
	if err != nil {
		return 0, fmt.Errorf("no completion for %v: the peer stopped answering (%v)", stallTimeout, err)
	}
	return n, nil
}

// sendLists are the work requests a bandwidth run posts, one post list
// (-l, 1 by default) per QP, rewritten in place for each post.
type sendLists struct {
	wrs   []rxe.SendWR   // the template of each QP's requests
	lists [][]rxe.SendWR // each QP's list, o.postList long
	cqMod int
}

// sendLists returns the post lists of size-byte messages.
func (s *session) sendLists(size int) *sendLists {
	nq := len(s.qps)
	l := &sendLists{wrs: make([]rxe.SendWR, nq), lists: make([][]rxe.SendWR, nq), cqMod: s.o.cqMod}
	for q := range nq {
		l.wrs[q] = s.sendWR(q, size)
		l.lists[q] = make([]rxe.SendWR, s.o.postList)
	}
	return l
}

// next returns QP q's next list, its first request the scnt'th: each
// request's ID is the QP and its index, and every cq-mod'th is signaled,
// as is the last of an iteration run of iters (iters 0: a duration run).
func (l *sendLists) next(q, scnt, iters int) []rxe.SendWR {
	list := l.lists[q]
	for k := range list {
		i := scnt + k
		wr := l.wrs[q]
		wr.ID = uint64(q)<<32 | uint64(i)
		if (i+1)%l.cqMod == 0 || i == iters-1 {
			wr.Flags |= rxe.SendSignaled
		}
		list[k] = wr
	}
	return list
}

// bwPoster keeps tx-depth work requests of one size outstanding on every
// QP of a run in duration mode, signalling every cq-mod'th.
type bwPoster struct {
	s          *session
	lists      *sendLists
	scnt, ccnt []int  // posted and completed per QP
	pace       *pacer // --rate_limit (nil: none)
}

// newBWPoster returns the poster of size-byte messages.
func (s *session) newBWPoster(size int) *bwPoster {
	nq := len(s.qps)
	return &bwPoster{s: s, lists: s.sendLists(size), scnt: make([]int, nq), ccnt: make([]int, nq),
		pace: s.o.newPacer(size, time.Now())}
}

// fill posts up to tx-depth outstanding requests per QP unless stopped, a
// whole post list (-l) at a time, as far as the rate limiter lets it,
// and returns how many signaled requests are outstanding.
func (p *bwPoster) fill(stopped bool) (outstanding int, err error) {
	o := p.s.o
	for q, qp := range p.s.qps {
		for l := o.postList; !stopped && p.scnt[q]+l-p.ccnt[q] <= o.txDepth && p.pace.ready(); {
			if _, err := qp.PostSend(p.lists.next(q, p.scnt[q], 0)...); err != nil {
				return 0, fmt.Errorf("post send: %w", err)
			}
			p.scnt[q] += l
			p.pace.posted(l)
		}
		outstanding += p.scnt[q]/o.cqMod*o.cqMod - p.ccnt[q]
	}
	return outstanding, nil
}

// complete accounts for the completions wcs.
func (p *bwPoster) complete(wcs []rxe.WC) error {
	for _, wc := range wcs {
		if err := p.s.checkWC(wc); err != nil {
			return err
		}
		q, i := int(wc.ID>>32), int(uint32(wc.ID))
		p.ccnt[q] = i + 1
	}
	return nil
}

// bwWindow is the sample window of a bandwidth run in duration mode: the
// completions counted between start and end.
type bwWindow struct {
	start, end time.Time
	counted    uint64
}

// nextEdge is the next time a duration run's loop must look at the clock
// after now: the sample window's start or end, or the run's end (none
// with --run_infinitely, whose periods end at the window's end).
func (w *bwWindow) nextEdge(now, end time.Time, infinitely bool) time.Time {
	switch {
	case now.Before(w.start):
		return w.start
	case now.Before(w.end) || infinitely:
		return w.end
	}
	return end
}

// tickWindow brings a duration run's sample window up to now: --cpu_util's
// readings at its start and its end and, with --run_infinitely, the row
// of a period that has ended, printed (after clear, if set: the client's
// status line) before the next period begins.
func (s *session) tickWindow(now time.Time, win *bwWindow, cpu *cpuWindow, size int, clear func()) error {
	o := s.o
	if !now.Before(win.start) {
		cpu.begin()
	}
	if o.infinitely && !now.Before(win.end) {
		if clear != nil {
			clear()
		}
		cpu.finish()
		r := win.row(size, now, o.gbits) // one --run_infinitely period
		if err := cpu.set(&r.CPUUtil, &r.CPUSeconds); err != nil {
			return err
		}
		s.addBW(r)
		cpu.restart()
		*win = bwWindow{start: now, end: now.Add(time.Duration(o.duration) * time.Second)}
	}
	if !now.Before(win.end) {
		cpu.finish()
	}
	return nil
}

// row is the window's row for messages of size bytes, measured up to to.
func (w *bwWindow) row(size int, to time.Time, gbits bool) report.BW {
	return report.NewBW(size, w.counted, to.Sub(w.start), gbits)
}

// runBWClientDuration is run_iter_bw in duration mode (-D): warm up for
// the margin, count the completed requests of the sample window, cool
// down for the margin. As perftest's START_STATE, SAMPLE_STATE,
// STOP_SAMPLE_STATE and END_STATE (catch_alarm), only the completions
// taken inside the window count: none of the warm-up's or the
// cool-down's. With --run_infinitely it prints a row every duration
// instead and runs until interrupted.
func (s *session) runBWClientDuration(ctx context.Context, size int) (report.BW, error) {
	o := s.o
	timeNow := o.timeNow()
	p := s.newBWPoster(size)
	wcs := make([]rxe.WC, 64)
	start := timeNow()
	margin := time.Duration(o.margin) * time.Second
	dur := time.Duration(o.duration) * time.Second
	win := bwWindow{start: start.Add(margin), end: start.Add(dur - margin)}
	if o.infinitely {
		win = bwWindow{start: start, end: start.Add(dur)}
	}
	status := report.NewStatusLine(s.out, report.BWUnit(o.gbits), o.fullOutput())
	defer status.Clear()
	nextStatus := start.Add(time.Second)
	end := start.Add(dur)
	cpu := o.newCPUWindow()
	stopped := false
	for {
		now := timeNow()
		if err := s.tickWindow(now, &win, cpu, size, status.Clear); err != nil {
			return report.BW{}, err
		}
		if !stopped && (ctx.Err() != nil || !o.infinitely && !now.Before(end)) {
			stopped = true
		}
		outstanding, err := p.fill(stopped)
		if err != nil {
			return report.BW{}, err
		}
		if stopped && outstanding == 0 {
			break
		}
		pace := p.pace
		if stopped {
			pace = nil // nothing more to post: wait for what is outstanding
		}
		n, err := s.waitSendCQPaced(ctx, wcs, pace, outstanding, win.nextEdge(now, end, o.infinitely))
		if err != nil {
			return report.BW{}, err
		}
		if err := p.complete(wcs[:n]); err != nil {
			return report.BW{}, err
		}
		if o.hooks.sent != nil {
			o.hooks.sent(n)
		}
		if now = timeNow(); !now.Before(win.start) && now.Before(win.end) {
			win.counted += uint64(n * o.cqMod) // perftest counts cq_mod per CQE in the sample window
		}
		if now.After(nextStatus) {
			status.Show(win.row(size, now, o.gbits))
			nextStatus = now.Add(time.Second)
		}
	}
	status.Clear()
	cpu.finish() // a run cut short: the window ends now
	var r report.BW
	if o.infinitely {
		r = win.row(size, timeNow(), o.gbits) // interrupted: the partial period's row
	} else {
		r = win.row(size, earliest(win.end, timeNow()), o.gbits) // cut short when interrupted early
	}
	return r, cpu.set(&r.CPUUtil, &r.CPUSeconds)
}

// runBWServer is run_iter_bw_server (send-bw's server): count the
// receives, keep posting until every iteration has a receive, and time
// from the first receive to the last (no peak: perftest disables it here).
// Its loop runs before the exchange that lets the client send
// (startReceiving). Once the client has stopped sending (watchPeer: its
// next exchange message is waiting, or it closed the connection) the
// messages still in flight are taken until none has come for
// peerDoneQuiet; a client that finished early (interrupted, or UC/UD
// messages lost) leaves a row of what arrived and a note on stderr. With
// -D it is receiveDuration.
func (s *session) runBWServer(ctx context.Context, size int) (report.BW, error) {
	rc := s.startReceiving(ctx, size, s.canWatchPeer())
	if err := s.hs("synchronising before the run"); err != nil {
		rc.abort()
		return report.BW{}, err
	}
	spoke, _, stopWatch := s.watchPeer(ctx)
	defer stopWatch()
	// -a: the client's next exchange message may be the DoneMsg of its
	// closing exchange (endsAfterInterrupt), and then the key exchange
	// just made was that closing one: no message of this size comes.
	var ended atomic.Bool
	checked := make(chan struct{})
	stopAfter := context.AfterFunc(spoke, func() {
		defer close(checked)
		if s.o.all && ctx.Err() == nil && s.conn != nil && peekDone(s.conn, peerDoneQuiet) {
			ended.Store(true)
			rc.stop()
			return
		}
		rc.peerStopped()
	})
	r, err := rc.wait()
	if !stopAfter() {
		<-checked // it ran: let it finish with the connection
	}
	if ended.Load() {
		return report.BW{}, errClientEnded
	}
	return r, err
}

// errClientEnded is runBWServer's error when the client of -a ended the
// run before the size (peekDone): the exchange is at its DoneMsg.
var errClientEnded = errors.New("the client ended the run")

// receiving is a receive loop of a SEND bandwidth run (receiveBW, or
// receiveDuration with -D) on a goroutine of its own.
type receiving struct {
	stop        context.CancelFunc // ends the loop at once
	peerStopped context.CancelFunc // the peer has stopped sending: take what is in flight, then end
	done        chan struct{}      // closed when the loop has returned
	row         report.BW
	err         error
}

// startReceiving starts the receive loop of a size on its own goroutine,
// under ctx, and returns once that goroutine runs. It is started before
// the exchange after which the peer sends (perftest posts its receives
// and then polls its receive CQ from its first message on): a loop that
// began only after that exchange found the peer's first burst already
// there, and with an SRQ (--use-srq) of -r receives for all the QPs, fewer
// than their messages, the UD and UC messages that came before it
// re-posted any were dropped. watching says whether this end can tell
// when the peer stops (canWatchPeer; receiveDuration's rule).
func (s *session) startReceiving(ctx context.Context, size int, watching bool) *receiving {
	rctx, stop := context.WithCancel(ctx)
	peerDone, peerStopped := context.WithCancel(rctx)
	rc := &receiving{stop: stop, peerStopped: peerStopped, done: make(chan struct{})}
	running := make(chan struct{})
	go func() {
		defer close(rc.done)
		close(running)
		if s.o.duration > 0 {
			rc.row, rc.err = s.receiveDuration(rctx, peerDone, watching, size)
		} else {
			rc.row, rc.err = s.receiveBW(rctx, peerDone, size)
		}
	}()
	<-running
	return rc
}

// wait waits for the loop to end and returns its row.
func (rc *receiving) wait() (report.BW, error) {
	<-rc.done
	rc.stop()
	return rc.row, rc.err
}

// abort ends the loop at once, when the run fails before it, and waits
// for it.
func (rc *receiving) abort() {
	rc.stop()
	<-rc.done
}

// receiveBW is runBWServer's loop in iterations mode; spoke ends once the
// peer has stopped sending (watchPeer).
func (s *session) receiveBW(ctx, spoke context.Context, size int) (report.BW, error) {
	o := s.o
	nq := len(s.qps)
	total := o.iters * nq
	posted := make([]int, nq) // receives available for this size's messages
	copy(posted, s.rposted)
	wcs := make([]rxe.WC, 64)
	clk := o.hookedClock()
	var first, last int64
	rcnt := 0
	done := false // the client has stopped sending
	for rcnt < total {
		wctx, wait := spoke, stallTimeout
		if done {
			wctx, wait = ctx, peerDoneQuiet
		}
		n, err := s.waitCQsFor(wctx, &s.rset, wcs, wait)
		if err != nil {
			if ctx.Err() != nil {
				return report.BW{}, errors.New("interrupted while receiving")
			}
			if !done && spoke.Err() != nil {
				done = true // take what is still on its way
				continue
			}
			if done {
				break
			}
			return report.BW{}, fmt.Errorf("received %d of %d messages, then nothing for %v: the client stopped sending", rcnt, total, stallTimeout)
		}
		if rcnt == 0 {
			first = clk.now()
		}
		gone := false // the peer disconnected (-R): the rest is flushed
		for _, wc := range wcs[:n] {
			if gone = flushedByPeer(wc, spoke); gone {
				break
			}
			if err := s.checkWC(wc); err != nil {
				return report.BW{}, err
			}
			rcnt++
			q := int(wc.ID)
			if q < nq {
				s.rposted[q]--
			}
			if q < nq && posted[q] < o.iters {
				if err := s.postRecv(q); err != nil {
					return report.BW{}, err
				}
				if posted[q]++; posted[q] == o.iters {
					// The size's last messages need what is owed
					// (--recv_post_list): a shorter list.
					if err := s.postOwed(q); err != nil {
						return report.BW{}, err
					}
				}
			}
		}
		if gone {
			break
		}
		last = clk.now()
	}
	// -a: a size the interrupted client skipped is no news, unless this
	// end ran it too (-b: its row counts its own messages of that size).
	if rcnt < total && (rcnt > 0 || !o.all || o.bidir) {
		who := "client"
		if o.bidir {
			who = "peer"
		}
		if s.unreliable() {
			// A lost message and a peer that stopped look alike here.
			fmt.Fprintf(s.errw, " Received %d of %d messages of %d bytes: the rest were lost on the way (%s resends nothing) or the %s stopped sending before they arrived\n",
				rcnt, total, size, o.connType, who)
		} else {
			fmt.Fprintf(s.errw, " Received %d of %d messages of %d bytes: the %s stopped sending before the rest arrived\n", rcnt, total, size, who)
		}
	}
	elapsed := last - first
	r := report.BW{Size: uint64(size), Iters: uint64(rcnt)}
	if elapsed > 0 {
		r.Avg = float64(size) * float64(rcnt) * 1e9 / float64(elapsed) / report.BWFactor(o.gbits)
		r.MsgRate = float64(rcnt) * 1e9 / float64(elapsed) / 1e6
	}
	return r, nil
}

// flushedByPeer reports whether wc is the flush of a work request
// because the peer disconnected (-R: its CM DREQ moves this end's QP to
// ERR and ends the connection, which ends peer, the watch of watchPeer,
// just after): wc is WR_FLUSH_ERR and peer ends within peerDoneQuiet.
// peer may be nil (no watch).
func flushedByPeer(wc rxe.WC, peer context.Context) bool {
	if wc.Status != rxe.WCWRFlushErr || peer == nil {
		return false
	}
	t := time.NewTimer(peerDoneQuiet)
	defer t.Stop()
	select {
	case <-peer.Done():
		return true
	case <-t.C:
		return false
	}
}

// sendBWQuiet is how long send-bw's server in duration mode waits for
// the client's last messages once its own duration is over, when it
// cannot watch the exchange (watchPeer).
const sendBWQuiet = 300 * time.Millisecond

// peerDoneQuiet is how long a receiver waits for messages still on
// their way once the sender has stopped (watchPeer): it sent them before
// its exchange message.
const peerDoneQuiet = 100 * time.Millisecond

// receiveDuration is send-bw's server with -D, and the receiving half
// of each end of send-bw -b -D: repost every receive, count those
// completed in the sample window, and end once the duration is over and
// the peer has stopped sending (without a watch, when nothing has come
// for sendBWQuiet). With --run_infinitely it prints a row every duration,
// as the client does, until the client stops. spoke ends once the peer
// has stopped sending, when watching says the end can tell (watchPeer);
// the row counts the receives of the sample window.
func (s *session) receiveDuration(ctx, spoke context.Context, watching bool, size int) (report.BW, error) {
	o := s.o
	start := time.Now()
	margin := time.Duration(o.margin) * time.Second
	dur := time.Duration(o.duration) * time.Second
	win := bwWindow{start: start.Add(margin), end: start.Add(dur - margin)}
	if o.infinitely {
		win = bwWindow{start: start, end: start.Add(dur)}
	}
	end := start.Add(dur)
	wcs := make([]rxe.WC, 64)
	var last time.Time // the last completion's
	done := false      // the client has stopped sending
	cpu := o.newCPUWindow()
	for {
		wctx, wait := spoke, sendBWQuiet
		switch left := time.Until(end); {
		case done:
			wctx, wait = ctx, peerDoneQuiet
		case watching:
			// Until the peer stops (spoke), during the duration as
			// after it: a sender that waits out an ACK timeout or a
			// stall of its host has not stopped.
			wait = stallTimeout
		case left > 0:
			wait = min(left+sendBWQuiet, stallTimeout)
		}
		n, err := s.waitCQsFor(wctx, &s.rset, wcs, wait)
		if err != nil {
			if ctx.Err() != nil || done {
				break // interrupted, or the client is done
			}
			if spoke.Err() != nil {
				done = true // take what is still on its way
				continue
			}
			if !watching && !time.Now().Before(end) {
				break // nothing came for sendBWQuiet after the duration
			}
			return report.BW{}, fmt.Errorf("received nothing for %v: the peer stopped sending", wait)
		}
		now := time.Now()
		if err := s.tickWindow(now, &win, cpu, size, nil); err != nil {
			return report.BW{}, err
		}
		gone := false // the peer disconnected (-R): the rest is flushed
		for _, wc := range wcs[:n] {
			if gone = flushedByPeer(wc, spoke); gone {
				break
			}
			if err := s.checkWC(wc); err != nil {
				return report.BW{}, err
			}
			if !now.Before(win.start) && now.Before(win.end) {
				win.counted++
			}
			if q := int(wc.ID); q < len(s.qps) {
				s.rposted[q]--
				if err := s.postRecv(q); err != nil {
					return report.BW{}, err
				}
			}
		}
		if gone {
			break
		}
		last = now
	}
	cpu.finish() // the client stopped early: the window ends now
	var r report.BW
	if o.infinitely {
		r = win.row(size, last, o.gbits) // the partial period's row
	} else {
		r = win.row(size, earliest(win.end, last), o.gbits) // cut short when the client stopped early
	}
	return r, cpu.set(&r.CPUUtil, &r.CPUSeconds)
}

// latWindow is a latency test's duration mode (-D): warm up for the
// margin, count the round trips begun in the sample window, cool down for
// the margin. With --cpu_util, cpu takes its processor readings at the
// sample window's start and end (perftest's get_cpu_stats in catch_alarm).
type latWindow struct {
	on                          bool
	sampleStart, sampleEnd, end time.Time
	count                       int
	cpu                         *cpuWindow
}

// newLatWindow returns the window of a run: off without -D.
func (s *session) newLatWindow() *latWindow {
	o := s.o
	if o.duration == 0 {
		return &latWindow{cpu: &cpuWindow{}}
	}
	now := time.Now()
	margin := time.Duration(o.margin) * time.Second
	dur := time.Duration(o.duration) * time.Second
	return &latWindow{on: true, sampleStart: now.Add(margin), sampleEnd: now.Add(dur - margin), end: now.Add(dur),
		cpu: &cpuWindow{on: s.measuresCPU()}}
}

// tick counts a round trip begun now, takes --cpu_util's readings once
// the sample window has begun and once it has ended, and reports whether
// time is up.
func (w *latWindow) tick() bool {
	now := time.Now()
	if !now.Before(w.sampleStart) {
		w.cpu.begin()
	}
	if !now.Before(w.sampleStart) && now.Before(w.sampleEnd) {
		w.count++
	}
	if !now.Before(w.sampleEnd) {
		w.cpu.finish()
	}
	return !now.Before(w.end)
}

// post prepares ping scnt of a ping-pong. In iterations mode it
// timestamps the post. In duration mode it counts the round trip and, on
// the client once time is up or the run is interrupted, flags the message
// as the last one (buf[stopByte] = 1) and reports that it is.
func (w *latWindow) post(ctx context.Context, client bool, buf []byte, stopByte int, tposted []int64, scnt int, clk clock) (stopping bool) {
	if !w.on {
		tposted[scnt] = clk.now()
		return false
	}
	up := w.tick()
	if stopping = client && (up || ctx.Err() != nil); stopping {
		buf[stopByte] = 1
	}
	return stopping
}

// result is print_report_lat_duration: the sample window's length over
// the round trips in it (halved for SEND and WRITE, rtt 2), the round
// trips per second and, with --cpu_util, the window's processor figures
// (a run cut short ends the window now).
func (w *latWindow) result(size, rtt int) (report.Lat, error) {
	w.cpu.finish()
	el := earliest(w.sampleEnd, time.Now()).Sub(w.sampleStart)
	r := report.Lat{Size: size, Iters: w.count}
	if w.count > 0 && el > 0 {
		r.Avg = float64(el) / 1e3 / float64(rtt) / float64(w.count)
		r.TPS = float64(w.count) / el.Seconds()
	}
	return r, w.cpu.set(&r.CPUUtil, &r.CPUSeconds)
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// waitCQ waits for completions on cq: with -e it sleeps on the completion
// channel (arm, poll, sleep, and after each event arm again and poll, as
// perftest's ctx_notify_events does), else it blocks in CQ.Wait.
func (s *session) waitCQ(ctx context.Context, cq *rxe.CQ, wcs []rxe.WC) (int, error) {
	if s.ch == nil {
		return cq.Wait(ctx, wcs)
	}
	ch := s.ch
	if cq == s.rcq && s.rch != nil {
		ch = s.rch
	}
	for {
		if n := cq.Poll(wcs); n > 0 {
			return n, nil
		}
		// Arm, then poll again: a completion that came between the poll
		// and the arm is found now, any later one sends an event.
		if err := cq.ReqNotify(false); err != nil {
			return 0, err
		}
		if n := cq.Poll(wcs); n > 0 {
			return n, nil
		}
		select {
		case <-ch.C: // ours or the other CQ's: poll again
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// runLatReadAtomic is run_iter_lat: post one READ or atomic, wait for its
// completion, repeat; each sample is a full round trip.
func (s *session) runLatReadAtomic(ctx context.Context, size int) (report.Lat, error) {
	iters := s.o.iters
	tposted := stamps(iters)
	wr := s.sendWR(0, size)
	wr.Flags |= rxe.SendSignaled
	wc := make([]rxe.WC, 1)
	w := s.newLatWindow()
	if w.on {
		tposted = nil
	}
	clk := newClock()
	for i := 0; w.on || i < iters; i++ {
		s.o.latencyGapWait(ctx)
		if w.on {
			if w.tick() || ctx.Err() != nil {
				break
			}
		} else {
			tposted[i] = clk.now()
		}
		if _, err := s.qps[0].PostSend(wr); err != nil {
			return report.Lat{}, fmt.Errorf("post send: %w", err)
		}
		if err := s.spinPoll(ctx, s.scq, wc, "a completion", false); err != nil {
			return report.Lat{}, err
		}
	}
	if w.on {
		return w.result(size, 1)
	}
	return s.latStats(size, tposted, 1), nil
}

// runLatSend is run_iter_lat_send: SEND ping-pong, the client sending
// first; each side times its posts, one round trip apart.
func (s *session) runLatSend(ctx context.Context, size int) (report.Lat, error) {
	o := s.o
	iters := o.iters
	rxPosted := min(o.rxDepth, iters)
	tposted := stamps(iters)
	wr := s.sendWR(0, size)
	wc := make([]rxe.WC, 1)
	// With -D the client ends the run: its last SEND has 1 in its first
	// byte, and the server stops on it without answering.
	lw := s.newLatWindow()
	buf := s.mr.Bytes()
	stopByte, peerStopByte := s.localRegion(0), int(s.remoteRegion(0)-s.mr.Addr())
	if lw.on {
		buf[stopByte] = 0
	}
	defer s.watchLat(ctx)()
	clk := newClock()
	scnt, rcnt := 0, 0
	for lw.on || scnt < iters || rcnt < iters {
		if (lw.on || rcnt < iters) && !(scnt < 1 && s.client) {
			if err := s.spinPoll(ctx, s.rcq, wc, fmt.Sprintf("the peer's SEND %d", rcnt+1), true); err != nil {
				return report.Lat{}, lostAfter(err, rcnt, iters, lw)
			}
			rcnt++
			s.rposted[0]--
			if lw.on && !s.client && buf[peerStopByte] == 1 {
				break
			}
			if lw.on || rcnt+rxPosted <= iters {
				if err := s.postRecv(0); err != nil {
					return report.Lat{}, err
				}
			}
		}
		if lw.on || scnt < iters {
			o.latencyGapWait(ctx)
			stopping := lw.post(ctx, s.client, buf, stopByte, tposted, scnt, clk)
			scnt++
			w := wr
			signaled := scnt%o.cqMod == 0 || scnt == iters && !lw.on || stopping
			if signaled {
				w.Flags |= rxe.SendSignaled
			}
			if _, err := s.qps[0].PostSend(w); err != nil {
				return report.Lat{}, fmt.Errorf("post send: %w", err)
			}
			if signaled {
				if err := s.spinPoll(ctx, s.scq, wc, "a send completion", false); err != nil {
					return report.Lat{}, err
				}
			}
			if stopping {
				break
			}
		}
	}
	if lw.on {
		return lw.result(size, 2)
	}
	return s.latStats(size, tposted, 2), nil
}

// runLatWrite is run_iter_lat_write: RDMA WRITE ping-pong, the server
// writing first. Each WRITE carries its sequence number in its last byte,
// which the other side polls. We learn that the peer's WRITE has landed
// from the QP's expected PSN (QP.Query synchronises with the device, so
// the byte may then be read without a data race) and check the byte.
func (s *session) runLatWrite(ctx context.Context, size int) (report.Lat, error) {
	iters := s.o.iters
	qp := s.qps[0]
	pkts := uint32(max(1, (size+s.mtu.Bytes()-1)/s.mtu.Bytes()))
	buf := s.mr.Bytes()
	postByte := s.localRegion(0) + size - 1
	pollByte := int(s.remoteRegion(0)-s.mr.Addr()) + size - 1
	wr := s.sendWR(0, size)
	wr.Flags |= rxe.SendSignaled
	wc := make([]rxe.WC, 1)
	tposted := stamps(iters)
	// With -D the client ends the run: its last WRITE has 1 in its first
	// byte (-s 2 or more), and the server stops on it without answering.
	lw := s.newLatWindow()
	stopByte, peerStopByte := s.localRegion(0), int(s.remoteRegion(0)-s.mr.Addr())
	if lw.on {
		tposted = nil
		buf[stopByte] = 0
	}
	base := s.rqPSN
	defer s.watchLat(ctx)()
	clk := newClock()
	scnt, ccnt, rcnt := 0, 0, 0
	for lw.on || scnt < iters || ccnt < iters || rcnt < iters {
		if (lw.on || rcnt < iters) && !(scnt < 1 && !s.client) {
			rcnt++
			if err := s.waitWrite(ctx, qp, base, uint32(rcnt)*pkts, rcnt); err != nil {
				return report.Lat{}, lostAfter(err, rcnt-1, iters, lw)
			}
			if got := buf[pollByte]; got != byte(rcnt) {
				return report.Lat{}, fmt.Errorf("the peer's RDMA WRITE %d ends with byte %d, not %d: is the other end running write-lat with -s %d?", rcnt, got, byte(rcnt), size)
			}
			if lw.on && !s.client && buf[peerStopByte] == 1 {
				break
			}
		}
		stopping := false
		if lw.on || scnt < iters {
			s.o.latencyGapWait(ctx)
			stopping = lw.post(ctx, s.client, buf, stopByte, tposted, scnt, clk)
			scnt++
			buf[postByte] = byte(scnt)
			if _, err := qp.PostSend(wr); err != nil {
				return report.Lat{}, fmt.Errorf("post send: %w", err)
			}
		}
		if lw.on || ccnt < iters {
			if err := s.spinPoll(ctx, s.scq, wc, "a WRITE completion", false); err != nil {
				return report.Lat{}, err
			}
			ccnt++
		}
		if stopping {
			break
		}
	}
	s.rqPSN = (base + uint32(rcnt)*pkts) & 0xFFFFFF
	if lw.on {
		return lw.result(size, 2)
	}
	return s.latStats(size, tposted, 2), nil
}

// writeSpins and writePollSleep shape the wait for the peer's WRITE: a
// few yields, then short sleeps, which let the runtime poll the network
// (pure spinning starves it on a two-CPU machine: see spinPoll).
const (
	writeSpins     = 50
	writePollSleep = 20 * time.Microsecond
)

// waitWrite waits until the QP's responder has accepted want packets past
// base, i.e. the peer's WRITE number n has landed.
func (s *session) waitWrite(ctx context.Context, qp *rxe.QP, base, want uint32, n int) error {
	var deadline, grace time.Time
	for spins := 0; ; spins++ {
		a := qp.Query()
		if (a.RQPSN-base)&0xFFFFFF >= want {
			return nil
		}
		if a.State == rxe.QPSErr {
			if flushedByPeer(rxe.WC{Status: rxe.WCWRFlushErr}, s.peerDone) {
				return fmt.Errorf("waiting for the peer's RDMA WRITE %d: %w", n, errPeerDone)
			}
			return fmt.Errorf("our QP %#x went to the error state while waiting for the peer's RDMA WRITE %d (see the peer's output)", qp.QPN(), n)
		}
		if spins >= writeSpins { // sleeping: a look at ctx and the clock costs little
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted while waiting for the peer's RDMA WRITE %d", n)
			}
			now := time.Now()
			bound := s.stall()
			if s.unreliable() {
				bound = s.lossWait()
			}
			if deadline.IsZero() {
				deadline = now.Add(bound)
			} else if now.After(deadline) {
				if s.unreliable() {
					return s.lostError(bound, fmt.Sprintf("the peer's RDMA WRITE %d", n))
				}
				return fmt.Errorf("no RDMA WRITE %d from the peer for %v: the peer stopped", n, bound)
			}
			if s.peerDone != nil && s.peerDone.Err() != nil { // what it wrote before may still land
				if grace.IsZero() {
					grace = now.Add(peerDoneQuiet)
				} else if now.After(grace) {
					return fmt.Errorf("waiting for the peer's RDMA WRITE %d: %w", n, errPeerDone)
				}
			}
		}
		if busy, err := s.busyPollWrite(qp, spins); busy || err != nil {
			if err != nil {
				return err
			}
			if spins < writeSpins {
				spins = writeSpins // look at ctx and the clock from now on
			}
			continue
		}
		if spins < writeSpins {
			runtime.Gosched()
		} else {
			time.Sleep(writePollSleep)
		}
	}
}

// retryExcWhy explains RETRY_EXC_ERR on QP qpn by whether the peer was
// answering at all during the retries (rxe.QPCounters.PeerAnswered), and
// before them: a peer that answered without progress points at loss or at
// a peer busy resending older responses; one that answered earlier in the
// run and then fell silent at a peer (process, QP or host) that is gone or
// a path that broke; one never heard from at the address, the MTU or a
// firewall. A peer silent during the retries that has also closed the
// exchange's TCP connection (peerClosed) has ended its process, and the
// text says so instead.
func (s *session) retryExcWhy(qpn uint32) string {
	var c rxe.QPCounters
	for _, qp := range s.qps {
		if qp.QPN() == qpn {
			c = qp.Counters()
		}
	}
	answered, n, _ := c.PeerAnswered()
	if !answered && s.conn != nil && peerClosed(s.conn) {
		// The peer's kernel closed the exchange's TCP connection: its
		// process ended, which explains the silence better than the
		// address, the MTU or a firewall.
		return fmt.Sprintf("transport retry counter exceeded: %v answered nothing during the retries (ACK timeout -u %d, %d+1 times; %d packets from it earlier in the run), "+
			"and the peer closed the exchange's connection: the peer process ended (it failed, was killed or interrupted: see its output)",
			s.peerAddr, s.o.timeout, s.o.retryCount, c.RcvdPkts)
	}
	return retryExcText(s.peerAddr, answered, n, c.RcvdPkts, s.o.timeout, s.o.retryCount)
}

// retryExcText is retryExcWhy's text for a peer at peer that answered n
// packets during the retries (answered) and rcvd packets in all, with the
// ACK timeout exponent timeout and the retry count retries.
func retryExcText(peer netip.AddrPort, answered bool, n, rcvd uint64, timeout, retries int) string {
	if answered {
		return fmt.Sprintf("transport retry counter exceeded: %v kept answering (%d responses during the retries) but acknowledged nothing new "+
			"within the ACK timeout (-u %d) %d+1 times. Likely causes: heavy packet loss on the path, or a peer that answers older requests first "+
			"(kernel rxe resends whole READ responses): a longer timeout (-u) or a lossless path helps",
			peer, n, timeout, retries)
	}
	if rcvd > 0 {
		return fmt.Sprintf("transport retry counter exceeded: %v answered %d packets earlier in the run, then nothing during the retries "+
			"(ACK timeout -u %d, %d+1 times). Likely causes: the peer process, its QP or its host is gone, or the path between the hosts broke",
			peer, rcvd, timeout, retries)
	}
	return fmt.Sprintf("transport retry counter exceeded: %v never answered during the retries. Likely causes: a wrong address or GID (the peer sent GID %v; check --bind on both ends), "+
		"an MTU above what the path carries (try -m 1024 on both ends), UDP port %d blocked by a firewall, or the peer's QP in error or gone",
		peer, peer.Addr(), peer.Port())
}
