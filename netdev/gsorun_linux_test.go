package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGSORunsKeepDatagrams: whatever WriteBatch coalesces into one GSO
// send, each receiver gets exactly the datagrams addressed to it, with
// their sizes and from the source each gave. The kernel segments a
// UDP_SEGMENT buffer at the segment size only (udp_send_skb: a segment
// size of 0 sends the buffer as one datagram, and a buffer no longer than
// the segment size is one datagram), uses one destination and one source
// for all of it, and refuses a buffer beyond an IP datagram's 64 KiB
// (EMSGSIZE).
func TestGSORunsKeepDatagrams(t *testing.T) {
	type dgram struct {
		size int
		to   int        // index of the receiver
		src  netip.Addr // Message.Local (IPv4 only)
	}
	lo2 := netip.MustParseAddr("127.0.0.2")
	tests := []struct {
		name   string
		v4Only bool
		dgrams []dgram
	}{
		{"empty first", false, []dgram{{0, 0, netip.Addr{}}, {100, 0, netip.Addr{}}, {100, 0, netip.Addr{}}}},
		{"empty last", false, []dgram{{100, 0, netip.Addr{}}, {100, 0, netip.Addr{}}, {0, 0, netip.Addr{}}}},
		{"alternating receivers", false, []dgram{{100, 0, netip.Addr{}}, {100, 1, netip.Addr{}}, {100, 0, netip.Addr{}}, {100, 1, netip.Addr{}}}},
		{"alternating sources", true, []dgram{{100, 0, lo4}, {100, 0, lo2}, {100, 0, lo4}, {100, 0, lo2}}},
		{"source then none", true, []dgram{{100, 0, lo2}, {100, 0, netip.Addr{}}, {100, 0, lo2}}},
		{"none then source", true, []dgram{{100, 0, netip.Addr{}}, {100, 0, lo2}}},
	}
	big := make([]dgram, 40) // 160 KiB: several buffers of at most 15
	for i := range big {
		big[i] = dgram{4096, 0, netip.Addr{}}
	}
	tests = append(tests, struct {
		name   string
		v4Only bool
		dgrams []dgram
	}{"beyond 64 KiB", false, big})

	for _, fam := range families {
		for _, tc := range tests {
			t.Run(fam.name+"/"+tc.name, func(t *testing.T) {
				if fam.needsIPv6 {
					if tc.v4Only {
						t.Skip("one IPv6 loopback address only")
					}
					skipNoIPv6(t)
				}
				tx := listen(t, fam.any, Options{RewriteIPv4ID: keepID})
				if !tx.gso.Load() {
					t.Skip("no UDP_SEGMENT")
				}
				rx := []*UDPConn{listen(t, fam.lo, Options{}), listen(t, fam.lo, Options{})}
				ms := make([]Message, len(tc.dgrams))
				var want [2][]received
				for i, d := range tc.dgrams {
					buf := make([]byte, d.size)
					if d.size >= 4 {
						binary.BigEndian.PutUint32(buf, uint32(i))
					}
					ms[i] = Message{Buf: buf, N: d.size, Addr: rx[d.to].LocalAddr(), Local: d.src}
					from := d.src
					if !from.IsValid() {
						from = fam.lo
					}
					want[d.to] = append(want[d.to], received{data: buf, from: netip.AddrPortFrom(from, tx.LocalAddr().Port())})
				}
				n, err := tx.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, len(ms), n)
				require.Zero(t, tx.Stats().GSOFallbacks)
				for r := range rx {
					got := readN(t, rx[r], len(want[r]))
					require.Len(t, got, len(want[r]), "receiver %d", r)
					for i, g := range got {
						require.Equal(t, want[r][i].data, g.data, "receiver %d, datagram %d", r, i)
						require.Equal(t, want[r][i].from, g.from, "receiver %d, datagram %d", r, i)
					}
				}
			})
		}
	}
}
