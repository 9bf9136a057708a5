package netdev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorxe/gorxe/internal/testutil"
)

func TestUDPLoopbackBatches(t *testing.T) {
	const count = 300
	for _, fam := range families {
		for _, batch := range []int{1, 7, 64} {
			t.Run(fmt.Sprintf("%s/batch=%d", fam.name, batch), func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				a := listen(t, fam.lo, Options{BatchSize: batch})
				b := listen(t, fam.lo, Options{BatchSize: batch})
				require.Equal(t, batch, a.BatchSize())
				require.Equal(t, fam.lo, a.LocalAddr().Addr())
				require.NotZero(t, a.LocalAddr().Port())
				for _, dir := range []struct {
					name     string
					from, to *UDPConn
				}{{"a->b", a, b}, {"b->a", b, a}} {
					msgs := make([]Message, count)
					wantBytes := 0
					for i := range msgs {
						p := payload(i)
						msgs[i] = Message{Buf: p, N: len(p), Addr: dir.to.LocalAddr()}
						wantBytes += len(p)
					}
					var got []received
					done := make(chan struct{})
					go func() { defer close(done); got = readN(t, dir.to, count) }()
					before := dir.from.Stats()
					n, err := dir.from.WriteBatch(msgs) // longer than the batch: split
					require.NoError(t, err, dir.name)
					require.Equal(t, count, n)
					<-done
					require.Len(t, got, count)
					for i, r := range got {
						require.Equal(t, payload(i), r.data, "%s datagram %d", dir.name, i)
						require.Equal(t, dir.from.LocalAddr(), r.from)
						require.Equal(t, fam.lo, r.local)
						require.LessOrEqual(t, r.batchLength, batch)
					}
					after := dir.from.Stats()
					require.Equal(t, uint64(count), after.PacketsSent-before.PacketsSent)
					require.Equal(t, uint64(wantBytes), after.BytesSent-before.BytesSent)
					require.Zero(t, after.LocalDrops())
				}
				require.Equal(t, uint64(count), a.Stats().PacketsReceived)
				require.Equal(t, uint64(count), b.Stats().PacketsReceived)
				require.Equal(t, a.Stats().BytesSent, b.Stats().BytesReceived)
			})
		}
	}
}

func TestUDPLocalAddress(t *testing.T) {
	tests := []struct {
		name      string
		bind      netip.Addr
		sendTo    netip.Addr // destination; the port is the receiver's
		wantLocal netip.Addr
		needsIPv6 bool
	}{
		{"v4 bound", lo4, lo4, lo4, false},
		{"v4 wildcard to 127.0.0.1", any4, lo4, lo4, false},
		{"v4 wildcard to 127.0.0.3", any4, netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.3"), false},
		{"v6 bound", lo6, lo6, lo6, true},
		{"v6 wildcard", any6, lo6, lo6, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsIPv6 {
				skipNoIPv6(t)
			}
			rx := listen(t, tc.bind, Options{})
			require.Equal(t, tc.bind, rx.LocalAddr().Addr())
			tx := listen(t, tc.sendTo.Unmap(), Options{})
			to := netip.AddrPortFrom(tc.sendTo, rx.LocalAddr().Port())
			n, err := tx.WriteBatch([]Message{{Buf: []byte("hello"), N: 5, Addr: to}})
			require.NoError(t, err)
			require.Equal(t, 1, n)
			got := readN(t, rx, 1)
			require.Equal(t, "hello", string(got[0].data))
			require.Equal(t, tc.wantLocal, got[0].local)
			require.Equal(t, tx.LocalAddr(), got[0].from)
		})
	}
}

