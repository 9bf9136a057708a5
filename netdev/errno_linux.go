package netdev

import (
	"errors"
	"net"
	"syscall"
)

// errClass is what a socket error means to the read and write loops.
type errClass int

const (
	classOther      errClass = iota // returned to the caller as it is
	classClosed                     // the Conn was closed
	classNoBufs                     // ENOBUFS: local drop (qdisc or device queue full)
	classWouldBlock                 // EAGAIN: local drop (send buffer full, non-blocking)
	classICMP                       // may be a queued ICMP error from an earlier datagram
)

func (c errClass) String() string {
	switch c {
	case classClosed:
		return "closed"
	case classNoBufs:
		return "nobufs"
	case classWouldBlock:
		return "wouldblock"
	case classICMP:
		return "icmp"
	}
	return "other"
}

// classify maps an error from ReadBatch's or WriteBatch's system call (a
// *net.OpError around an *os.SyscallError around a syscall.Errno, or around
// poll's "use of closed network connection") to its class and errno (0 if
// there is none). It is a pure function.
//
// The ICMP class holds every errno that Linux stores in sk_err when an ICMP
// or ICMPv6 error arrives for a UDP socket with IP_RECVERR
// (__udp4_lib_err via icmp_err_convert; __udp6_lib_err via icmpv6_err_convert):
// port unreachable is ECONNREFUSED, fragmentation needed / packet too big is
// EMSGSIZE, and so on. Some of these can also be local errors on write (no
// route, EMSGSIZE for a datagram over the MTU); the write loop tells them
// apart by what it finds on the socket's error queue.
func classify(err error) (errClass, syscall.Errno) {
	if err == nil {
		return classOther, 0
	}
	if errors.Is(err, net.ErrClosed) {
		return classClosed, 0
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return classOther, 0
	}
	switch errno {
	case syscall.ENOBUFS:
		return classNoBufs, errno
	case syscall.EAGAIN:
		return classWouldBlock, errno
	case syscall.ECONNREFUSED, // ICMP port unreachable (v4 and v6)
		syscall.EHOSTUNREACH, // host unreachable, time exceeded, filtered
		syscall.ENETUNREACH,  // net unreachable, v6 no route
		syscall.EHOSTDOWN,    // host unknown
		syscall.ENONET,       // host isolated
		syscall.ENOPROTOOPT,  // protocol unreachable
		syscall.EOPNOTSUPP,   // source route failed
		syscall.EPROTO,       // parameter problem
		syscall.EACCES,       // ICMPv6 administratively prohibited
		syscall.EMSGSIZE:     // fragmentation needed / packet too big
		return classICMP, errno
	}
	return classOther, errno
}

// dropError returns the DropError for a local-drop class, or nil.
func dropError(c errClass) error {
	switch c {
	case classNoBufs:
		return errDropNoBufs
	case classWouldBlock:
		return errDropWouldBlock
	}
	return nil
}
