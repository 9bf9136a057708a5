package netdev

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestGSORefusal: udp_send_skb fails a UDP_SEGMENT send it cannot segment
// with EINVAL (segment size or count) or EIO (no checksum offload on the
// way out); the errnos a queued ICMP error leaves, and the local drops,
// are not refusals.
func TestGSORefusal(t *testing.T) {
	tests := []struct {
		errno unix.Errno
		want  bool
	}{
		{unix.EIO, true},
		{unix.EINVAL, true},
		{unix.ENOPROTOOPT, false},
		{unix.EOPNOTSUPP, false},
		{unix.ECONNREFUSED, false},
		{unix.EMSGSIZE, false},
		{unix.ENOBUFS, false},
		{unix.EAGAIN, false},
	}
	for _, tc := range tests {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			require.Equal(t, tc.want, gsoRefusal(tc.errno))
		})
	}
}

// TestSameQPN: a ListenUDPGroup steers by the BTH's 24-bit DestQP, payload
// bytes 5-7 (IBA 9.2; byte 4 holds rxe's FECN and BECN bits and the
// reserved ones), and a datagram too short for it goes to the first socket.
func TestSameQPN(t *testing.T) {
	bth := func(b4, b5, b6, b7 byte) []byte { return []byte{0x04, 0, 0xff, 0xff, b4, b5, b6, b7, 0, 0, 0, 1} }
	tests := []struct {
		name string
		a, b []byte
		want bool
	}{
		{"same QPN", bth(0, 0, 0x01, 0x10), bth(0, 0, 0x01, 0x10), true},
		{"low byte differs", bth(0, 0, 0x01, 0x10), bth(0, 0, 0x01, 0x11), false},
		{"middle byte differs", bth(0, 0, 0x01, 0x10), bth(0, 0, 0x02, 0x10), false},
		{"high byte differs", bth(0, 0x01, 0x01, 0x10), bth(0, 0x00, 0x01, 0x10), false},
		{"FECN and BECN differ", bth(0xc0, 0, 0x01, 0x10), bth(0, 0, 0x01, 0x10), true},
		{"both short", []byte{1, 2, 3}, []byte{4, 5, 6, 7, 8, 9, 10}, true},
		{"one short", []byte{1, 2, 3}, bth(0, 0, 0, 0), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sameQPN(tc.a, tc.b))
			require.Equal(t, tc.want, sameQPN(tc.b, tc.a))
		})
	}
}

// TestSameSource: Message.Local selects the source when it is valid and
// not unspecified (putSourceCmsg unmaps it); otherwise the kernel picks.
func TestSameSource(t *testing.T) {
	a := netip.MustParseAddr("127.0.0.2")
	tests := []struct {
		name string
		x, y netip.Addr
		want bool
	}{
		{"both unset", netip.Addr{}, netip.Addr{}, true},
		{"unset and unspecified", netip.Addr{}, netip.IPv4Unspecified(), true},
		{"set and unset", a, netip.Addr{}, false},
		{"set and unspecified", a, netip.IPv4Unspecified(), false},
		{"same", a, a, true},
		{"v4-mapped", a, netip.MustParseAddr("::ffff:127.0.0.2"), true},
		{"different", a, netip.MustParseAddr("127.0.0.3"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sameSource(tc.x, tc.y))
			require.Equal(t, tc.want, sameSource(tc.y, tc.x))
		})
	}
}

// TestSockaddrShortLength: a socket address is read no further than the
// length the kernel gave (msg_namelen), whatever the buffer holds beyond.
func TestSockaddrShortLength(t *testing.T) {
	var b [sockaddrSize]byte
	ap := netip.MustParseAddrPort("127.0.0.1:4791")
	n := putSockaddr(&b, ap, false)
	require.Equal(t, ap, sockaddrAddrPort(&b, n))
	for _, short := range []int{0, 1, n - 1} {
		require.False(t, sockaddrAddrPort(&b, short).IsValid(), "length %d", short)
	}
}

// TestRunTruesize: a run of segs datagrams shares one buffer's overhead;
// a run of 0 or 1 is a single paged datagram.
func TestRunTruesize(t *testing.T) {
	require.Equal(t, PagedTruesize(4096), RunTruesize(4096, 1))
	require.Equal(t, PagedTruesize(4096), RunTruesize(4096, 0))
	require.Equal(t, 4096+pagedOverhead/64, RunTruesize(4096, 64))
}
