package netdev

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// listenGroup opens a group closed at the end of the test.
func listenGroup(t *testing.T, addr netip.AddrPort, n int) []*UDPConn {
	t.Helper()
	conns, err := ListenUDPGroup(addr, n, Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// drain reads from c until want datagrams have arrived (waiting up to 10 s
// for them), then once more for a short while to catch any extra, and
// returns the payloads. A deadline alone cannot end the wait: on a loaded
// machine the reader may be scheduled after a short deadline has passed,
// and the poller then returns a timeout without reading what is queued.
func drain(t *testing.T, c *UDPConn, want int) [][]byte {
	t.Helper()
	var got [][]byte
	msgs := newMsgs(8, 64)
	read := func(wait time.Duration) bool {
		require.NoError(t, c.uc.SetReadDeadline(time.Now().Add(wait)))
		n, err := c.ReadBatch(msgs)
		if err != nil {
			return false
		}
		for _, m := range msgs[:n] {
			got = append(got, append([]byte(nil), m.Buf[:m.N]...))
		}
		return true
	}
	for len(got) < want && read(10*time.Second) {
	}
	for read(20 * time.Millisecond) {
	}
	return got
}

func TestUDPGroupSteersByQPN(t *testing.T) {
	for _, fam := range families {
		for _, n := range []int{1, 2, 3, 4, 5} {
			t.Run(fam.name+"/"+string(rune('0'+n)), func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				conns := listenGroup(t, netip.AddrPortFrom(fam.lo, 0), n)
				port := conns[0].LocalAddr().Port()
				for _, c := range conns {
					require.Equal(t, port, c.LocalAddr().Port(), "one port for the group")
				}
				// Several senders: steering must not depend on the source port.
				senders := []*UDPConn{listen(t, fam.lo, Options{}), listen(t, fam.lo, Options{})}
				// QPNs from base: bit 16 set, so that steering by fewer
				// than the DestQP's 24 bits sends some to another socket.
				const count, base = 40, 0x010110
				for q := range count {
					bth := make([]byte, 12)
					bth[0] = 0x04                                                  // RC_SEND_ONLY; irrelevant to steering
					binary.BigEndian.PutUint32(bth[4:], uint32(base+q)|0xAB000000) // reserved byte set: ignored
					msgs := []Message{{Buf: bth, N: len(bth), Addr: conns[0].LocalAddr()}}
					_, err := senders[q%2].WriteBatch(msgs)
					require.NoError(t, err)
				}
				seen := 0
				for i, c := range conns {
					want := 0
					for q := range count {
						if (base+q)%n == i {
							want++
						}
					}
					for _, p := range drain(t, c, want) {
						q := binary.BigEndian.Uint32(p[4:]) & 0xFFFFFF
						require.Equal(t, i, int(q)%n, "QPN %#x reached socket %d of %d", q, i, n)
						seen++
					}
				}
				require.Equal(t, count, seen, "every datagram received once")
			})
		}
	}
}

func TestUDPGroupShortDatagramToFirst(t *testing.T) {
	conns := listenGroup(t, netip.AddrPortFrom(lo4, 0), 3)
	s := listen(t, lo4, Options{})
	_, err := s.WriteBatch([]Message{{Buf: []byte{1, 2, 3}, N: 3, Addr: conns[0].LocalAddr()}})
	require.NoError(t, err)
	require.Len(t, drain(t, conns[0], 1), 1)
	require.Empty(t, drain(t, conns[1], 0))
	require.Empty(t, drain(t, conns[2], 0))
}

func TestUDPGroupRefusesBusyAddress(t *testing.T) {
	single := listen(t, lo4, Options{})
	_, err := ListenUDPGroup(single.LocalAddr(), 2, Options{})
	require.ErrorContains(t, err, "in use")

	conns := listenGroup(t, netip.AddrPortFrom(lo4, 0), 2)
	_, err = ListenUDPGroup(conns[0].LocalAddr(), 2, Options{})
	require.ErrorContains(t, err, "in use", "a second group must not join the first")
	_, err = ListenUDP(conns[0].LocalAddr(), Options{})
	require.Error(t, err, "a plain socket cannot bind the group's port")

	for _, n := range []int{0, -1, maxGroup + 1} {
		_, err := ListenUDPGroup(netip.AddrPortFrom(lo4, 0), n, Options{})
		require.Error(t, err, "n=%d", n)
	}

	// An address of no local interface is not "in use": the error is the
	// kernel's (EADDRNOTAVAIL).
	_, err = ListenUDPGroup(netip.MustParseAddrPort("192.0.2.99:0"), 2, Options{})
	require.ErrorIs(t, err, syscall.EADDRNOTAVAIL)
	require.NotContains(t, err.Error(), "in use")
}