func TestUDPSourceAddress(t *testing.T) {
	tests := []struct {
		name      string
		bind, src netip.Addr
		dst       netip.Addr
		needsIPv6 bool
	}{
		{"v4 wildcard from 127.0.0.2", any4, netip.MustParseAddr("127.0.0.2"), lo4, false},
		{"v4 wildcard from 127.0.0.1", any4, lo4, lo4, false},
		{"v4 mapped source", any4, netip.MustParseAddr("::ffff:127.0.0.5"), lo4, false},
		{"v6 wildcard from ::1", any6, lo6, lo6, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsIPv6 {
				skipNoIPv6(t)
			}
			rx := listen(t, tc.dst, Options{})
			tx := listen(t, tc.bind, Options{})
			msgs := []Message{
				{Buf: []byte("one"), N: 3, Addr: rx.LocalAddr(), Local: tc.src},
				{Buf: []byte("two"), N: 3, Addr: rx.LocalAddr()}, // no source: the kernel picks
			}
			n, err := tx.WriteBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			got := readN(t, rx, 2)
			require.Equal(t, netip.AddrPortFrom(tc.src.Unmap(), tx.LocalAddr().Port()), got[0].from)
			require.Equal(t, tc.dst, got[1].from.Addr(), "route source for a loopback destination")
		})
	}
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T, addr netip.Addr) netip.AddrPort {
	c, err := ListenUDP(netip.AddrPortFrom(addr, 0), Options{})
	require.NoError(t, err)
	ap := c.LocalAddr()
	require.NoError(t, c.Close())
	return ap
}

func TestUDPConnRefusedIsNotFatal(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			if fam.needsIPv6 {
				skipNoIPv6(t)
			}
			// One ICMP error per datagram: without GSO (a GSO buffer to a
			// closed port draws one error for all its datagrams).
			a := listen(t, fam.lo, Options{NoGSO: true})
			b := listen(t, fam.lo, Options{NoGSO: true})
			dead := closedPort(t, fam.lo)
			toDead := func(k int) {
				t.Helper()
				msgs := make([]Message, k)
				for i := range msgs {
					msgs[i] = Message{Buf: []byte("nobody"), N: 6, Addr: dead}
				}
				n, err := a.WriteBatch(msgs)
				require.NoError(t, err, "the refused datagrams themselves leave fine (or absorb earlier errors)")
				require.Equal(t, k, n)
				waitSocketError(t, a) // the ICMP errors come back
			}
			ping := []Message{{Buf: []byte("ping"), N: 4}}

			// The write path: the next send fails with the queued
			// ECONNREFUSED, which WriteBatch absorbs and retries.
			toDead(1)
			ping[0].Addr = b.LocalAddr()
			n, err := a.WriteBatch(ping)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, "ping", string(readN(t, b, 1)[0].data))
			require.Positive(t, a.Stats().ICMPErrors)

			// The read path: the queued error surfaces in ReadBatch.
			before := a.Stats().ICMPErrors
			toDead(1)
			ping[0].Addr = a.LocalAddr()
			n, err = b.WriteBatch(ping)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, "ping", string(readN(t, a, 1)[0].data))
			require.Greater(t, a.Stats().ICMPErrors, before)

			// Many errors at once: the error queue is drained, traffic goes on.
			toDead(100)
			msgs := make([]Message, 50)
			for i := range msgs {
				msgs[i] = Message{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr()}
			}
			n, err = a.WriteBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, 50, n)
			require.Len(t, readN(t, b, 50), 50)
			for i := range msgs {
				msgs[i].Addr = a.LocalAddr()
			}
			toDead(20)
			n, err = b.WriteBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, 50, n)
			require.Len(t, readN(t, a, 50), 50)
			t.Logf("ICMP errors absorbed: %d", a.Stats().ICMPErrors)
			require.GreaterOrEqual(t, a.Stats().ICMPErrors, uint64(100))
		})
	}
}

func TestUDPCloseUnblocksRead(t *testing.T) {
	c := listen(t, lo4, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch(newMsgs(4, 100))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let ReadBatch park in the poller
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked after Close")
	}
	require.NoError(t, c.Close(), "second Close")
	_, err := c.ReadBatch(newMsgs(1, 10))
	require.ErrorIs(t, err, net.ErrClosed)
	n, err := c.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: c.LocalAddr()}})
	require.ErrorIs(t, err, net.ErrClosed)
	require.NotErrorIs(t, err, ErrLocalDrop)
	require.Zero(t, n)
}

