package rxe

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// Timers, in one picture.
//
// A QP has two deadlines, both kept under its lock and both acted on only
// by its step (qpstep.go):
//
//	timerAt          the requester's deadline (requester.Deadline: the
//	                 local ACK timeout, an RNR wait, a credit probe); the
//	                 step calls requester.OnTimeout once now reaches it
//	localDrop.until  the end of the local-drop back-off (LocalDropAdaptive);
//	                 the step sends the datagrams the QP holds once now
//	                 reaches it
//
// Neither has a timer of its own. The QP's wake-up time (the end of the
// back-off while it holds datagrams, since its step does nothing else
// before they are out; else the requester's deadline) is filed in its
// vector's timerQueue: a min-heap of QPs (each at most once, by its index,
// so filing allocates nothing) under one wakeTimer armed for the earliest
// entry. When that timer fires, every QP
// whose wake-up time has come is put on the vector's run queue; its step
// reads the clock and does whatever is due. So the whole device has one
// timer per vector, and a timer only ever marks a QP runnable.
//
// Filing is lazy in one direction: a wake-up that moves later (an ACK
// pushes the ACK timeout back, which happens on almost every step of a
// busy QP) leaves the earlier entry in place; the QP then wakes early,
// finds nothing due and files its real wake-up. A wake-up that moves
// earlier is filed at once.
//
//	QP step ──armTimers──▶ vector.timers (heap) ──wakeTimer fires──▶ vector.schedule(QP) ──▶ QP step
//
// The wakeTimer is a timerfd when the vector's netdev.Conn offers the
// KernelTimers capability (timers_linux.go), else the runtime's timer.
//
// One timer stands outside this picture: the device's QP1 (gsi.go) drives
// the connection manager's agent with a runtime timer of its own, armed
// at the agent's deadline (MAD retries, tens of milliseconds), created on
// QP1's first use.

// KernelTimers is an optional capability of a netdev.Conn, found by a type
// assertion as wireguard-go finds its conn.Bind's optional interfaces;
// decorators that implement Unwrap() netdev.Conn are looked through. A
// Conn whose reads and writes block in the kernel (a socket) returns true:
// the device's goroutines then sleep in the kernel's poller, which the Go
// runtime wakes for its own timers only to the millisecond
// (golang/go#44343), and local-drop back-offs are fractions of a
// millisecond, so the device arms its timers on a kernel timer (a timerfd
// on Linux) whose expiry wakes the poller at once. A Conn without it (an
// in-memory pipe) keeps the runtime's timers, which follow
// testing/synctest's virtual clock.
type KernelTimers interface {
	KernelTimers() bool
}

// kernelTimers reports whether conn, or a Conn it decorates, offers the
// KernelTimers capability.
func kernelTimers(conn netdev.Conn) bool {
	for conn != nil {
		if k, ok := conn.(KernelTimers); ok {
			return k.KernelTimers()
		}
		u, ok := conn.(interface{ Unwrap() netdev.Conn })
		if !ok {
			return false
		}
		conn = u.Unwrap()
	}
	return false
}

// wakeTimer is a vector's one timer: a one-shot timer that calls its
// function once per expiry.
type wakeTimer interface {
	// Reset arms the timer to fire after d, replacing any earlier arming.
	Reset(d time.Duration)
	// Stop disarms the timer. A callback already under way may still run.
	Stop()
	// Close disarms the timer for good and releases what it holds.
	Close()
}

// newWakeTimer returns a wakeTimer armed to call fn after d: a kernel
// timer if conn offers KernelTimers and the platform has one, else the
// runtime's timer.
func newWakeTimer(conn netdev.Conn, d time.Duration, fn func()) wakeTimer {
	if kernelTimers(conn) {
		if t := newPreciseTimer(d, fn); t != nil {
			return t
		}
	}
	return newRuntimeTimer(d, fn)
}

// runtimeTimer is a wakeTimer on the Go runtime's timers. Its methods are
// called one at a time (under the timerQueue's mu, or fdTimer's).
type runtimeTimer struct {
	t      *time.Timer
	closed bool
}

func newRuntimeTimer(d time.Duration, fn func()) *runtimeTimer {
	return &runtimeTimer{t: time.AfterFunc(d, fn)}
}

func (r *runtimeTimer) Reset(d time.Duration) {
	if !r.closed {
		r.t.Reset(d)
	}
}

func (r *runtimeTimer) Stop() { r.t.Stop() }

func (r *runtimeTimer) Close() {
	r.closed = true
	r.t.Stop()
}

// timerSlot is a QP's place in its vector's timerQueue, guarded by the
// queue's mu; filed mirrors at for armTimers' lock-free check. gateRetry
// and gateFor are guarded by the QP's mu instead.
type timerSlot struct {
	at    time.Time    // the filed wake-up time
	index int          // position in the heap, -1 when not filed
	filed atomic.Int64 // at as nanoseconds since timeBase, notFiled when not filed
	// gateRetry is the next try of a due deadline that waits for its
	// socket's gate (QP.readBeforeTimeout), gateFor that deadline;
	// armTimers files the deadline no earlier, so that the waiting QP is
	// not stepped again at once, while the QP's deadline is still gateFor
	// (an answer read meanwhile that moved or cleared it ends the wait).
	gateRetry, gateFor time.Time
}

