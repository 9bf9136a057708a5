package netdev

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// waitSocketError waits, at most 5 seconds, until c's socket has an error
// pending (POLLERR: an ICMP error on its error queue, IP_RECVERR), without
// taking it. An ICMP error about a datagram sent on loopback is queued by
// the softirq that delivers the datagram, which may run after the send
// returns.
func waitSocketError(t testing.TB, c *UDPConn) {
	t.Helper()
	waitError(t, c.rc)
}

// controller runs a function with a socket's descriptor, as
// syscall.RawConn.Control does.
type controller interface{ Control(func(fd uintptr)) error }

// fdControl is a socket descriptor of a test's own as a controller.
type fdControl int

func (fd fdControl) Control(f func(fd uintptr)) error {
	f(uintptr(fd))
	return nil
}

// waitError is waitSocketError for any socket.
func waitError(t testing.TB, rc controller) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var revents int16
		var perr error
		require.NoError(t, rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd)}} // POLLERR is reported whatever the events asked
			var n int
			for {
				n, perr = unix.Poll(fds, 10)
				if perr != unix.EINTR {
					break
				}
			}
			if n > 0 {
				revents = fds[0].Revents
			}
		}))
		require.NoError(t, perr)
		if revents&unix.POLLERR != 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no ICMP error reached the socket within 5 s")
	}
}
