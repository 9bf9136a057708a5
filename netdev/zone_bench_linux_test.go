package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkLinkLocalSockaddr reads a link-local IPv6 peer's sockaddr (scope
// ID 1, lo) into an address and writes it back, as a datagram from and to
// such a peer costs: the zone's name and index come from the cached
// interface table (zoneTable).
func BenchmarkLinkLocalSockaddr(b *testing.B) {
	var sa [sockaddrSize]byte
	binary.NativeEndian.PutUint16(sa[0:2], unix.AF_INET6)
	ip := netip.MustParseAddr("fe80::1").As16()
	copy(sa[8:24], ip[:])
	binary.NativeEndian.PutUint32(sa[24:28], 1)
	b.ReportAllocs()
	for b.Loop() {
		a := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6)
		putSockaddr(&sa, a, true)
	}
}
