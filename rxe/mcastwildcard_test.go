//go:build linux

package rxe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestUDMulticastWildcard: a device whose sockets are bound to the
// wildcard address 0.0.0.0 (its address given by Options.Addr) receives
// on them the datagrams of every group joined on the interface at its
// port (Linux delivers a multicast datagram to every socket of the port
// whose bound address matches, and the wildcard matches). Two of its UD
// QPs attached to a group get exactly one copy each of every datagram a
// QP of another device sends there, and a third QP, not attached, none;
// a datagram to a group that only another socket of the host joined is
// dropped and counted as McastIgnored, never as UnknownQP. With one
// socket per vector (a SO_REUSEPORT group, to each socket of which the
// kernel gives its own copy) the QPs still get one copy each, and the
// other sockets' copies are counted as McastIgnored. Once the QPs
// detach, they get nothing more.
func TestUDMulticastWildcard(t *testing.T) {
	skipNoLoopbackMcast(t)
	lo := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name    string
		sockets int
		conns   func(t *testing.T) []netdev.Conn
	}{
		{"one-socket", 1, func(t *testing.T) []netdev.Conn {
			c, err := netdev.ListenUDP(netip.MustParseAddrPort("0.0.0.0:0"), SocketOptions(Options{}))
			require.NoError(t, err)
			return []netdev.Conn{c}
		}},
		{"socket-per-vector", 2, func(t *testing.T) []netdev.Conn {
			g, err := netdev.ListenUDPGroup(netip.MustParseAddrPort("0.0.0.0:0"), 2, SocketOptions(Options{}))
			require.NoError(t, err)
			return []netdev.Conn{g[0], g[1]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			dw, err := OpenConns(tc.conns(t), Options{Addr: lo, LinkMTU: 9000, OwnConn: true, Name: "rxe-w"})
			require.NoError(t, err)
			defer dw.Close()
			cs, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.2:0"), SocketOptions(Options{}))
			require.NoError(t, err)
			ds, err := Open(cs, Options{LinkMTU: 9000, OwnConn: true, Name: "rxe-s"})
			require.NoError(t, err)
			defer ds.Close()

			const qkey = 0x5EED
			w1, w2, wNo, s := newTypedEnd(t, dw, QPTypeUD), newTypedEnd(t, dw, QPTypeUD), newTypedEnd(t, dw, QPTypeUD), newTypedEnd(t, ds, QPTypeUD)
			for _, e := range []*end{w1, w2, wNo, s} {
				readyUD(t, e, qkey)
			}
			gid := mcastGID()
			for _, e := range []*end{w1, w2} {
				require.NoError(t, e.qp.AttachMcast(gid, 0))
			}
			require.Equal(t, []netip.Addr{gid}, dw.McastGroups())
			const slot = 8192
			for _, e := range []*end{w1, w2, wNo} {
				postRecvs(t, e, 4, slot)
			}
			port := dw.Addr().Port()
			ah, err := s.pd.CreateAH(AH{DGID: gid, UDPPort: port})
			require.NoError(t, err)
			sizes := []int{1, 777, dw.ActiveMTU().Bytes()}
			fill(s.buf[:len(sizes)*slot], 63)
			for i, n := range sizes {
				mcastSend(t, s, ah, qkey, uint64(i), i*slot, n)
			}
			for _, e := range []*end{w1, w2} {
				requireMcastCopies(t, e, s, sizes, slot, ds.Addr().Addr(), gid.Unmap())
			}
			for _, e := range []*end{w1, w2, wNo} {
				noWC(t, e.cq, 20*time.Millisecond)
			}
			for _, e := range []*end{w1, w2} {
				require.Equal(t, uint64(len(sizes)), e.qp.Counters().RcvdPkts, "QP %#x: one copy of each datagram", e.qp.QPN())
			}
			c := dw.Counters()
			require.Equal(t, uint64(len(sizes)), c.McastRcvd)
			require.Zero(t, c.UnknownQP)

			// A group this device has not joined, which another socket
			// of the host joined on lo.
			other := mcastGID()
			tap, err := netdev.ListenMulticastUDP(netip.AddrPortFrom(other.Unmap(), 0), lo, netdev.Options{NoGSO: true, NoGRO: true})
			require.NoError(t, err)
			defer tap.Close()
			ahOther, err := s.pd.CreateAH(AH{DGID: other, UDPPort: port})
			require.NoError(t, err)
			mcastSend(t, s, ahOther, qkey, 9, 0, 64)
			// Each socket gets its copy: the first socket's copies of
			// the joined group were delivered, the others' ignored, and
			// every socket's copy of the other group is ignored.
			want := uint64((tc.sockets-1)*len(sizes) + tc.sockets)
			for end := time.Now().Add(testutil.Bound()); dw.Counters().McastIgnored < want && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			c = dw.Counters()
			require.Equal(t, want, c.McastIgnored)
			require.Zero(t, c.UnknownQP)
			require.Equal(t, uint64(len(sizes)), c.McastRcvd)
			for _, e := range []*end{w1, w2, wNo} {
				noWC(t, e.cq, 20*time.Millisecond)
			}

			// Once its QPs detach, the device has left the group: its
			// QPs get nothing more.
			for _, e := range []*end{w1, w2} {
				require.NoError(t, e.qp.DetachMcast(gid, 0))
			}
			require.Empty(t, dw.McastGroups())
			mcastSend(t, s, ah, qkey, 10, 0, 64)
			for _, e := range []*end{w1, w2, wNo} {
				noWC(t, e.cq, 20*time.Millisecond)
			}
			c = dw.Counters()
			require.Equal(t, uint64(len(sizes)), c.McastRcvd)
			require.Zero(t, c.UnknownQP)
		})
	}
}