// notFiled is timerSlot.filed for a QP with no entry.
const notFiled = math.MaxInt64

// timeBase is the origin of timerSlot.filed (a monotonic reading).
var timeBase = time.Now()

// init prepares an unfiled slot.
func (s *timerSlot) init() {
	s.index = -1
	s.filed.Store(notFiled)
}

// timerQueue is a vector's wake-up times of its QPs: a min-heap by
// timerSlot.at under one wakeTimer, created at the first filing.
type timerQueue struct {
	v       *vector
	mu      sync.Mutex
	heap    []*QP
	timer   wakeTimer
	armedAt time.Time // when timer fires; zero if disarmed
	closed  bool
}

// armTimers files the QP's wake-up time (caller holds mu): the end of its
// local-drop back-off while it holds datagrams (its step acts on nothing
// else before they are out, the requester's deadline included, which then
// waits at most the back-off), else its requester deadline, or the next
// try of a due one that waits for the socket's gate (gateRetry). With neither,
// nothing is filed: an entry already filed stays and wakes the QP for
// nothing, once.
func (qp *QP) armTimers() {
	at := qp.timerAt
	if !at.IsZero() && at.Equal(qp.slot.gateFor) && at.Before(qp.slot.gateRetry) {
		at = qp.slot.gateRetry
	}
	if qp.localDrop.holding() {
		at = qp.localDrop.until
	}
	if at.IsZero() {
		return
	}
	// The common case, an ACK that pushes the deadline back, ends here
	// without the queue's lock. An entry removed meanwhile by fire has
	// put the QP on the run queue, and its next step files again.
	if qp.slot.filed.Load() <= int64(at.Sub(timeBase)) {
		return
	}
	qp.vec.timers.file(qp, at)
}

// file sets qp's wake-up time to at, unless qp is already filed at or
// before at (the lazy direction: it wakes early and files again).
func (q *timerQueue) file(qp *QP, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	s := &qp.slot
	switch {
	case s.index < 0:
		s.at, s.index = at, len(q.heap)
		q.heap = append(q.heap, qp)
		q.up(s.index)
	case at.Before(s.at):
		s.at = at
		q.up(s.index)
	default:
		return
	}
	s.filed.Store(int64(at.Sub(timeBase)))
	q.rearm()
}

// cancel takes qp out of the queue (reset, Destroy, Device.Close).
func (q *timerQueue) cancel(qp *QP) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := qp.slot.index
	if i < 0 {
		return
	}
	last := len(q.heap) - 1
	q.swap(i, last)
	q.heap[last] = nil
	q.heap = q.heap[:last]
	qp.slot.init()
	if i < last {
		q.down(i)
		q.up(i)
	}
}

// rearm sets the timer for the heap's earliest entry if it is not already
// set at or before it; the caller holds mu. A timer set for an entry that
// is gone fires for nothing and re-arms.
func (q *timerQueue) rearm() {
	if len(q.heap) == 0 {
		return
	}
	at := q.heap[0].slot.at
	if !q.armedAt.IsZero() && !q.armedAt.After(at) {
		return
	}
	q.armedAt = at
	d := max(time.Until(at), time.Nanosecond)
	if q.timer == nil {
		q.timer = newWakeTimer(q.v.conn, d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// fire runs on the timer: it puts every QP whose wake-up time has come on
// the run queue and re-arms for the next. It takes the due QPs off the
// heap len(buf) at a time and schedules each group outside the lock, so
// that any number of them is handled without allocating (a flood of due
// deadlines, each waiting for a held socket gate, is filed again every
// timeoutReadWait: QP.readBeforeTimeout).
func (q *timerQueue) fire() {
	var buf [16]*QP
	var now time.Time
	for {
		due := buf[:0]
		q.mu.Lock()
		if now.IsZero() {
			now = time.Now()
			q.armedAt = time.Time{}
		}
		for len(due) < len(buf) && len(q.heap) > 0 && !q.heap[0].slot.at.After(now) {
			qp := q.heap[0]
			last := len(q.heap) - 1
			q.swap(0, last)
			q.heap[last] = nil
			q.heap = q.heap[:last]
			qp.slot.init()
			q.down(0)
			due = append(due, qp)
		}
		full := len(due) == len(buf)
		if !full && !q.closed {
			q.rearm()
		}
		q.mu.Unlock()
		for _, qp := range due {
			q.v.schedule(qp)
		}
		if !full {
			return
		}
	}
}

// close stops the timer for good (Device.Close).
func (q *timerQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, qp := range q.heap {
		qp.slot.init()
	}
	q.heap = nil
	if q.timer != nil {
		q.timer.Close()
	}
}

func (q *timerQueue) less(i, j int) bool { return q.heap[i].slot.at.Before(q.heap[j].slot.at) }

func (q *timerQueue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.heap[i].slot.index = i
	q.heap[j].slot.index = j
}

func (q *timerQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *timerQueue) down(i int) {
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q.heap) && q.less(l, m) {
			m = l
		}
		if r < len(q.heap) && q.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.swap(i, m)
		i = m
	}
}
