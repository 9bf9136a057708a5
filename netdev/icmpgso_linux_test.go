package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// injectICMP4 sends, through a raw socket, an ICMP destination-unreachable
// error of the given code about a UDP datagram from -> to, as a router or
// the peer host would: the kernel sets sk_err of the socket bound to from
// (__udp4_lib_err) and queues the error (IP_RECVERR). It returns once
// the error is pending on tx, the socket bound to from.
func injectICMP4(t *testing.T, code uint8, tx *UDPConn, to netip.AddrPort) {
	t.Helper()
	from := tx.LocalAddr()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		t.Skipf("raw ICMP socket: %v", err)
	}
	defer unix.Close(fd)
	msg := make([]byte, 8+20+8)
	msg[0], msg[1] = 3, code // destination unreachable
	ip := msg[8:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 20+8+100)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 17
	s, d := from.Addr().As4(), to.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], from.Port())
	binary.BigEndian.PutUint16(udp[2:], to.Port())
	binary.BigEndian.PutUint16(udp[4:], 8+100)
	binary.BigEndian.PutUint16(msg[2:], ipChecksum(msg))
	require.NoError(t, unix.Sendto(fd, msg, 0, &unix.SockaddrInet4{Addr: to.Addr().As4()}))
	waitSocketError(t, tx)
}

func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}

// TestICMPErrorKeepsGSO: an ICMP protocol-unreachable (errno
// ENOPROTOOPT) or source-route-failed (EOPNOTSUPP) error queued on the
// socket fails the next send with that errno. When the next send is a GSO
// run, gsoRefusal takes it for the kernel refusing GSO: GSO goes off for
// the life of the UDPConn and the ICMP error is neither drained nor
// counted, although the kernel never refuses GSO with these errnos
// (udp_send_skb: EINVAL, EIO, EMSGSIZE).
func TestICMPErrorKeepsGSO(t *testing.T) {
	for _, tc := range []struct {
		name string
		code uint8
	}{{"port unreachable (control)", 3}, {"protocol unreachable", 2}, {"source route failed", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			rx := listen(t, lo4, Options{})
			tx := listen(t, lo4, Options{RewriteIPv4ID: keepID})
			if !tx.gso.Load() {
				t.Skip("no UDP_SEGMENT")
			}
			run := gsoRun(rx.LocalAddr(), 8, 1000)
			n, err := tx.WriteBatch(run)
			require.NoError(t, err)
			require.Equal(t, len(run), n)
			readN(t, rx, len(run))
			require.Equal(t, uint64(1), tx.Stats().GSOBuffers)

			injectICMP4(t, tc.code, tx, rx.LocalAddr())

			n, err = tx.WriteBatch(run)
			require.NoError(t, err)
			require.Equal(t, len(run), n)
			readN(t, rx, len(run))
			st := tx.Stats()
			t.Logf("stats after the ICMP error: %+v", st)
			require.Positive(t, st.ICMPErrors, "the ICMP error is absorbed and counted")
			require.Zero(t, st.GSOFallbacks, "an ICMP error is not a GSO refusal")
			require.True(t, tx.gso.Load(), "GSO stays on")
		})
	}
}

// TestICMPErrorKeepsPagedSends: the same for a single datagram sent
// paged to loopback: a paged send the kernel refuses turns paged sends
// off for good (UDPConn.refuse).
func TestICMPErrorKeepsPagedSends(t *testing.T) {
	rx := listen(t, lo4, Options{})
	tx := listen(t, lo4, Options{NoGSO: true})
	if !tx.PagesTo(rx.LocalAddr().Addr()) {
		t.Skip("no paged sends")
	}
	one := gsoRun(rx.LocalAddr(), 1, 1000)
	injectICMP4(t, 2, tx, rx.LocalAddr())
	n, err := tx.WriteBatch(one)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	readN(t, rx, 1)
	st := tx.Stats()
	t.Logf("stats after the ICMP error: %+v", st)
	require.Positive(t, st.ICMPErrors, "the ICMP error is absorbed and counted")
	require.True(t, tx.PagesTo(rx.LocalAddr().Addr()), "paged sends stay on")
}
