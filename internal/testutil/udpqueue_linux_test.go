package testutil

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestProcAddr: local addresses as /proc/net/udp and udp6 print them on a
// little-endian host (each 32-bit word of the address as the host stores
// it, the port in hexadecimal).
func TestProcAddr(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the golden forms are a little-endian host's")
	}
	for _, tc := range []struct{ a, want string }{
		{"127.0.0.1:4791", "0100007F:12B7"},
		{"0.0.0.0:1", "00000000:0001"},
		{"[::1]:65535", "00000000000000000000000001000000:FFFF"},
		{"[fe80::1:2]:4791", "000080FE000000000000000002000100:12B7"},
	} {
		require.Equal(t, tc.want, procAddr(netip.MustParseAddrPort(tc.a)), tc.a)
	}
}

// TestSendQueued: after SendQueued every datagram is queued (a
// non-blocking read takes each) though each reached the socket some time
// after its send function returned, the queue's bytes rose, and ReadUDPQueue
// finds no socket on a port nothing binds.
func TestSendQueued(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			lo := map[string]string{"udp4": "127.0.0.1:0", "udp6": "[::1]:0"}[network]
			rx, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(lo)))
			if err != nil && network == "udp6" {
				t.Skipf("IPv6 loopback unavailable: %v", err)
			}
			require.NoError(t, err)
			defer rx.Close()
			tx, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(lo)))
			require.NoError(t, err)
			defer tx.Close()
			to := rx.LocalAddr().(*net.UDPAddr).AddrPort()

			q, err := ReadUDPQueue(to)
			require.NoError(t, err)
			require.Zero(t, q.Bytes)
			sent := make(chan error, 3)
			SendQueued(t, to, 3, func(i int) {
				// The send lands after SendQueued's call returned, as a
				// deferred delivery does.
				time.AfterFunc(20*time.Millisecond, func() {
					_, err := tx.WriteToUDPAddrPort([]byte{byte(i)}, to)
					sent <- err
				})
			})
			for range 3 {
				require.NoError(t, <-sent)
			}
			q, err = ReadUDPQueue(to)
			require.NoError(t, err)
			require.Positive(t, q.Bytes)
			rc, err := rx.SyscallConn()
			require.NoError(t, err)
			buf := make([]byte, 8)
			for i := range 3 {
				var n int
				var rerr error
				require.NoError(t, rc.Control(func(fd uintptr) {
					n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
				}))
				require.NoError(t, rerr, "datagram %d", i)
				require.Equal(t, []byte{byte(i)}, buf[:n])
			}

			_, err = ReadUDPQueue(netip.AddrPortFrom(to.Addr(), 0))
			require.ErrorContains(t, err, "no UDP socket bound to")
		})
	}
}

// TestReadUDPQueueDrops: the drops of a socket whose receive buffer a
// burst overflows show in Drops.
func TestReadUDPQueueDrops(t *testing.T) {
	tx, to := tinyReceiver(t)
	for range 64 {
		_, err := tx.WriteToUDPAddrPort(make([]byte, 1000), to)
		require.NoError(t, err)
	}
	deadline := time.Now().Add(Bound())
	for {
		q, err := ReadUDPQueue(to)
		require.NoError(t, err)
		if q.Drops > 0 {
			require.Less(t, q.Drops, 64, "the first datagram fits")
			return
		}
		require.True(t, time.Now().Before(deadline), "no drop counted")
		time.Sleep(time.Millisecond)
	}
}

// tinyReceiver opens a loopback UDP socket whose receive buffer is the
// kernel's minimum and a socket to send to it from; both close when the
// test ends. It returns the sender and the receiver's address.
func tinyReceiver(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	require.NoError(t, rx.SetReadBuffer(1))
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return tx, rx.LocalAddr().(*net.UDPAddr).AddrPort()
}