func TestUDPCloseRacingRead(t *testing.T) {
	for i := range 50 {
		c, err := ListenUDP(netip.AddrPortFrom(lo4, 0), Options{BatchSize: 8})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, err := c.ReadBatch(newMsgs(8, 64))
			require.ErrorIs(t, err, net.ErrClosed)
		}()
		go func() {
			defer wg.Done()
			for {
				_, err := c.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: netip.AddrPortFrom(lo4, 9)}})
				if err != nil {
					require.ErrorIs(t, err, net.ErrClosed)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				runtime.Gosched()
			}
			require.NoError(t, c.Close())
		}()
		wg.Wait()
	}
}

func TestUDPInvalidMessages(t *testing.T) {
	rx := listen(t, lo4, Options{})
	tx := listen(t, lo4, Options{})
	good := Message{Buf: []byte("ok"), N: 2, Addr: rx.LocalAddr()}
	tests := []struct {
		name string
		bad  Message
	}{
		{"N beyond cap", Message{Buf: make([]byte, 4, 8), N: 9, Addr: rx.LocalAddr()}},
		{"negative N", Message{Buf: []byte("x"), N: -1, Addr: rx.LocalAddr()}},
		{"no address", Message{Buf: []byte("x"), N: 1}},
		{"IPv6 destination on IPv4 socket", Message{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort("[::1]:9")}},
		{"IPv6 source on IPv4 socket", Message{Buf: []byte("x"), N: 1, Addr: rx.LocalAddr(), Local: lo6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tx.WriteBatch([]Message{good, tc.bad, good})
			require.ErrorIs(t, err, ErrInvalidMessage)
			require.NotErrorIs(t, err, ErrLocalDrop)
			require.Equal(t, 1, n, "the message before the bad one went out")
			require.Equal(t, "ok", string(readN(t, rx, 1)[0].data))
		})
	}
	// N may go up to cap(Buf), beyond len(Buf).
	n, err := tx.WriteBatch([]Message{{Buf: []byte("abcd")[:1], N: 4, Addr: rx.LocalAddr()}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "abcd", string(readN(t, rx, 1)[0].data))
	// Empty batches.
	n, err = tx.WriteBatch(nil)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = rx.ReadBatch(nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestUDPTruncatedDropped(t *testing.T) {
	rx := listen(t, lo4, Options{NoGRO: true}) // with GRO the Conn's own 64 KiB buffers receive
	tx := listen(t, lo4, Options{})
	big := make([]byte, 200)
	send := []Message{
		{Buf: []byte("small-1"), N: 7, Addr: rx.LocalAddr()},
		{Buf: big, N: len(big), Addr: rx.LocalAddr()},
		{Buf: []byte("small-2"), N: 7, Addr: rx.LocalAddr()},
	}
	n, err := tx.WriteBatch(send)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	var got []string
	msgs := newMsgs(4, 100)
	for len(got) < 2 {
		n, err := rx.ReadBatch(msgs)
		require.NoError(t, err)
		for _, m := range msgs[:n] {
			got = append(got, string(m.Buf[:m.N]))
		}
	}
	require.Equal(t, []string{"small-1", "small-2"}, got)
	require.Equal(t, uint64(1), rx.Stats().Truncated)
	for _, m := range msgs {
		require.Equal(t, 100, cap(m.Buf), "buffers stay within msgs")
	}
}

func TestUDPRecvOverflows(t *testing.T) {
	rx := listen(t, lo4, Options{RecvBuffer: 4096}) // the kernel's minimum
	tx := listen(t, lo4, Options{})
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, 1000), N: 1000, Addr: rx.LocalAddr()}
	}
	_, err := tx.WriteBatch(msgs) // nobody reads: most are dropped at rx
	require.NoError(t, err)
	first := len(readN(t, rx, 1))
	first += settle(t, rx, len(msgs)-first)
	// Each datagram reports the drop count as of when it was queued: the
	// next one tells the drops of the burst.
	_, err = tx.WriteBatch(msgs[:1])
	require.NoError(t, err)
	readN(t, rx, 1)
	s := rx.Stats()
	t.Logf("received %d of 64, overflows %d", first, s.RecvOverflows)
	require.Equal(t, uint64(64-first), s.RecvOverflows)
}

