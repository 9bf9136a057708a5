package netdev

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The recvmmsg and sendmmsg system calls, with every header, I/O vector,
// socket address and control buffer allocated once per UDPConn, so that a
// datagram costs no allocation. The system calls run inside
// syscall.RawConn.Read and Write with MSG_DONTWAIT: EAGAIN parks the
// goroutine in the runtime poller, as net.UDPConn does, and EINTR is
// retried.

// sockaddrSize holds a sockaddr_in6, the larger of the two families.
const sockaddrSize = unix.SizeofSockaddrInet6

// mmsg is one direction's preallocated system-call state.
type mmsg struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names [][sockaddrSize]byte // one per header
	oob   []byte               // oobSize bytes per header
	oobSz int

	// Arguments and results of the system call that run passes to
	// RawConn.Read or Write.
	start, n int // hdrs[start : start+n]
	flags    int
	got      int
	errno    unix.Errno
	block    bool // on EAGAIN wait in the poller (true) or report it (false)
	trap     uintptr
	// handOff makes the call with Syscall6 instead of RawSyscall6, so
	// that the scheduler may run other goroutines on this thread's
	// processor while it lasts (call).
	handOff bool
	run     func(fd uintptr) bool // the method value of call, made once
}

func newMmsg(hdrs, iovs, oobSize int, trap uintptr) *mmsg {
	m := &mmsg{
		hdrs:  make([]unix.Mmsghdr, hdrs),
		iovs:  make([]unix.Iovec, iovs),
		names: make([][sockaddrSize]byte, hdrs),
		oob:   make([]byte, hdrs*oobSize),
		oobSz: oobSize,
		trap:  trap,
	}
	m.run = m.call
	return m
}

// call runs one recvmmsg or sendmmsg over hdrs[start : start+n].
//
// It uses RawSyscall6, which does not tell the Go scheduler that the
// thread enters the kernel: with MSG_DONTWAIT (always added to flags)
// neither call ever sleeps (an empty or full socket returns EAGAIN, and
// the caller waits in the poller), so there is no processor to hand off.
// Syscall6 wakes sysmon if it is in its long sleep and lets sysmon hand
// the processor to another thread when the call lasts longer than a
// sysmon tick (20 µs or more) while other goroutines wait, as a sendmmsg
// that runs the loopback receive path can: thread switches that cost a
// stream between two processes on a two-core machine about a fifth of
// its CPU time (docs/performance.md, "Raw system calls").
//
// With handOff it uses Syscall6 all the same. A sendmmsg to a peer in the
// same process runs that peer's receive path, and the peer's goroutine
// that reads it waits for a processor; RawSyscall6 keeps this thread's
// processor for the whole call, so the receiver starts only when it
// returns. With a shallow window (the socket buffers capped by
// net.core.rmem_max/wmem_max, UDPConn sets handOff then) that
// serialisation cost loopback WRITE 64 KiB a fifth of its rate: 0.60–0.77
// of the uncapped run against 0.82–0.85 with Syscall6 (docs/performance.md,
// "Capped buffers and raw sendmmsg").
func (m *mmsg) call(fd uintptr) bool {
	for {
		sys := unix.RawSyscall6
		if m.handOff {
			sys = unix.Syscall6
		}
		r, _, e := sys(m.trap, fd, uintptr(unsafe.Pointer(&m.hdrs[m.start])), uintptr(m.n), uintptr(m.flags|unix.MSG_DONTWAIT), 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if m.block {
				return false
			}
		}
		m.got, m.errno = int(r), e
		return true
	}
}

// oobAt is header i's control buffer.
func (m *mmsg) oobAt(i int) []byte { return m.oob[i*m.oobSz : (i+1)*m.oobSz] }

// setIov points iovec i at b (which may be empty).
func (m *mmsg) setIov(i int, b []byte) {
	v := &m.iovs[i]
	if len(b) == 0 {
		v.Base = nil
	} else {
		v.Base = &b[0]
	}
	v.SetLen(len(b))
}

// clearIovs drops the references to the caller's buffers.
func (m *mmsg) clearIovs(k int) {
	for i := range k {
		m.iovs[i].Base = nil
	}
}

// putSockaddr writes a as a sockaddr_in (v6 false) or sockaddr_in6 into b
// and returns its length. The caller has checked the family.
func putSockaddr(b *[sockaddrSize]byte, a netip.AddrPort, v6 bool) int {
	clear(b[:])
	binary.BigEndian.PutUint16(b[2:4], a.Port())
	if !v6 {
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
		ip := a.Addr().Unmap().As4()
		copy(b[4:8], ip[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
	ip := a.Addr().As16()
	copy(b[8:24], ip[:])
	if z := a.Addr().Zone(); z != "" {
		binary.NativeEndian.PutUint32(b[24:28], zoneIndex(z))
	}
	return unix.SizeofSockaddrInet6
}

// sockaddrAddrPort reads a sockaddr_in or sockaddr_in6 of length n.
func sockaddrAddrPort(b *[sockaddrSize]byte, n int) netip.AddrPort {
	if n < 2 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:28]); scope != 0 && ip.Is6() && !ip.Is4In6() {
			ip = ip.WithZone(zoneName(scope))
		}
		return netip.AddrPortFrom(ip.Unmap(), port)
	}
	return netip.AddrPort{}
}
