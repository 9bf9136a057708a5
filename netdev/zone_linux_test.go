package netdev

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

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

// TestZoneTableReload: the interface table is read again only when a
// lookup needs it: a name found in a table younger than zoneTTL is
// returned from it; a scope ID not in the table reads it again only when
// the table is older than zoneRetry, so a peer with an unknown scope ID
// does not ask the kernel on every datagram; a table older than zoneTTL
// is read again by any lookup. A read is seen by a made-up entry (scope
// ID fake, named "fake") that the kernel's table does not have vanishing.
func TestZoneTableReload(t *testing.T) {
	const fake, missing = 1<<31 - 9, 1<<31 - 11 // no interface has these indexes
	for _, tc := range []struct {
		name   string
		age    time.Duration // of the table at the lookup
		lookup uint32
		reload bool
	}{
		{"found, fresh", 0, fake, false},
		{"found, past zoneRetry", (zoneRetry + zoneTTL) / 2, fake, false},
		{"found, past zoneTTL", zoneTTL + zoneRetry, fake, true},
		// A table stamped in the future: still within zoneRetry at the
		// lookup however long a loaded host stalls the test.
		{"missing, within zoneRetry", -zoneTTL, missing, false},
		{"missing, past zoneRetry", (zoneRetry + zoneTTL) / 2, missing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := &zoneTable{
				byIndex: map[uint32]string{fake: "fake"},
				byName:  map[string]uint32{"fake": fake},
				loaded:  time.Now().Add(-tc.age),
			}
			before := z.loaded
			got := z.name(tc.lookup)
			if tc.lookup == fake && !tc.reload {
				require.Equal(t, "fake", got)
			} else {
				require.Equal(t, strconv.Itoa(int(tc.lookup)), got)
			}
			require.Equal(t, !tc.reload, z.byIndex[fake] == "fake", "the table was read again: %v", tc.reload)
			require.Equal(t, tc.reload, z.loaded.After(before), "loaded moved")
			if !tc.reload {
				require.Equal(t, fake, int(z.index("fake")), "the name's lookup uses the same table")
			}
		})
	}
}
