package netdev

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorxe/gorxe/internal/testutil"
)

// rmemAlloc returns the receive memory charged to c's socket
// (SO_MEMINFO's SK_MEMINFO_RMEM_ALLOC).
func rmemAlloc(t *testing.T, c *UDPConn) int {
	t.Helper()
	var info [16]uint32 // more than the kernel's SK_MEMINFO_VARS
	n := uint32(unsafe.Sizeof(info))
	var errno unix.Errno
	require.NoError(t, c.rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
	}))
	if errno != 0 {
		t.Skipf("SO_MEMINFO: %v", errno)
	}
	return int(info[0])
}

// TestPagedSends: single datagrams a UDPConn sends to a loopback address
// (with GSO on or off) are charged to the receiving socket at most
// PagedTruesize each, while the same datagrams from a plain socket are
// charged more (a power-of-two linear buffer: 8 KiB + 256 for 4 KiB), so
// the bound rxe sizes its window by is the kernel's, and paging is what
// makes it hold. To a non-loopback address nothing is paged.
func TestPagedSends(t *testing.T) {
	const size, count = 4096 + 28, 20 // a 4 KiB RoCE packet's UDP payload
	for _, fam := range families {
		for _, noGSO := range []bool{false, true} {
			t.Run(fam.name+map[bool]string{false: "/gso", true: "/nogso"}[noGSO], func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				tx := listen(t, fam.lo, Options{NoGSO: noGSO, BlockingWrite: true})
				if !tx.paged.Load() {
					t.Skip("the kernel does not take UDP_SEGMENT")
				}
				require.True(t, tx.PagesTo(fam.lo))
				require.False(t, tx.PagesTo(netip.MustParseAddr("192.0.2.1")))
				require.False(t, tx.PagesTo(netip.MustParseAddr("2001:db8::1")))
				rx := listen(t, fam.lo, Options{RecvBuffer: 1 << 20, NoForce: true})
				msgs := newMsgs(1, size)
				msgs[0].N, msgs[0].Addr = size, rx.LocalAddr()
				testutil.SendQueued(t, rx.LocalAddr(), count, func(int) {
					n, err := tx.WriteBatch(msgs) // one datagram per call: never a GSO run
					require.NoError(t, err)
					require.Equal(t, 1, n)
				})
				paged := rmemAlloc(t, rx)
				require.GreaterOrEqual(t, paged, count*size, "the datagrams arrived")
				require.LessOrEqual(t, paged, count*PagedTruesize(size), "charged per paged datagram: %d", paged/count)

				// The control: a plain socket's datagrams are charged more.
				rx2 := listen(t, fam.lo, Options{RecvBuffer: 1 << 20, NoForce: true})
				pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(fam.lo, 0)))
				require.NoError(t, err)
				defer pc.Close()
				testutil.SendQueued(t, rx2.LocalAddr(), count, func(int) {
					_, err := pc.WriteToUDPAddrPort(make([]byte, size), rx2.LocalAddr())
					require.NoError(t, err)
				})
				require.Greater(t, rmemAlloc(t, rx2), count*PagedTruesize(size), "a linear datagram costs more")
			})
		}
	}
}

// TestGSORunCharge: a run of equal-size datagrams that a UDPConn sends to
// a loopback address with GSO reaches a socket with UDP_GRO as one buffer,
// charged at most RunTruesize per datagram for the run's length: runs of
// two (a 4 KiB RoCE packet with a RETH, then a shorter one, as two-packet
// WRITEs go out) and of fifteen (a GSO buffer's worth). A socket without
// UDP_GRO gets the run segmented, one buffer per datagram, and is charged
// more: rxe's window assumes runs (RunTruesize) only toward a receiver
// with GRO.
func TestGSORunCharge(t *testing.T) {
	const long, short = 4096 + 28 + 16, 4096 + 28 // UDP payloads of a RoCE WRITE FIRST and LAST
	for _, fam := range families {
		for _, run := range []int{2, 15} {
			t.Run(fmt.Sprintf("%s/run=%d", fam.name, run), func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				tx := listen(t, fam.lo, Options{BlockingWrite: true, RewriteIPv4ID: (&idRecorder{}).rewrite})
				if !tx.RunsTo(fam.lo) {
					t.Skip("the kernel does not take UDP_SEGMENT")
				}
				require.False(t, tx.RunsTo(netip.MustParseAddr("192.0.2.1")), "runs are charged whole only on this host")
				const runs = 8
				send := func(rx *UDPConn) (datagrams, bytes int) {
					msgs := newMsgs(run, long)
					for i := range msgs {
						msgs[i].N, msgs[i].Addr = long, rx.LocalAddr()
					}
					if run == 2 {
						msgs[1].N = short
					}
					// A receiver with UDP_GRO queues a run as one buffer,
					// one without as run buffers: the wait is for the first.
					testutil.SendQueued(t, rx.LocalAddr(), runs, func(int) {
						n, err := tx.WriteBatch(msgs)
						require.NoError(t, err)
						require.Equal(t, run, n)
					})
					for _, m := range msgs {
						bytes += m.N
					}
					return runs * run, runs * bytes
				}
				rx := listen(t, fam.lo, Options{RecvBuffer: 1 << 20, NoForce: true})
				if !rx.GRO() {
					t.Skip("the kernel does not take UDP_GRO")
				}
				gso0 := tx.Stats().GSOBuffers
				count, bytes := send(rx)
				require.Equal(t, uint64(runs), tx.Stats().GSOBuffers-gso0, "one GSO buffer per run")
				charged := rmemAlloc(t, rx)
				require.GreaterOrEqual(t, charged, bytes, "the runs arrived")
				require.LessOrEqual(t, charged, count*RunTruesize(long, run), "charged per datagram: %d", charged/count)

				// The control: without UDP_GRO the run is segmented on
				// arrival and each datagram charged alone.
				rx2 := listen(t, fam.lo, Options{RecvBuffer: 1 << 20, NoForce: true, NoGRO: true})
				require.False(t, rx2.GRO())
				count, bytes = send(rx2)
				// The last datagrams of a run may be queued after the
				// wait: rx2's charge only grows while nobody reads.
				require.Eventually(t, func() bool { return rmemAlloc(t, rx2) > charged },
					testutil.Bound(), time.Millisecond, "segmented datagrams cost more")
				t.Logf("charged per datagram: %d with GRO, %d without (payload %d)", charged/count, rmemAlloc(t, rx2)/count, bytes/count)
			})
		}
	}
}

// TestPagesToOwnAddress: a datagram to the socket's own bound address
// stays in this host (the kernel routes it over the loopback device), so
// it goes out paged as to a loopback address, whether the address is
// given plain or v4-mapped; an address of another host does not.
func TestPagesToOwnAddress(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	var own netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			own = p.Addr()
			break
		}
	}
	if !own.IsValid() {
		t.Skip("no non-loopback IPv4 address on this host")
	}
	c := listen(t, own, Options{})
	if !c.paged.Load() {
		t.Skip("no UDP_SEGMENT")
	}
	require.True(t, c.PagesTo(own))
	require.True(t, c.PagesTo(netip.AddrFrom16(own.As16())), "v4-mapped")
	require.True(t, c.PagesTo(lo4))
	other := netip.MustParseAddr("198.51.100.7")
	if other == own {
		other = netip.MustParseAddr("198.51.100.8")
	}
	require.False(t, c.PagesTo(other))
	require.False(t, c.PagesTo(netip.IPv4Unspecified()))

	w := listen(t, any4, Options{})
	require.False(t, w.PagesTo(netip.IPv4Unspecified()))
}