// settle reads without blocking (pending) what reaches c's socket until
// each of sent datagrams sent to it since it was opened, less those read
// before, is read or dropped at the socket (testutil.UDPQueue.Drops), and
// returns how many it read. On loopback the kernel may queue a datagram
// after its send returned, so one pending read can miss some.
func settle(t *testing.T, c *UDPConn, sent int) int {
	t.Helper()
	deadline := time.Now().Add(testutil.Bound())
	read := 0
	for {
		read += pending(t, c)
		q, err := testutil.ReadUDPQueue(c.LocalAddr())
		require.NoError(t, err)
		if read+q.Drops >= sent {
			return read
		}
		require.True(t, time.Now().Before(deadline), "%d read and %d dropped of %d datagrams", read, q.Drops, sent)
		time.Sleep(time.Millisecond)
	}
}

// pending reads without blocking whatever is left on c's socket.
func pending(t *testing.T, c *UDPConn) int {
	n := 0
	buf := make([]byte, 2048)
	require.NoError(t, c.rc.Control(func(fd uintptr) {
		for {
			if _, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT); err != nil {
				return
			}
			n++
		}
	}))
	return n
}

func TestListenUDPErrors(t *testing.T) {
	_, err := ListenUDP(netip.AddrPort{}, Options{})
	require.Error(t, err)
	c := listen(t, lo4, Options{})
	_, err = ListenUDP(c.LocalAddr(), Options{})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	m, err := ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), 0), Options{})
	require.NoError(t, err, "a v4-mapped address gives an IPv4 socket")
	defer m.Close()
	require.True(t, m.LocalAddr().Addr().Is4())
}

func TestUDPBatchSizeLimits(t *testing.T) {
	for _, tc := range []struct{ ask, want int }{{0, DefaultBatchSize}, {-3, DefaultBatchSize}, {1, 1}, {MaxBatchSize, MaxBatchSize}, {MaxBatchSize + 1, MaxBatchSize}, {5000, MaxBatchSize}} {
		require.Equal(t, tc.want, listen(t, lo4, Options{BatchSize: tc.ask}).BatchSize(), "ask %d", tc.ask)
	}
}

// sockoptInt reads an integer socket option of c.
func sockoptInt(t *testing.T, c *UDPConn, level, opt int) int {
	var v int
	var serr error
	require.NoError(t, c.rc.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), level, opt) }))
	require.NoError(t, serr)
	return v
}

func TestUDPSocketOptions(t *testing.T) {
	c4 := listen(t, lo4, Options{TOS: 0xb8})
	require.Equal(t, unix.IP_PMTUDISC_DO, sockoptInt(t, c4, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER))
	require.Equal(t, 1, sockoptInt(t, c4, unix.IPPROTO_IP, unix.IP_RECVERR))
	require.Equal(t, 0xb8, sockoptInt(t, c4, unix.IPPROTO_IP, unix.IP_TOS))
	require.Equal(t, 0, sockoptInt(t, c4, unix.IPPROTO_IP, unix.IP_PKTINFO), "bound: no pktinfo needed")
	require.Equal(t, 1, sockoptInt(t, listen(t, any4, Options{}), unix.IPPROTO_IP, unix.IP_PKTINFO))

	bs := c4.BufferSizes()
	t.Logf("IPv4 socket buffers: %+v (euid %d)", bs, os.Geteuid())
	require.Positive(t, bs.Recv)
	require.Positive(t, bs.Send)
	require.Equal(t, bs.Recv, sockoptInt(t, c4, unix.SOL_SOCKET, unix.SO_RCVBUF))

	skipNoIPv6(t)
	c6 := listen(t, any6, Options{TOS: 0x02})
	require.Equal(t, 1, sockoptInt(t, c6, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY))
	require.Equal(t, unix.IPV6_PMTUDISC_DO, sockoptInt(t, c6, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER))
	require.Equal(t, 1, sockoptInt(t, c6, unix.IPPROTO_IPV6, unix.IPV6_RECVERR))
	require.Equal(t, 1, sockoptInt(t, c6, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO))
	require.Equal(t, 1, sockoptInt(t, c6, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX))
	require.Equal(t, 0x02, sockoptInt(t, c6, unix.IPPROTO_IPV6, unix.IPV6_TCLASS))
}

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN / CAP_NET_RAW); CI runs this as root")
	}
}