// fatalTB records the first Fatal or Fatalf of a helper run in a goroutine
// of its own and ends that goroutine, as testing.T's FailNow does.
type fatalTB struct {
	testing.TB
	msg chan string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg <- fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestSendQueuedDropped: a datagram that the socket drops (its receive
// buffer, at the kernel's minimum, is full) fails SendQueued at once with
// a message that says so and gives the socket's drops, not after Bound()
// as if the datagram were still on its way.
func TestSendQueuedDropped(t *testing.T) {
	tx, to := tinyReceiver(t)

	const n = 64
	tb := &fatalTB{TB: t, msg: make(chan string, 1)}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		SendQueued(tb, to, n, func(int) {
			_, err := tx.WriteToUDPAddrPort(make([]byte, 1000), to)
			if err != nil {
				tb.Fatal(err)
			}
		})
	}()
	bound := Bound()
	select {
	case msg := <-tb.msg:
		require.Regexp(t, `^datagram \d+ of 64 dropped at 127\.0\.0\.1:\d+ \(its drops rose from 0 to 1\)`, msg)
	case <-returned:
		t.Fatalf("all %d datagrams of 1000 bytes were queued in the smallest receive buffer", n)
	case <-time.After(bound):
		t.Fatalf("SendQueued went on for %v", bound)
	}
	<-returned
}

// reusePortPair opens two loopback UDP sockets bound to one port with
// SO_REUSEPORT, closed when the test ends, and returns them and their
// address.
func reusePortPair(t *testing.T) (a, b *net.UDPConn, addr netip.AddrPort) {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	pa, err := lc.ListenPacket(t.Context(), "udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pa.Close() })
	addr = pa.LocalAddr().(*net.UDPAddr).AddrPort()
	pb, err := lc.ListenPacket(t.Context(), "udp4", addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { pb.Close() })
	return pa.(*net.UDPConn), pb.(*net.UDPConn), addr
}

// TestReadUDPQueueShared: two sockets share a port (SO_REUSEPORT), so
// their address alone does not tell which one's queue it is:
// ReadUDPQueue refuses it, naming the sockets it found, rather than
// giving the queue of whichever /proc lists first. ReadUDPQueueOf tells
// them apart by inode: a datagram sent to the port (the kernel's hash of
// its addresses picks one socket) shows in the queue of the socket that
// a non-blocking read then takes it from, and not in the other's. A
// socket that is not UDP has no queue there.
func TestReadUDPQueueShared(t *testing.T) {
	a, b, addr := reusePortPair(t)
	_, err := ReadUDPQueue(addr)
	require.ErrorContains(t, err, "2 UDP sockets bound to "+addr.String())

	rcs := make([]syscall.RawConn, 2)
	for i, c := range []*net.UDPConn{a, b} {
		rcs[i], err = c.SyscallConn()
		require.NoError(t, err)
		q, err := ReadUDPQueueOf(rcs[i])
		require.NoError(t, err, "socket %d", i)
		require.Zero(t, q, "socket %d", i)
	}
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer tx.Close()
	_, err = tx.WriteToUDPAddrPort([]byte("x"), addr)
	require.NoError(t, err)
	var qs [2]UDPQueue
	deadline := time.Now().Add(Bound())
	for qs[0].Bytes+qs[1].Bytes == 0 {
		require.True(t, time.Now().Before(deadline), "the datagram was not queued at either socket")
		time.Sleep(100 * time.Microsecond)
		for i, rc := range rcs {
			qs[i], err = ReadUDPQueueOf(rc)
			require.NoError(t, err, "socket %d", i)
		}
	}
	for i, rc := range rcs {
		var rerr error
		require.NoError(t, rc.Control(func(fd uintptr) {
			_, _, rerr = syscall.Recvfrom(int(fd), make([]byte, 8), syscall.MSG_DONTWAIT)
		}))
		if qs[i].Bytes > 0 {
			require.NoError(t, rerr, "socket %d: its queue held the datagram", i)
			q, err := ReadUDPQueueOf(rc)
			require.NoError(t, err)
			require.Zero(t, q.Bytes, "socket %d: read", i)
		} else {
			require.ErrorIs(t, rerr, syscall.EAGAIN, "socket %d: its queue was empty", i)
		}
	}

	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer l.Close()
	rc, err := l.SyscallConn()
	require.NoError(t, err)
	_, err = ReadUDPQueueOf(rc)
	require.ErrorContains(t, err, "no UDP socket of inode")
}

// TestReadUDPQueueListingSkips: a reading of /proc/net/udp that misses a
// socket (the kernel skips a line when a socket ahead of it closes
// between two read(2) calls; listingReads) is read again, so neither
// ReadUDPQueue nor ReadUDPQueueOf reports a socket it holds as missing,
// and a socket listed twice counts once. A socket that is really gone
// from every reading is still reported missing.
func TestReadUDPQueueListingSkips(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer c.Close()
	addr := c.LocalAddr().(*net.UDPAddr).AddrPort()
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	want := procAddr(addr)

	for _, tc := range []struct {
		name  string
		skips int // readings that miss the socket
		dup   bool
		ok    bool
	}{
		{"first reading misses it", 1, false, true},
		{"all but the last miss it", listingReads - 1, false, true},
		{"listed twice", 0, true, true},
		{"every reading misses it", listingReads, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			readSockets = func(file string) ([]udpSocket, error) {
				socks, err := readUDPSockets(file)
				if file == "/proc/thread-self/net/udp" {
					reads++ // one a look-up's attempt: the socket is IPv4
				}
				var out []udpSocket
				for _, s := range socks {
					if s.local == want {
						if reads <= tc.skips {
							continue
						}
						if tc.dup {
							out = append(out, s)
						}
					}
					out = append(out, s)
				}
				return out, err
			}
			defer func() { readSockets = readUDPSockets }()
			q, err := ReadUDPQueueOf(rc)
			if !tc.ok {
				require.ErrorContains(t, err, fmt.Sprintf("(%d reads)", listingReads))
				return
			}
			require.NoError(t, err)
			require.Zero(t, q)
			if tc.dup {
				// A listing with the line twice is what readUDPSockets
				// is given by the kernel, not what it returns: check
				// it drops the second with a file of its own.
				dir := t.TempDir()
				f := dir + "/udp"
				line := fmt.Sprintf("  1: %s 00000000:0000 07 00000000:00000040 00:00000000 00000000     0        0 4242 2 0000000000000000 3\n", want)
				require.NoError(t, os.WriteFile(f, []byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"+line+line), 0o600))
				socks, err := readUDPSockets(f)
				require.NoError(t, err)
				require.Len(t, socks, 1)
				require.Equal(t, UDPQueue{Bytes: 0x40, Drops: 3}, socks[0].queue)
				return
			}
			reads = 0
			q, err = ReadUDPQueue(addr)
			require.NoError(t, err)
			require.Zero(t, q)
		})
	}
}
