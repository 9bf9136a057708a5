package netdev

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/stretchr/testify/require"
)

// TestListenMulticastUDP: two sockets bound to one group and port on the
// loopback interface each receive one copy of a datagram a socket bound to
// the loopback address sends to the group (after SetMulticastSend), with
// the group as Message.Local; a socket of another group on the same port
// receives nothing.
func TestListenMulticastUDP(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lo           netip.Addr
		group, other netip.Addr
		needsIPv6    bool
	}{
		{"ipv4", lo4, netip.MustParseAddr("239.1.2.3"), netip.MustParseAddr("239.1.2.4"), false},
		{"ipv4-mapped group", lo4, netip.MustParseAddr("::ffff:239.1.2.5"), netip.MustParseAddr("239.1.2.6"), false},
		{"ipv6", lo6, netip.MustParseAddr("ff0e::123"), netip.MustParseAddr("ff0e::124"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsIPv6 {
				skipNoIPv6(t)
			}
			opts := Options{NoGSO: true, NoGRO: true}
			a, err := ListenMulticastUDP(netip.AddrPortFrom(tc.group, 0), tc.lo, opts)
			require.NoError(t, err)
			defer a.Close()
			port := a.LocalAddr().Port()
			require.Equal(t, netip.AddrPortFrom(tc.group.Unmap(), port), a.LocalAddr())
			b, err := ListenMulticastUDP(netip.AddrPortFrom(tc.group, port), tc.lo, opts)
			require.NoError(t, err, "a second socket on the same group and port")
			defer b.Close()
			other, err := ListenMulticastUDP(netip.AddrPortFrom(tc.other, port), tc.lo, opts)
			require.NoError(t, err)
			defer other.Close()

			s := listen(t, tc.lo, Options{NoGSO: true})
			require.NoError(t, s.SetMulticastSend(tc.lo, 1))
			dst := netip.AddrPortFrom(tc.group.Unmap(), port)
			data := payload(3)
			testutil.SendQueuedOf(t, a.rc, 1, func(int) {
				m := []Message{{Buf: data, N: len(data), Addr: dst}}
				n, err := s.WriteBatch(m)
				if tc.needsIPv6 && errors.Is(err, syscall.ENETUNREACH) {
					// lo has no MULTICAST flag, so the kernel adds no
					// ff00::/8 route on it (IPv4 needs none).
					t.Skipf("no IPv6 multicast route on lo: %v", err)
				}
				require.NoError(t, err)
				require.Equal(t, 1, n)
			})
			for _, c := range []*UDPConn{a, b} {
				got := readN(t, c, 1)
				require.Len(t, got, 1)
				require.Equal(t, data, got[0].data)
				require.Equal(t, s.LocalAddr(), got[0].from)
				require.Equal(t, tc.group.Unmap(), got[0].local)
			}
			q, err := testutil.ReadUDPQueueOf(other.rc)
			require.NoError(t, err)
			require.Zero(t, q.Bytes, "the socket of another group received the datagram")
		})
	}
}

// TestListenMulticastUDPRefusals: a unicast group, a group of the other
// family than the interface address and an address no interface carries
// are refused; SetMulticastSend refuses an address of the other family.
func TestListenMulticastUDPRefusals(t *testing.T) {
	for _, tc := range []struct {
		name         string
		group, iface netip.Addr
		want         string
	}{
		{"unicast group", lo4, lo4, "not a multicast address"},
		{"families differ", netip.MustParseAddr("239.1.1.1"), lo6, "different families"},
		{"no interface", netip.MustParseAddr("239.1.1.1"), netip.MustParseAddr("203.0.113.77"), "no interface carries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "no interface carries" {
				if _, err := interfaceIndexOf(tc.iface); err == nil {
					t.Skipf("an interface of this host carries %v", tc.iface)
				}
			}
			c, err := ListenMulticastUDP(netip.AddrPortFrom(tc.group, 0), tc.iface, Options{})
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, c)
		})
	}
	s := listen(t, lo4, Options{})
	require.ErrorContains(t, s.SetMulticastSend(lo6, 1), "not of the socket's family")
}

// TestInterfaceIndexOf: the interface of an address is the one its zone
// names, by name or by index (a link-local IPv6 address); else the one it
// is assigned to, or else the one whose network holds it: 127.0.0.2,
// which devices on loopback bind, is lo's (127.0.0.1/8). A zone no
// interface has, or an address no interface carries, is an error.
func TestInterfaceIndexOf(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no interface lo: %v", err)
	}
	for _, tc := range []struct {
		addr string
		want int // 0: an error
	}{
		{"fe80::1%lo", lo.Index},
		{"fe80::9:9%" + strconv.Itoa(lo.Index), lo.Index},
		{"127.0.0.1", lo.Index},
		{"127.0.0.2", lo.Index},
		{"fe80::1%gorxe-no-such-if", 0},
		{"240.0.0.209", 0}, // reserved (240.0.0.0/4): on no interface
	} {
		got, err := interfaceIndexOf(netip.MustParseAddr(tc.addr))
		if tc.want == 0 {
			require.Error(t, err, tc.addr)
			continue
		}
		require.NoError(t, err, tc.addr)
		require.Equal(t, tc.want, got, tc.addr)
	}
}
