package netdev

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReportIPFields sends datagrams with a traffic class over loopback:
// before ReportIPFields the reader reports neither the class nor the TTL,
// after it every datagram carries both (the loopback TTL or hop limit is
// the kernel default, 64), single datagrams and the datagrams of a
// GRO-coalesced buffer alike.
func TestReportIPFields(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			if fam.needsIPv6 {
				skipNoIPv6(t)
			}
			rx := listen(t, fam.lo, Options{})
			tx := listen(t, fam.lo, Options{RewriteIPv4ID: keepID}) // GSO for any payload
			to := netip.AddrPortFrom(fam.lo, rx.LocalAddr().Port())
			send := func(n, size int, tos uint8) {
				t.Helper()
				run := gsoRun(to, n, size)
				for i := range run {
					run[i].TOS = tos
				}
				_, err := tx.WriteBatch(run)
				require.NoError(t, err)
			}

			send(1, 100, 0xb8)
			got := readN(t, rx, 1)
			require.Zero(t, got[0].tos, "not asked for")
			require.Zero(t, got[0].ttl, "not asked for")

			require.NoError(t, rx.ReportIPFields())
			for _, tc := range []struct {
				n   int
				tos uint8
			}{{1, 0xb8}, {1, 0}, {40, 0x68}} {
				send(tc.n, 1000, tc.tos)
				got := readN(t, rx, tc.n)
				for i, r := range got {
					require.Equal(t, tc.tos, r.tos, "datagram %d of %d", i, tc.n)
					require.Equal(t, uint8(64), r.ttl, "datagram %d of %d", i, tc.n)
				}
			}
			require.Positive(t, rx.Stats().GROBuffers, "the 40 datagrams came coalesced")
		})
	}
}

// TestPipeReportsTOS: a pipe carries the TOS the writer gave to the
// reader, and reports no TTL.
func TestPipeReportsTOS(t *testing.T) {
	a, b := NewPipe()
	defer a.Close()
	defer b.Close()
	var r IPFieldReporter = b
	require.NoError(t, r.ReportIPFields())
	_, err := a.WriteBatch([]Message{{Buf: []byte{1, 2, 3}, N: 3, Addr: b.LocalAddr(), TOS: 0x2e}})
	require.NoError(t, err)
	got := readN(t, b, 1)
	require.Equal(t, uint8(0x2e), got[0].tos)
	require.Zero(t, got[0].ttl)
}
