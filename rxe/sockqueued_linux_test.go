package rxe

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// socketHoldsDatagram reports whether the kernel holds a datagram for
// reading on conn (a *netdev.UDPConn or anything else with SyscallConn):
// SIOCINQ on a UDP socket gives the length of the first queued datagram,
// 0 when none is queued (udp_ioctl).
func socketHoldsDatagram(t *testing.T, conn any) bool {
	t.Helper()
	sc, ok := conn.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	require.True(t, ok, "%T has no socket", conn)
	rc, err := sc.SyscallConn()
	require.NoError(t, err)
	var n int
	var ierr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}))
	require.NoError(t, ierr, "SIOCINQ")
	return n > 0
}
