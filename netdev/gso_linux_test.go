package netdev

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gorxe/gorxe/internal/netns"
)

// idRecorder is an Options.RewriteIPv4ID that records its calls and stamps
// the target ID into the datagram's last two bytes, so the receiver can see
// which ID each datagram was rewritten for.
type idRecorder struct {
	mu    sync.Mutex
	calls [][2]uint16
}

func (r *idRecorder) rewrite(d []byte, from, to uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, [2]uint16{from, to})
	binary.BigEndian.PutUint16(d[len(d)-2:], to)
}

// gsoBatch is 20 datagrams of 1000 bytes to a, a shorter one that ends the
// run, then 5 of 300 bytes to b: three GSO sends' worth.
func gsoBatch(a, b netip.AddrPort) []Message {
	var ms []Message
	add := func(n, size int, to netip.AddrPort) {
		for range n {
			i := len(ms)
			buf := make([]byte, size)
			binary.BigEndian.PutUint32(buf, uint32(i))
			ms = append(ms, Message{Buf: buf, N: size, Addr: to})
		}
	}
	add(20, 1000, a)
	add(1, 500, a)
	add(5, 300, b)
	return ms
}

// TestGSOGRO sends runs that GSO coalesces and checks that every datagram
// arrives whole and in order, split out of GRO buffers, that IPv4 runs are
// coalesced only with RewriteIPv4ID, and that it is called for segment k
// with (0, k) and never for the first segment.
func TestGSOGRO(t *testing.T) {
	for _, fam := range families {
		for _, hook := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/rewrite=%v", fam.name, hook), func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				rec := &idRecorder{}
				opts := Options{}
				if hook {
					opts.RewriteIPv4ID = rec.rewrite
				}
				tx := listen(t, fam.lo, opts)
				ra := listen(t, fam.lo, Options{})
				rb := listen(t, fam.lo, Options{})
				ms := gsoBatch(ra.LocalAddr(), rb.LocalAddr())
				n, err := tx.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, len(ms), n)
				coalesce := fam.needsIPv6 || hook
				if coalesce {
					require.Equal(t, uint64(2), tx.Stats().GSOBuffers, "21 to a, 5 to b")
				} else {
					require.Zero(t, tx.Stats().GSOBuffers, "IPv4 without RewriteIPv4ID")
				}
				got := append(readN(t, ra, 21), readN(t, rb, 5)...)
				for i, r := range got {
					require.Len(t, r.data, ms[i].N)
					require.Equal(t, uint32(i), binary.BigEndian.Uint32(r.data), "datagram %d", i)
				}
				if coalesce {
					require.Equal(t, uint64(1), ra.Stats().GROBuffers)
					require.Equal(t, uint64(1), rb.Stats().GROBuffers)
				}
				if hook && !fam.needsIPv6 {
					var want [][2]uint16
					for k := 1; k < 21; k++ {
						want = append(want, [2]uint16{0, uint16(k)})
					}
					for k := 1; k < 5; k++ {
						want = append(want, [2]uint16{0, uint16(k)})
					}
					require.Equal(t, want, rec.calls)
					for i, r := range got {
						k := i
						if i >= 21 {
							k = i - 21
						}
						require.Equal(t, uint16(k), binary.BigEndian.Uint16(r.data[len(r.data)-2:]), "datagram %d", i)
					}
				} else {
					require.Empty(t, rec.calls)
				}
			})
		}
	}
}

// TestGSOOff checks that NoGSO and NoGRO send and receive one datagram per
// buffer.
func TestGSOOff(t *testing.T) {
	rec := &idRecorder{}
	tx := listen(t, lo4, Options{NoGSO: true, RewriteIPv4ID: rec.rewrite})
	rx := listen(t, lo4, Options{NoGRO: true})
	ms := gsoBatch(rx.LocalAddr(), rx.LocalAddr())
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	require.Len(t, readN(t, rx, len(ms)), len(ms))
	require.Zero(t, tx.Stats().GSOBuffers)
	require.Zero(t, rx.Stats().GROBuffers)
	require.Empty(t, rec.calls)
}

