package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGroupSteersGSORuns: ListenUDPGroup promises that a datagram for
// QPN q is received by conns[q % n]. The kernel picks the group's socket
// once per GSO buffer, by its first datagram's QPN, so a UDPConn with
// Options.RunsByQPN (rxe opens its sockets so) coalesces only datagrams of
// one QPN: a batch of four datagrams for each of two QPNs goes out as two
// GSO buffers and each datagram reaches its QPN's socket. Without the
// option the eight went out as one buffer, all to the first QPN's socket.
func TestGroupSteersGSORuns(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			if fam.needsIPv6 {
				skipNoIPv6(t)
			}
			const n = 2
			conns := listenGroup(t, netip.AddrPortFrom(fam.lo, 0), n)
			sender := listen(t, fam.lo, Options{RewriteIPv4ID: keepID, RunsByQPN: true})
			if !sender.gso.Load() {
				t.Skip("no UDP_SEGMENT")
			}
			const count = 8
			msgs := make([]Message, count)
			for q := range count {
				bth := make([]byte, 12)
				bth[0] = 0x04
				binary.BigEndian.PutUint32(bth[4:], uint32(0x110+q/4))
				msgs[q] = Message{Buf: bth, N: len(bth), Addr: conns[0].LocalAddr()}
			}
			k, err := sender.WriteBatch(msgs) // one batch, as rxe's transmit goroutine sends
			require.NoError(t, err)
			require.Equal(t, count, k)
			require.Equal(t, uint64(2), sender.Stats().GSOBuffers, "a GSO buffer per QPN")
			seen := 0
			for i, c := range conns {
				for _, p := range drain(t, c, count/n) {
					q := binary.BigEndian.Uint32(p[4:]) & 0xFFFFFF
					seen++
					require.Equal(t, i, int(q)%n, "QPN %#x reached socket %d of %d", q, i, n)
				}
			}
			require.Equal(t, count, seen)
		})
	}
}
