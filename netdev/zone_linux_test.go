package netdev

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLinkLocalSockaddrs: a link-local IPv6 peer's address carries its
// zone, named as the interface of its scope ID (or the number where no
// interface has it), and back; reading and writing such an address
// allocates nothing per datagram, as for any other peer (the interface
// table is cached, as package net caches it, instead of asked for over
// netlink each time, which allocated 82 times).
func TestLinkLocalSockaddrs(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no lo interface: %v", err)
	}
	const unused = 1<<31 - 7 // no interface has this index
	for _, tc := range []struct {
		scope uint32
		zone  string
	}{
		{uint32(lo.Index), "lo"},
		{unused, strconv.Itoa(unused)},
	} {
		var sa [sockaddrSize]byte
		binary.NativeEndian.PutUint16(sa[0:2], unix.AF_INET6)
		binary.BigEndian.PutUint16(sa[2:4], 4791)
		ip := netip.MustParseAddr("fe80::1").As16()
		copy(sa[8:24], ip[:])
		binary.NativeEndian.PutUint32(sa[24:28], tc.scope)
		a := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6)
		require.Equal(t, netip.MustParseAddrPort("[fe80::1%"+tc.zone+"]:4791"), a)
		var back [sockaddrSize]byte
		require.Equal(t, unix.SizeofSockaddrInet6, putSockaddr(&back, a, true))
		require.Equal(t, sa, back, "zone %s", tc.zone)
		if raceEnabled {
			continue
		}
		allocs := testing.AllocsPerRun(100, func() {
			a := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6)
			putSockaddr(&back, a, true)
		})
		require.Zero(t, allocs, "allocations per datagram from and to zone %s", tc.zone)
	}
}
