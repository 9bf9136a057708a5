package rxe

import (
	"sync"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// dropTimer is a QP's back-off timer after a local drop
// (LocalDropAdaptive): a one-shot timer that calls its function once per
// expiry. The back-off delays are fractions of a millisecond (seed 002:
// about 50 µs on 1 GbE), and while a QP waits out its back-off the process
// is often otherwise idle; the Go runtime then sleeps in epoll_pwait with a
// timeout in whole milliseconds (golang/go#44343), so a time.Timer fires up
// to 1 ms late (docs/seed002.md measures it on the bench). On Linux a
// device on a UDP socket uses a timerfd instead (droptimer_linux.go), whose
// expiry is an event on a file descriptor and wakes the poller at once.
type dropTimer interface {
	// Reset arms the timer to fire after d, replacing any earlier arming.
	Reset(d time.Duration)
	// Stop disarms the timer. A callback already under way may still run.
	Stop()
	// Close disarms the timer for good and releases what it holds.
	Close()
}

// newDropTimer returns a dropTimer armed to call fn after d: a timerfd if
// the device sends through a UDP socket (netdev.UDPConn, possibly under
// decorators) on Linux, else the runtime's timer. A device on a pipe keeps
// the runtime's timer, which follows testing/synctest's virtual clock.
func newDropTimer(conn netdev.Conn, d time.Duration, fn func()) dropTimer {
	if onSocket(conn) {
		if t := newPreciseTimer(d, fn); t != nil {
			return t
		}
	}
	return newRuntimeTimer(d, fn)
}

// onSocket reports whether conn, or a Conn it decorates (Unwrap), is a
// netdev.UDPConn.
func onSocket(conn netdev.Conn) bool {
	for conn != nil {
		switch c := conn.(type) {
		case *netdev.UDPConn:
			return true
		case interface{ Unwrap() netdev.Conn }:
			conn = c.Unwrap()
		default:
			return false
		}
	}
	return false
}

// runtimeTimer is a dropTimer on the Go runtime's timers. Its methods are
// called one at a time (under the QP's mu, or fdTimer's).
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

// dropQueue is a vector's back-offs after local drops: one dropTimer for
// all its QPs, armed for the earliest back-off, and a min-heap of the
// QPs' deadlines. So waiting out back-offs costs one timer (a timerfd
// and one goroutine on Linux sockets) per vector, never a goroutine or a
// file descriptor per QP, however many QPs have ever had a drop.
type dropQueue struct {
	v       *vector
	mu      sync.Mutex
	timer   dropTimer   // created at the first arming
	armedAt time.Time   // when timer fires; zero if disarmed
	heap    []dropEntry // min-heap by at
	closed  bool
}

// dropEntry is one arming: valid while its gen is the QP's dropGen.
type dropEntry struct {
	at  time.Time
	qp  *QP
	gen uint32
}

// arm schedules qp (dropDue, then the run queue) at at, unless qp's
// dropGen has moved past gen by then.
func (q *dropQueue) arm(now, at time.Time, qp *QP, gen uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.push(dropEntry{at: at, qp: qp, gen: gen})
	q.rearm(now)
}

// rearm sets the timer for the heap's earliest deadline if it is not
// already set at or before it; the caller holds mu.
func (q *dropQueue) rearm(now time.Time) {
	if len(q.heap) == 0 {
		return
	}
	at := q.heap[0].at
	if !q.armedAt.IsZero() && !q.armedAt.After(at) {
		return
	}
	q.armedAt = at
	d := max(at.Sub(now), time.Nanosecond)
	if q.timer == nil {
		q.timer = newDropTimer(q.v.conn, d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// fire runs on the timer: it releases every QP whose back-off has passed
// and re-arms for the next.
func (q *dropQueue) fire() {
	now := time.Now()
	var due []*QP
	q.mu.Lock()
	q.armedAt = time.Time{}
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := q.pop()
		if e.qp.dropGen.Load() == e.gen {
			due = append(due, e.qp)
		}
	}
	if !q.closed {
		q.rearm(now)
	}
	q.mu.Unlock()
	for _, qp := range due {
		qp.dropDue.Store(true)
		q.v.schedule(qp)
	}
}

// close stops the timer for good (Device.Close).
func (q *dropQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.heap = nil
	if q.timer != nil {
		q.timer.Close()
	}
}

func (q *dropQueue) push(e dropEntry) {
	q.heap = append(q.heap, e)
	for i := len(q.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.heap[i].at.Before(q.heap[p].at) {
			break
		}
		q.heap[i], q.heap[p] = q.heap[p], q.heap[i]
		i = p
	}
}

func (q *dropQueue) pop() dropEntry {
	h := q.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = dropEntry{}
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].at.Before(h[m].at) {
			m = l
		}
		if r < len(h) && h[r].at.Before(h[m].at) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	q.heap = h
	return top
}
