package netdev

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorxe/gorxe/internal/cmsgtest"
)

// tosReader reads datagrams with their IP traffic class from a plain UDP
// socket bound to lo (IP_RECVTOS, IPV6_RECVTCLASS), each read bounded by
// a deadline.
type tosReader struct {
	c  *net.UDPConn
	v6 bool
}

func newTOSReader(t *testing.T, lo netip.Addr) *tosReader {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	r := &tosReader{c: c, v6: lo.Is6()}
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		if r.v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		}
	}))
	require.NoError(t, serr)
	return r
}

func (r *tosReader) addr() netip.AddrPort { return r.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// read returns the next datagram's length and traffic class.
func (r *tosReader) read(t *testing.T) (int, uint8) {
	t.Helper()
	require.NoError(t, r.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf, oob := make([]byte, 65536), make([]byte, 128)
	n, oobn, _, _, err := r.c.ReadMsgUDPAddrPort(buf, oob)
	require.NoError(t, err, "no datagram within 10 s")
	tc, ok, err := cmsgtest.TrafficClass(oob[:oobn], r.v6)
	require.NoError(t, err)
	require.True(t, ok, "no traffic class among the control messages")
	return n, tc
}

// TestMessageTOS: a Message's TOS is its datagram's traffic class, 0
// leaving the socket's (Options.TOS), alone and in a GSO run (whose
// segments all carry it), with and without a source address control
// message beside it; and messages of two classes are not sent as one GSO
// buffer.
func TestMessageTOS(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			if fam.needsIPv6 {
				skipNoIPv6(t)
			}
			for _, bind := range []netip.Addr{fam.lo, fam.any} {
				c := listen(t, bind, Options{TOS: 0x10, BlockingWrite: true})
				r := newTOSReader(t, fam.lo)
				msg := func(n int, tos uint8) Message {
					m := Message{Buf: make([]byte, n), N: n, Addr: r.addr(), TOS: tos}
					if bind.IsUnspecified() {
						m.Local = fam.lo // an IP_PKTINFO / IPV6_PKTINFO beside the class
					}
					return m
				}
				// Four equal datagrams of one class (a GSO run where the
				// kernel offers it), then one of another, then one that
				// leaves the socket's class.
				msgs := []Message{msg(1000, 0x28), msg(1000, 0x28), msg(1000, 0x28), msg(1000, 0x28), msg(1000, 0xb8), msg(700, 0)}
				n, err := c.WriteBatch(msgs)
				require.NoError(t, err)
				require.Equal(t, len(msgs), n)
				want := []uint8{0x28, 0x28, 0x28, 0x28, 0xb8, 0x10}
				for i, w := range want {
					size, got := r.read(t)
					require.Equal(t, msgs[i].N, size, "datagram %d", i)
					require.Equal(t, w, got, "datagram %d's traffic class (bound to %v)", i, bind)
				}
			}
		})
	}
}

// TestRunLengthTOS: a GSO run ends where the traffic class changes.
func TestRunLengthTOS(t *testing.T) {
	c := listen(t, lo4, Options{})
	to := netip.AddrPortFrom(lo4, 9)
	ms := make([]Message, 4)
	for i := range ms {
		ms[i] = Message{Buf: make([]byte, 100), N: 100, Addr: to, TOS: 0x28}
	}
	require.Equal(t, 4, c.runLength(ms, 64))
	ms[2].TOS = 0
	require.Equal(t, 2, c.runLength(ms, 64))
	ms[0].TOS, ms[1].TOS = 0, 0
	require.Equal(t, 3, c.runLength(ms, 64), "0 is a class too: the socket's")
}
