package netdev

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// inNetnsOf runs f in the network namespace of the socket rc controls
// (SIOCGSKNS, Linux 4.9), for what a namespace decides besides the socket
// itself: which interfaces there are, and where a new socket belongs. On
// the calling goroutine, its thread locked, when the thread is in that
// namespace already (or /proc cannot tell); else on a new goroutine whose
// thread joins the namespace (setns, which needs CAP_SYS_ADMIN) and is
// discarded afterwards, never returned to the scheduler in the wrong
// namespace. Without CAP_NET_ADMIN, which SIOCGSKNS needs, the socket's
// namespace is unknown and f runs in the calling thread's.
func inNetnsOf(rc syscall.RawConn, f func() error) error {
	ns, ierr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { ns, ierr = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS) }); err != nil {
		return err
	}
	if ierr != nil {
		// SIOCGSKNS needs CAP_NET_ADMIN, and setns CAP_SYS_ADMIN: a process
		// without them cannot move a thread to another namespace anyway,
		// so f runs in the calling thread's.
		return f()
	}
	defer unix.Close(ns)
	var want, cur unix.Stat_t
	if err := unix.Fstat(ns, &want); err != nil {
		return fmt.Errorf("netdev: the socket's network namespace: %w", err)
	}
	runtime.LockOSThread()
	if err := unix.Stat("/proc/thread-self/ns/net", &cur); err != nil || cur.Dev == want.Dev && cur.Ino == want.Ino {
		defer runtime.UnlockOSThread()
		return f()
	}
	runtime.UnlockOSThread()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netdev: joining the socket's network namespace (setns): %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