// TestGROSmallReads reads a GRO buffer of 20 datagrams one at a time: the
// rest wait in the Conn between calls.
func TestGROSmallReads(t *testing.T) {
	tx := listen(t, lo6, Options{})
	rx := listen(t, lo6, Options{})
	ms := gsoBatch(rx.LocalAddr(), rx.LocalAddr())[:20]
	_, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	one := newMsgs(1, 10)
	for i := range 20 {
		n, err := rx.ReadBatch(one)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1000, one[0].N)
		require.Equal(t, uint32(i), binary.BigEndian.Uint32(one[0].Buf))
	}
}

// capture is an AF_PACKET socket on one interface that returns the IPv4
// UDP datagrams between two ports, as sent (PACKET_OUTGOING).
type capture struct{ fd int }

func newCapture(t *testing.T, ifname string) *capture {
	ifi, err := netInterfaceIndex(ifname)
	require.NoError(t, err)
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi}))
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}))
	return &capture{fd: fd}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// netInterfaceIndex looks the interface up in the calling thread's network
// namespace (through netlink; /sys shows the namespace it was mounted in).
func netInterfaceIndex(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// ipDatagram is one captured IPv4 UDP datagram's ID, flags and UDP payload
// length.
type ipDatagram struct {
	id, flags uint16
	udpLen    int
}

// next returns the next outgoing IPv4 UDP datagram from port sport to
// dport.
func (c *capture) next(t *testing.T, sport, dport uint16) ipDatagram {
	buf := make([]byte, 70000)
	for {
		var k int
		var from unix.Sockaddr
		var err error
		for {
			k, from, err = unix.Recvfrom(c.fd, buf, 0)
			if err != unix.EINTR {
				break
			}
		}
		require.NoError(t, err, "capture")
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Pkttype != unix.PACKET_OUTGOING || k < 14+20+8 {
			continue
		}
		eth := buf[:k]
		if binary.BigEndian.Uint16(eth[12:14]) != unix.ETH_P_IP {
			continue
		}
		ip := eth[14:]
		ihl := int(ip[0]&0x0f) * 4
		if ip[9] != unix.IPPROTO_UDP || len(ip) < ihl+8 {
			continue
		}
		udp := ip[ihl:]
		if binary.BigEndian.Uint16(udp[0:2]) != sport || binary.BigEndian.Uint16(udp[2:4]) != dport {
			continue
		}
		return ipDatagram{
			id:     binary.BigEndian.Uint16(ip[4:6]),
			flags:  binary.BigEndian.Uint16(ip[6:8]),
			udpLen: int(binary.BigEndian.Uint16(udp[4:6])) - 8,
		}
	}
}

// TestGSOSegmentIDs establishes which IPv4 ID the kernel gives each
// datagram of a GSO send from an unconnected IP_PMTUDISC_DO socket (the
// ICRC covers it), where the packets are captured:
//   - on a veth with tx-udp-segmentation off (a NIC without UDP
//     segmentation offload), the kernel segments before the capture point:
//     segment k carries ID k, all with DF;
//   - on lo (which has the feature) the capture holds the unsegmented buffer,
//     ID 0, with the whole run as its payload.
func TestGSOSegmentIDs(t *testing.T) {
	if err := netns.Check("ethtool"); err != nil {
		t.Skip(err)
	}
	p, err := netns.NewPair(fmt.Sprintf("gorxe-gsoid-%d", os.Getpid()), 201)
	require.NoError(t, err)
	defer p.Close()
	_, err = netns.Command("ip", "netns", "exec", p.A, "ethtool", "-K", p.IfA, "tx-udp-segmentation", "off")
	require.NoError(t, err)

	const segs, size = 12, 1000
	tests := []struct {
		name     string
		dev      string
		to       func(rx *UDPConn) netip.AddrPort
		src      netip.Addr
		want     func(k int) ipDatagram
		captured int
	}{
		{"veth", p.IfA, nil, p.AddrA,
			func(k int) ipDatagram { return ipDatagram{id: uint16(k), flags: 0x4000, udpLen: size} }, segs},
		{"lo", "lo", nil, lo4,
			func(int) ipDatagram { return ipDatagram{id: 0, flags: 0x4000, udpLen: segs * size} }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &idRecorder{}
			var tx, rx *UDPConn
			var cap *capture
			require.NoError(t, netns.In(p.A, func() error {
				var err error
				cap = newCapture(t, tc.dev)
				tx, err = ListenUDP(netip.AddrPortFrom(tc.src, 0), Options{RewriteIPv4ID: rec.rewrite})
				return err
			}))
			defer tx.Close()
			rxNS, rxAddr := p.B, p.AddrB
			if tc.dev == "lo" {
				rxNS, rxAddr = p.A, lo4
			}
			require.NoError(t, netns.In(rxNS, func() error {
				var err error
				rx, err = ListenUDP(netip.AddrPortFrom(rxAddr, 0), Options{})
				return err
			}))
			defer rx.Close()
			ms := make([]Message, segs)
			for i := range ms {
				ms[i] = Message{Buf: make([]byte, size), N: size, Addr: rx.LocalAddr()}
			}
			n, err := tx.WriteBatch(ms)
			require.NoError(t, err)
			require.Equal(t, segs, n)
			require.Equal(t, uint64(1), tx.Stats().GSOBuffers)
			for k := range tc.captured {
				got := cap.next(t, tx.LocalAddr().Port(), rx.LocalAddr().Port())
				require.Equal(t, tc.want(k), got, "datagram %d", k)
			}
			require.Len(t, readN(t, rx, segs), segs)
		})
	}
}