func TestUDPBufferSizesForced(t *testing.T) {
	skipUnlessRoot(t)
	tests := []struct {
		name             string
		recv, send       int
		wantRecv, wantSn int // what getsockopt reports: twice the request
		forced           bool
	}{
		{"defaults", 0, 0, 2 * DefaultRecvBuffer, 2 * DefaultSendBuffer, true},
		{"explicit", 8 << 20, 1 << 20, 16 << 20, 2 << 20, true},
		{"beyond rmem_max", 32 << 20, 32 << 20, 64 << 20, 64 << 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t, lo4, Options{RecvBuffer: tc.recv, SendBuffer: tc.send})
			got := c.BufferSizes()
			require.Equal(t, BufferSizes{Recv: tc.wantRecv, Send: tc.wantSn, RecvForced: true, SendForced: true,
				RecvAsked: tc.wantRecv / 2, SendAsked: tc.wantSn / 2}, got)
			require.False(t, got.RecvCapped())
			require.False(t, got.SendCapped())
			require.False(t, c.tx.handOff, "uncapped sockets send with RawSyscall6")
		})
	}
	c := listen(t, lo4, Options{RecvBuffer: -1, SendBuffer: -1})
	require.False(t, c.BufferSizes().RecvForced)
	require.False(t, c.BufferSizes().SendForced)
}

// TestUDPBufferSizesCapped asks, without the FORCE options, for more
// than net.core.rmem_max / wmem_max allow: the kernel caps the request
// and BufferSizes says so, as for a process without CAP_NET_ADMIN.
func TestUDPBufferSizesCapped(t *testing.T) {
	rmax, wmax := procInt(t, "/proc/sys/net/core/rmem_max"), procInt(t, "/proc/sys/net/core/wmem_max")
	c := listen(t, lo4, Options{RecvBuffer: 2*rmax + 4096, SendBuffer: 2*wmax + 4096, NoForce: true})
	got := c.BufferSizes()
	require.False(t, got.RecvForced)
	require.False(t, got.SendForced)
	require.Equal(t, 2*rmax, got.Recv, "capped at rmem_max, reported doubled")
	require.Equal(t, 2*wmax, got.Send)
	require.True(t, got.RecvCapped())
	require.True(t, got.SendCapped())
	require.True(t, c.tx.handOff, "capped sockets send with Syscall6 (mmsg.call)")

	// Just above the cap: the kernel still reports more than was asked
	// (twice the cap), yet less than twice the request.
	near := listen(t, lo4, Options{RecvBuffer: rmax + 4096, SendBuffer: wmax + 4096, NoForce: true})
	require.Equal(t, 2*rmax, near.BufferSizes().Recv)
	require.True(t, near.BufferSizes().RecvCapped())
	require.True(t, near.BufferSizes().SendCapped())

	small := listen(t, lo4, Options{RecvBuffer: 64 << 10, SendBuffer: 64 << 10, NoForce: true})
	require.False(t, small.BufferSizes().RecvCapped(), "a request below the cap is granted")
	require.False(t, small.tx.handOff)

	kept := listen(t, lo4, Options{RecvBuffer: -1, SendBuffer: -1, NoForce: true})
	got = kept.BufferSizes()
	require.Zero(t, got.RecvAsked, "the kernel's default kept: nothing asked")
	require.Zero(t, got.SendAsked)
	require.False(t, got.RecvCapped())
	require.False(t, got.SendCapped())
}

func procInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

// TestIPv4DontFragmentIDZero checks, with a raw socket on loopback, that an
// IPv4 datagram leaves with DF set and IP ID 0: the two IPv4 header fields
// the RoCE ICRC covers that the sender does not otherwise control.
func TestIPv4DontFragmentIDZero(t *testing.T) {
	skipUnlessRoot(t)
	// In a private namespace: a raw UDP socket sees every UDP datagram of
	// its namespace, and other programs' traffic on the host's lo could
	// fill its buffer.
	inNewNetns(t, func(func(args ...string)) {
		raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		require.NoError(t, err)
		defer unix.Close(raw)
		require.NoError(t, unix.SetsockoptTimeval(raw, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}))
		for _, bind := range []netip.Addr{lo4, any4} {
			checkDFIDZero(t, raw, bind)
		}
	})
}

// checkDFIDZero sends three datagrams from a socket bound to bind and checks
// their DF flag and ID as the raw socket raw sees them.
func checkDFIDZero(t *testing.T, raw int, bind netip.Addr) {
	rx := listen(t, lo4, Options{})
	tx := listen(t, bind, Options{})
	msgs := make([]Message, 3)
	for i := range msgs {
		msgs[i] = Message{Buf: []byte("df-id-zero"), N: 10, Addr: rx.LocalAddr()}
	}
	n, err := tx.WriteBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	seen := 0
	buf := make([]byte, 2048)
	for seen < 3 {
		k, err := recvfromRetry(raw, buf)
		require.NoError(t, err, "bound to %v: raw socket saw %d of 3 datagrams", bind, seen)
		ip := buf[:k]
		ihl := int(ip[0]&0x0f) * 4
		if len(ip) < ihl+8 {
			continue
		}
		udp := ip[ihl:]
		if binary.BigEndian.Uint16(udp[0:2]) != tx.LocalAddr().Port() ||
			binary.BigEndian.Uint16(udp[2:4]) != rx.LocalAddr().Port() {
			continue // someone else's datagram
		}
		seen++
		flagsFrag := binary.BigEndian.Uint16(ip[6:8])
		require.Equal(t, uint16(0x4000), flagsFrag, "DF set, MF clear, offset 0")
		require.Zero(t, binary.BigEndian.Uint16(ip[4:6]), "IP ID")
	}
}

// inNewNetns runs f on a goroutine locked to an OS thread that has been
// moved to a new network namespace with lo up; run(args...) runs a command
// in that namespace. The thread is discarded afterwards.
func inNewNetns(t *testing.T, f func(run func(args ...string))) {
	t.Helper()
	for _, tool := range []string{"nsenter", "ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare(CLONE_NEWNET): %v", err)
			return
		}
		ns := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		run := func(args ...string) {
			out, err := exec.Command("nsenter", append([]string{"--net=" + ns}, args...)...).CombinedOutput()
			require.NoError(t, err, "%v: %s", args, out)
		}
		run("ip", "link", "set", "lo", "up")
		f(run)
	}()
	<-done
}

