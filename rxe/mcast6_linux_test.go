//go:build linux

package rxe

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/netns"
	"github.com/gorxe/gorxe/packet"
)

// TestUDMulticastVeth runs UD multicast between two devices in two network
// namespaces joined by a veth pair, which has the MULTICAST flag that lo
// lacks: over IPv4 to a 239.0.0.0/8 group; over IPv6 between devices at
// fd00:209::1 and ::2 to an ff0e::/16 group (global scope) and to an
// ff02::/16 one (link-local scope, whose socket Linux binds only with the
// interface as its scope); and between devices at the link-local
// fe80::209:1 and ::2, zoned with their veth, to an ff02::/16 group. A UD
// QP of the device in one namespace sends to the group, and of three UD
// QPs of the device in the other, the two attached get one byte-exact
// copy each of every datagram, with the sender's address as the source
// and the group's as the destination in the GRH area and a hop limit of
// McastHops, while one attached and detached again gets none. It is
// root-only (network namespaces).
func TestUDMulticastVeth(t *testing.T) {
	if err := netns.Check(); err != nil {
		t.Skipf("UD multicast over a veth between namespaces: %v", err)
	}
	p, err := netns.NewPair(fmt.Sprintf("gorxe-mcast-%d", os.Getpid()), 209)
	require.NoError(t, err)
	defer p.Close()
	a6, b6 := netip.MustParseAddr("fd00:209::1"), netip.MustParseAddr("fd00:209::2")
	aLL, bLL := netip.MustParseAddr("fe80::209:1").WithZone(p.IfA), netip.MustParseAddr("fe80::209:2").WithZone(p.IfB)
	for _, side := range []struct {
		ns, ifc string
		addr    netip.Addr
	}{{p.A, p.IfA, a6}, {p.B, p.IfB, b6}, {p.A, p.IfA, aLL}, {p.B, p.IfB, bLL}} {
		_, err := netns.Command("ip", "-n", side.ns, "addr", "add", side.addr.WithZone("").String()+"/64", "dev", side.ifc, "nodad")
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name         string
		addrA, addrB netip.Addr
		group        netip.Addr
	}{
		{"IPv4", p.AddrA, p.AddrB, netip.MustParseAddr("::ffff:239.209.0.1")},
		{"IPv6", a6, b6, netip.MustParseAddr("ff0e::209:1")},
		{"IPv6/link-local-group", a6, b6, netip.MustParseAddr("ff02::209:1")},
		{"IPv6/link-local-devices", aLL, bLL, netip.MustParseAddr("ff02::209:2")},
	} {
		t.Run(tc.name, func(t *testing.T) { mcastAcrossVeth(t, p, tc.addrA, tc.addrB, tc.group) })
	}
}

// mcastAcrossVeth is a row of TestUDMulticastVeth: a device at addrA in
// p.A sends to gid, received by a device at addrB in p.B.
func mcastAcrossVeth(t *testing.T, p *netns.Pair, addrA, addrB, gid netip.Addr) {
	checkGoroutines(t)
	var da, db *Device
	open := func(addr netip.Addr, name string, d **Device) func() error {
		return func() (err error) {
			*d, err = Listen(netip.AddrPortFrom(addr, packet.UDPPort), Options{Name: name})
			return err
		}
	}
	require.NoError(t, netns.In(p.A, open(addrA, "rxe-a", &da)))
	defer da.Close()
	require.NoError(t, netns.In(p.B, open(addrB, "rxe-b", &db)))
	defer db.Close()

	const qkey = 0x2090
	s := newTypedEnd(t, da, QPTypeUD)
	b1, b2, bGone := newTypedEnd(t, db, QPTypeUD), newTypedEnd(t, db, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	for _, e := range []*end{s, b1, b2, bGone} {
		readyUD(t, e, qkey)
	}
	// A group's socket, and the interface its join and the device's
	// multicast sends name, are those of the namespace of the device's
	// socket: the calls are made from the test's goroutine, in neither.
	for _, e := range []*end{b1, b2, bGone} {
		require.NoError(t, e.qp.AttachMcast(gid, 0))
	}
	require.NoError(t, bGone.qp.DetachMcast(gid, 0))
	require.Equal(t, []netip.Addr{gid}, db.McastGroups())
	const slot = 8192
	for _, e := range []*end{b1, b2, bGone} {
		postRecvs(t, e, 4, slot)
	}
	ah, err := s.pd.CreateAH(AH{DGID: gid})
	require.NoError(t, err)
	group := gid.Unmap()
	require.Equal(t, netip.AddrPortFrom(group, packet.UDPPort), ah.Dest())

	sizes := []int{1, 777, da.ActiveMTU().Bytes()}
	fill(s.buf[:len(sizes)*slot], 209)
	for i, n := range sizes {
		mcastSend(t, s, ah, qkey, uint64(i), i*slot, n)
	}
	for _, e := range []*end{b1, b2} {
		requireMcastCopies(t, e, s, sizes, slot, addrA, group)
		noWC(t, e.cq, 20*time.Millisecond)
	}
	noWC(t, bGone.cq, 20*time.Millisecond)
	require.Zero(t, bGone.qp.Counters().RcvdPkts)
	require.Equal(t, uint64(len(sizes)), db.Counters().McastRcvd)
	require.Zero(t, db.Counters().McastDropped)
	require.Zero(t, da.Counters().McastRcvd, "the sender's device joined no group")
}
