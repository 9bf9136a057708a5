package netdev

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInvalidDatagramKeepsGSO: a datagram the kernel refuses with EINVAL
// whether or not it is segmented (a multicast or broadcast source, port
// 0) fails alone: when it heads a GSO run or goes out paged, WriteBatch
// reports its EINVAL and keeps GSO and paged sends on, instead of taking
// the EINVAL for the kernel refusing segmentation (udp_send_skb) and
// turning them off for the life of the UDPConn.
func TestInvalidDatagramKeepsGSO(t *testing.T) {
	tests := []struct {
		name  string
		count int // datagrams: a GSO run, or 1 (paged)
		bad   func(m *Message)
	}{
		{"GSO run from a multicast source", 4, func(m *Message) { m.Local = netip.MustParseAddr("224.0.0.1") }},
		{"GSO run from the broadcast address", 4, func(m *Message) { m.Local = netip.MustParseAddr("255.255.255.255") }},
		{"GSO run to port 0", 4, func(m *Message) { m.Addr = netip.AddrPortFrom(m.Addr.Addr(), 0) }},
		{"paged datagram from a multicast source", 1, func(m *Message) { m.Local = netip.MustParseAddr("224.0.0.1") }},
		{"paged datagram to port 0", 1, func(m *Message) { m.Addr = netip.AddrPortFrom(m.Addr.Addr(), 0) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rx := listen(t, lo4, Options{})
			tx := listen(t, any4, Options{RewriteIPv4ID: keepID})
			to := netip.AddrPortFrom(lo4, rx.LocalAddr().Port())
			if !tx.gso.Load() || !tx.PagesTo(lo4) {
				t.Skip("no UDP_SEGMENT")
			}
			bad := gsoRun(to, tc.count, 1000)
			for i := range bad {
				tc.bad(&bad[i])
			}
			n, err := tx.WriteBatch(bad)
			require.ErrorIs(t, err, syscall.EINVAL)
			require.Zero(t, n)
			require.True(t, tx.gso.Load(), "GSO stays on")
			require.Zero(t, tx.Stats().GSOFallbacks)
			require.True(t, tx.PagesTo(lo4), "paged sends stay on")

			good := gsoRun(to, 4, 1000)
			n, err = tx.WriteBatch(good)
			require.NoError(t, err)
			require.Equal(t, len(good), n)
			require.Equal(t, uint64(1), tx.Stats().GSOBuffers)
			require.Len(t, readN(t, rx, len(good)), len(good))
		})
	}
}
