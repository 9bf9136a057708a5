//go:build linux

package rxe

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdTimer is a wakeTimer on a timerfd (CLOCK_MONOTONIC, non-blocking, so
// that the runtime's poller watches it). Its goroutine blocks reading the
// timerfd and calls fn after each expiry; the expiry wakes the poller
// within tens of microseconds even when the process is otherwise idle,
// where a time.Timer waits for the poller's millisecond timeout. Close
// ends the goroutine. If the timerfd cannot be set or read, the timer
// falls back to the runtime's timer for good.
type fdTimer struct {
	f  *os.File
	fn func()

	mu       sync.Mutex
	fallback *runtimeTimer // set once the timerfd failed
	closed   bool
}

// newPreciseTimer returns a timerfd-based wakeTimer armed to call fn after
// d, or nil if no timerfd can be created (a seccomp filter, a full file
// table).
func newPreciseTimer(d time.Duration, fn func()) wakeTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	t := &fdTimer{f: os.NewFile(uintptr(fd), "rxe-waketimer"), fn: fn}
	go t.wait()
	t.Reset(d)
	return t
}

// wait calls fn after each expiry until the timerfd is closed or fails.
func (t *fdTimer) wait() {
	var b [8]byte // the expiration count (timerfd_create(2))
	for {
		if _, err := t.f.Read(b[:]); err != nil {
			t.mu.Lock()
			if !t.closed {
				// A failure, not our Close: carry on with the runtime's
				// timer, firing now so that a pending arming is not lost
				// (a retry that comes early is only refused again).
				t.fallback = newRuntimeTimer(0, t.fn)
			}
			t.mu.Unlock()
			return
		}
		t.fn()
	}
}

// set arms the timer to fire after d > 0, or disarms it (d == 0); the
// caller holds mu. Setting a timerfd also clears an expiry not yet read,
// so a stopped timer does not fire late.
func (t *fdTimer) set(d time.Duration) {
	if t.closed {
		return
	}
	if t.fallback == nil {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		rc, err := t.f.SyscallConn()
		if err == nil {
			if cerr := rc.Control(func(fd uintptr) { err = unix.TimerfdSettime(int(fd), 0, &spec, nil) }); cerr != nil {
				err = cerr
			}
		}
		if err == nil {
			return
		}
		t.fallback = newRuntimeTimer(time.Hour, t.fn)
		t.fallback.Stop()
	}
	if d > 0 {
		t.fallback.Reset(d)
	} else {
		t.fallback.Stop()
	}
}

// Reset arms the timer to fire after d (at least 1 ns: a zero it_value
// disarms a timerfd).
func (t *fdTimer) Reset(d time.Duration) {
	t.mu.Lock()
	t.set(max(d, time.Nanosecond))
	t.mu.Unlock()
}

// Stop disarms the timer.
func (t *fdTimer) Stop() {
	t.mu.Lock()
	t.set(0)
	t.mu.Unlock()
}

// Close disarms the timer and closes the timerfd, which ends its
// goroutine.
func (t *fdTimer) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	if t.fallback != nil {
		t.fallback.Stop()
	}
	// The goroutine's Read now returns os.ErrClosed and it exits. Closing
	// a timerfd we own and have not closed has no failure to act on.
	_ = t.f.Close()
}
