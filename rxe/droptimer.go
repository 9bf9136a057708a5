package rxe

import (
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