// TestGSOFallback makes the kernel refuse GSO sends (udp_send_skb returns
// EINVAL for a socket with SO_NO_CHECK, as it returns EIO on a device
// without checksum offload): the UDPConn turns GSO off and every datagram
// still arrives, each with its ID rewrite undone by RewriteIPv4ID(dgram,
// k, 0) with the ID k it was rewritten for. A run of two datagrams is a
// GSO send as much as a longer one.
func TestGSOFallback(t *testing.T) {
	tests := []struct {
		name string
		runs []int // the datagrams of each run in the batch
		ms   func(to netip.AddrPort) []Message
	}{
		{"gsoBatch", []int{21, 5}, func(to netip.AddrPort) []Message { return gsoBatch(to, to) }},
		{"run of two", []int{2}, func(to netip.AddrPort) []Message {
			return []Message{{Buf: make([]byte, 1000), N: 1000, Addr: to}, {Buf: make([]byte, 1000), N: 1000, Addr: to}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &idRecorder{}
			tx := listen(t, lo4, Options{RewriteIPv4ID: rec.rewrite})
			rx := listen(t, lo4, Options{})
			var serr error
			require.NoError(t, tx.rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
			}))
			require.NoError(t, serr)
			ms := tc.ms(rx.LocalAddr())
			for i := range ms {
				binary.BigEndian.PutUint32(ms[i].Buf, uint32(i))
			}
			n, err := tx.WriteBatch(ms)
			require.NoError(t, err)
			require.Equal(t, len(ms), n)
			require.Equal(t, uint64(1), tx.Stats().GSOFallbacks)
			require.Zero(t, tx.Stats().GSOBuffers)
			// Every segment k > 0 rewritten for k, then back from k.
			var rewritten, undone [][2]uint16
			for _, run := range tc.runs {
				for k := 1; k < run; k++ {
					rewritten = append(rewritten, [2]uint16{0, uint16(k)})
					undone = append(undone, [2]uint16{uint16(k), 0})
				}
			}
			require.Equal(t, append(rewritten, undone...), rec.calls)
			got := readN(t, rx, len(ms))
			for i, r := range got {
				require.Equal(t, uint32(i), binary.BigEndian.Uint32(r.data))
				require.Zero(t, binary.BigEndian.Uint16(r.data[len(r.data)-2:]), "datagram %d: ID rewrite undone", i)
			}
			// Later batches go out one datagram per buffer.
			n, err = tx.WriteBatch(ms)
			require.NoError(t, err)
			require.Equal(t, len(ms), n)
			require.Zero(t, tx.Stats().GSOBuffers)
			require.Len(t, readN(t, rx, len(ms)), len(ms))
		})
	}
}
