package netdev

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// scriptedWrites is a UDPConn's syscall.RawConn that readies each Write
// (each sendmmsg of WriteBatch's send) as its script says:
//
//	'r': the sendmmsg runs on refused instead of the UDPConn's socket:
//	     a socket connected to a closed port, without IP_RECVERR, that
//	     the port unreachable of a datagram it sent left with ECONNREFUSED
//	     to report (its only error: it queues nothing on an error queue,
//	     so poll reports POLLERR exactly when the error is there); the
//	     sendmmsg fails with ECONNREFUSED and sends nothing, as on a
//	     socket with an ICMP error pending;
//	'1': the sendmmsg is of the first header only, as when the kernel
//	     sends part of a batch;
//	'.': as it is (also every Write past the script).
//
// An ICMP error on the UDPConn's own socket would put an entry on its
// error queue too, but poll reports POLLERR once the entry is queued,
// before the error the send reports is set (__udp4_lib_err sets sk_err
// after ip_icmp_error): when the ICMP error is handled on another
// processor (RPS), the send can slip between the two.
type scriptedWrites struct {
	syscall.RawConn
	t       *testing.T
	c       *UDPConn
	refused int
	script  string
	writes  int
}

func (s *scriptedWrites) Write(f func(fd uintptr) bool) error {
	step := byte('.')
	if s.writes < len(s.script) {
		step = s.script[s.writes]
	}
	s.writes++
	switch step {
	case 'r':
		require.NoError(s.t, unix.Send(s.refused, []byte("nobody"), 0))
		waitError(s.t, fdControl(s.refused))
		f(uintptr(s.refused))
		return nil
	case '1':
		s.c.tx.n = 1
	}
	return s.RawConn.Write(f)
}

// TestICMPRetries: a send that an ICMP error fails (ECONNREFUSED, which
// on an unconnected socket is never local, even with nothing on the error
// queue) is sent again, and counted once in Stats.ICMPErrors, up to
// maxICMPRetries times in a row; one more and WriteBatch returns the
// error. A datagram that goes out starts the count again.
func TestICMPRetries(t *testing.T) {
	max := strings.Repeat("r", maxICMPRetries)
	for _, tc := range []struct {
		name   string
		msgs   int
		script string
		sent   int
		failed bool
		icmp   uint64
	}{
		{"one error", 1, "r", 1, false, 1},
		{"maxICMPRetries errors", 1, max, 1, false, maxICMPRetries},
		{"one error too many", 1, max + "r", 0, true, maxICMPRetries},
		{"the count starts again after a datagram went out", 2, max + "1" + max, 2, false, 2 * maxICMPRetries},
		{"too many after a datagram went out", 2, max + "1" + max + "r", 1, true, 2 * maxICMPRetries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t, lo4, Options{NoGSO: true})
			rx := listen(t, lo4, Options{})
			dead := closedPort(t, lo4)
			refused, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			t.Cleanup(func() { unix.Close(refused) })
			require.NoError(t, unix.Connect(refused, &unix.SockaddrInet4{Port: int(dead.Port()), Addr: dead.Addr().As4()}))
			s := &scriptedWrites{RawConn: c.rc, t: t, c: c, refused: refused, script: tc.script}
			c.rc = s

			msgs := make([]Message, tc.msgs)
			for i := range msgs {
				msgs[i] = Message{Buf: []byte(fmt.Sprint(i)), N: 1, Addr: rx.LocalAddr()}
			}
			n, err := c.WriteBatch(msgs)
			require.Equal(t, tc.sent, n)
			if tc.failed {
				require.ErrorIs(t, err, syscall.ECONNREFUSED)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, len(tc.script)+map[bool]int{false: 1, true: 0}[tc.failed], s.writes, "sendmmsg calls")
			st := c.Stats()
			require.Equal(t, tc.icmp, st.ICMPErrors)
			require.Equal(t, uint64(tc.sent), st.PacketsSent)
			got := readN(t, rx, tc.sent)
			for i, r := range got {
				require.Equal(t, fmt.Sprint(i), string(r.data))
			}
		})
	}
}
