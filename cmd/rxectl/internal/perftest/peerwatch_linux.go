package perftest

import (
	"net"
	"syscall"
	"time"
	"unsafe"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
)

// rawConn is c's raw connection, or nil when c has none.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// waitReadable blocks until the connection rc has data to read, or the
// peer has closed or reset it (true), or until its read deadline passes
// or it is closed here (false). It peeks (MSG_PEEK): the data stays for
// the exchange.
func waitReadable(rc syscall.RawConn) bool {
	ready := false
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EAGAIN || err == syscall.EINTR {
			return false // nothing yet: wait until the socket is readable
		}
		ready = true // data, the peer's FIN (0 bytes) or an error such as a reset
		return true
	})
	return err == nil && ready
}

// peerClosed reports whether the peer has closed or reset the TCP
// connection c, with or without data of its left unread here: poll(2)
// with a zero timeout reports POLLRDHUP once the peer's FIN has arrived
// (it shut down its writing side), even before the data it wrote ahead
// of it is read, and POLLHUP or POLLERR after a reset. An interrupted
// latency client writes its key message and closes; its server sees the
// close before it reads the message. Nothing is read. A peer that wrote
// and keeps the connection open, or wrote nothing, is false.
func peerClosed(c net.Conn) bool {
	rc := rawConn(c)
	if rc == nil {
		return false
	}
	closed := false
	rc.Control(func(fd uintptr) {
		pfd := pollFd{fd: int32(fd), events: pollIn | pollRdHup}
		var zero syscall.Timespec // return at once
		for {
			n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			if errno == syscall.EINTR {
				continue
			}
			closed = errno == 0 && n == 1 && pfd.revents&(pollRdHup|pollHup|pollErr) != 0
			return
		}
	})
	return closed
}

// pollFd is struct pollfd of poll(2), for ppoll; the events below are
// Linux's (asm-generic/poll.h). The standard library's syscall package has
// the system call but not these, and this package stays off x/sys/unix
// (layering_test.go: only the packages with sockets import it).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn    = 0x1
	pollErr   = 0x8
	pollHup   = 0x10
	pollRdHup = 0x2000
)

// peekDone reports whether the data waiting on the TCP connection c
// begins with oob.DoneMsg, the message Finish writes after the closing
// key exchange (ctx_close_connection): the peer has ended its run. It
// waits for as many bytes as DoneMsg has, or the peer's close, for at
// most wait, and reads nothing (MSG_PEEK): the data stays for the
// exchange. No key message begins with those bytes: its fifth byte is
// the colon after the LID's four hex digits.
func peekDone(c net.Conn, wait time.Duration) bool {
	rc := rawConn(c)
	if rc == nil {
		return false
	}
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return false
	}
	defer c.SetReadDeadline(time.Time{})
	var b [len(oob.DoneMsg)]byte
	done := false
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // nothing yet
		case err != nil || n == 0:
			return true // reset, or closed without DoneMsg
		case string(b[:n]) != oob.DoneMsg[:n]:
			return true // another message
		case n < len(b):
			return false // DoneMsg's first bytes: wait for the rest
		}
		done = true
		return true
	})
	return done
}