// TestUDPLocalDropsNetns provokes real local drops behind a tbf qdisc on lo,
// in a private network namespace: ENOBUFS when the qdisc is full, and EAGAIN
// when the send buffer is full and writes do not block.
func TestUDPLocalDropsNetns(t *testing.T) {
	skipUnlessRoot(t)
	tests := []struct {
		name     string
		qdisc    string // tbf parameters
		opts     Options
		errno    syscall.Errno
		countsIn func(Stats) uint64
	}{
		{"ENOBUFS from a full qdisc", "rate 10mbit burst 16kb limit 16kb", Options{}, syscall.ENOBUFS,
			func(s Stats) uint64 { return s.NoBufs }},
		{"EAGAIN from a full send buffer", "rate 10mbit burst 16kb limit 100mb", Options{SendBuffer: 64 << 10},
			syscall.EAGAIN, func(s Stats) uint64 { return s.WouldBlock }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inNewNetns(t, func(run func(args ...string)) {
				run(append([]string{"tc", "qdisc", "add", "dev", "lo", "root", "tbf"}, splitFields(tc.qdisc)...)...)
				rx, err := ListenUDP(netip.AddrPortFrom(lo4, 0), Options{})
				require.NoError(t, err)
				defer rx.Close()
				tx, err := ListenUDP(netip.AddrPortFrom(lo4, 0), tc.opts)
				require.NoError(t, err)
				defer tx.Close()
				msgs := make([]Message, 64)
				for i := range msgs {
					msgs[i] = Message{Buf: make([]byte, 1000), N: 1000, Addr: rx.LocalAddr()}
				}
				var dropErr error
				for range 200 {
					n, err := tx.WriteBatch(msgs)
					if err != nil {
						require.GreaterOrEqual(t, n, 0)
						require.Less(t, n, len(msgs))
						dropErr = err
						break
					}
					require.Equal(t, len(msgs), n)
				}
				require.Error(t, dropErr, "no local drop after 200 batches")
				require.ErrorIs(t, dropErr, ErrLocalDrop)
				require.ErrorIs(t, dropErr, tc.errno)
				require.Positive(t, tc.countsIn(tx.Stats()))
				t.Logf("%v; stats %+v", dropErr, tx.Stats())
			})
		})
	}
}

func splitFields(s string) []string {
	var out []string
	for _, f := range bytes.Fields([]byte(s)) {
		out = append(out, string(f))
	}
	return out
}

// TestUDPWriteBatchAllocs: a WriteBatch of 64 datagrams and reading them
// back allocate nothing (TestReadBatchAllocs reads with GRO, a wildcard
// bind and TryReadBatch too).
func TestUDPWriteBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful with -race")
	}
	rx := listen(t, lo4, Options{})
	tx := listen(t, lo4, Options{})
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, 64), N: 64, Addr: rx.LocalAddr()}
	}
	_, err := tx.WriteBatch(msgs) // the first call sizes the socket's buffers
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(50, func() {
		if _, err := tx.WriteBatch(msgs); err != nil {
			t.Fatal(err)
		}
	}), "allocations per WriteBatch of 64")

	rmsgs := newMsgs(64, 128)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := tx.WriteBatch(msgs); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 64; {
			n, err := rx.ReadBatch(rmsgs)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	require.Zero(t, allocs, "allocations per 64-datagram read")
}

func TestUDPErrorsAreNotLocalDrops(t *testing.T) {
	// A datagram over the loopback MTU with PMTUDISC_DO: EMSGSIZE, returned
	// as it is (not absorbed as an ICMP error, not a local drop).
	rx := listen(t, lo4, Options{})
	tx := listen(t, lo4, Options{})
	big := make([]byte, 65507)
	_, err := tx.WriteBatch([]Message{{Buf: big, N: len(big), Addr: rx.LocalAddr()}})
	require.NoError(t, err, "65507 B fits the 65536 B loopback MTU")
	tooBig := make([]byte, 70000)
	n, err := tx.WriteBatch([]Message{{Buf: tooBig, N: len(tooBig), Addr: rx.LocalAddr()}})
	require.Error(t, err)
	require.Zero(t, n)
	require.NotErrorIs(t, err, ErrLocalDrop)
	require.True(t, errors.Is(err, syscall.EMSGSIZE), "%v", err)
	require.Zero(t, tx.Stats().ICMPErrors)
}

// recvfromRetry is a blocking unix.Recvfrom that retries EINTR (the Go
// runtime's preemption signals interrupt blocking system calls).
func recvfromRetry(fd int, buf []byte) (int, error) {
	for {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != unix.EINTR {
			return k, err
		}
	}
}
