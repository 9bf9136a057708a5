//go:build linux

package rxe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// mcastDevices returns two devices on real sockets at 127.0.0.1 and
// 127.0.0.2 that share one (ephemeral) port, as the devices of a
// multicast group must: a group's datagrams go to one UDP port.
func mcastDevices(t *testing.T) (*Device, *Device) {
	t.Helper()
	skipNoLoopbackMcast(t)
	checkGoroutines(t)
	for range 10 {
		ca, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), SocketOptions(Options{}))
		require.NoError(t, err)
		cb, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), ca.LocalAddr().Port()), SocketOptions(Options{}))
		if errors.Is(err, syscall.EADDRINUSE) {
			ca.Close()
			continue
		}
		require.NoError(t, err)
		return openPair(t, ca, cb)
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2 in 10 tries")
	return nil, nil
}

// loopbackMcast is the outcome of the probe of skipNoLoopbackMcast, made
// once per test binary.
var loopbackMcast = sync.OnceValue(func() error {
	group := netip.AddrPortFrom(netip.MustParseAddr("239.58.255.1"), 0)
	lo := netip.MustParseAddr("127.0.0.1")
	r, err := netdev.ListenMulticastUDP(group, lo, netdev.Options{NoGSO: true, NoGRO: true})
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := netdev.ListenUDP(netip.AddrPortFrom(lo, 0), netdev.Options{NoGSO: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.SetMulticastSend(lo, 1); err != nil {
		return err
	}
	if _, err := s.WriteBatch([]netdev.Message{{Buf: []byte("probe"), N: 5, Addr: r.LocalAddr()}}); err != nil {
		return err
	}
	rc, err := r.SyscallConn()
	if err != nil {
		return err
	}
	for end := time.Now().Add(testutil.Bound()); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if q, err := testutil.ReadUDPQueueOf(rc); err != nil {
			return err
		} else if q.Bytes > 0 {
			return nil
		}
	}
	return fmt.Errorf("a datagram to %v sent on lo did not loop back within %v", r.LocalAddr(), testutil.Bound())
})

// skipNoLoopbackMcast skips the test where IPv4 multicast does not loop
// back on lo (a socket of the host joined to a group on lo receives what
// another sends to the group there), which the multicast tests between
// two devices of this host need; Linux loops it back whether or not lo
// has the MULTICAST flag.
func skipNoLoopbackMcast(t *testing.T) {
	t.Helper()
	if err := loopbackMcast(); err != nil {
		t.Skipf("IPv4 multicast does not loop back on lo here: %v", err)
	}
}

// mcastGID returns an IPv4-mapped GID of a group in 239.0.0.0/8 (the
// administratively scoped block), random so that parallel runs of the
// tests do not share a group.
func mcastGID() netip.Addr {
	return netip.AddrFrom16(netip.AddrFrom4([4]byte{239, byte(rand.IntN(256)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))}).As16())
}

// mcastSend posts a signaled UD SEND of n bytes at a.buf[off:] to ah with
// RemoteQPN 0 (a multicast handle sends to MulticastQPN whatever the work
// request says) and waits for its completion.
func mcastSend(t *testing.T, a *end, ah *AddrHandle, qkey uint32, id uint64, off, n int) {
	t.Helper()
	_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQKey: qkey,
		SGList: []SGE{{Addr: a.mr.Addr() + uint64(off), Length: uint32(n), LKey: a.mr.LKey()}}})
	require.NoError(t, err)
	wc := waitWC(t, a.cq)
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, id, wc.ID)
}

// TestUDMulticast: two UD QPs of one device and one of another are
// attached to a group; each gets exactly one copy, byte for byte, of
// every datagram a UD QP sends to the group (the sender's device gets its
// own copies by loopback), with the group as the destination address of
// the GRH area. A QP attached and detached again, and a QP never
// attached, get nothing; a QP attached with another Q_Key drops the
// datagrams and counts them. Once the last QP of a device detaches (one
// destroyed, one detached), the device has left the group and gets no
// more copies.
func TestUDMulticast(t *testing.T) {
	da, db := mcastDevices(t)
	const qkey = 0x1EE7
	a1, a2, a3, aNo := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, da, QPTypeUD)
	b1, bKey, s := newTypedEnd(t, db, QPTypeUD), newTypedEnd(t, db, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	for _, e := range []*end{a1, a2, a3, aNo, b1, s} {
		readyUD(t, e, qkey)
	}
	readyUD(t, bKey, qkey+1)
	gid := mcastGID()
	group := gid.Unmap()
	for _, e := range []*end{a1, a2, a3, b1, bKey} {
		require.NoError(t, e.qp.AttachMcast(gid, 0))
	}
	require.NoError(t, a1.qp.AttachMcast(gid, 0), "attaching twice does nothing")
	require.NoError(t, a3.qp.DetachMcast(gid, 0))
	require.Equal(t, []netip.Addr{gid}, da.McastGroups())
	require.Equal(t, []netip.Addr{gid}, db.McastGroups())

	const slot = 8192
	for _, e := range []*end{a1, a2, a3, aNo, b1, bKey} {
		postRecvs(t, e, 4, slot)
	}
	ah, err := s.pd.CreateAH(AH{DGID: gid, UDPPort: db.Addr().Port()})
	require.NoError(t, err)
	require.Equal(t, netip.AddrPortFrom(group, db.Addr().Port()), ah.Dest())
	sizes := []int{1, 777, da.ActiveMTU().Bytes()}
	fill(s.buf[:len(sizes)*slot], 58)
	for i, n := range sizes {
		mcastSend(t, s, ah, qkey, uint64(i), i*slot, n)
	}
	for _, e := range []*end{a1, a2, b1} {
		requireMcastCopies(t, e, s, sizes, slot, db.Addr().Addr(), group)
		noWC(t, e.cq, 20*time.Millisecond)
		require.Equal(t, uint64(len(sizes)), e.qp.Counters().RcvdPkts)
	}
	for _, e := range []*end{a3, aNo, bKey} {
		noWC(t, e.cq, 20*time.Millisecond)
	}
	require.Equal(t, uint64(len(sizes)), bKey.qp.Counters().Unreliable.QKeyMismatch)
	require.Equal(t, uint64(len(sizes)), da.Counters().McastRcvd)
	require.Equal(t, uint64(len(sizes)), db.Counters().McastRcvd)
	// rcvd_pkts counts each group datagram once, however many QPs take a
	// copy, as rxe_rcv counts every packet it accepts before it hands a
	// multicast one to rxe_rcv_mcast_pkt (da receives nothing else).
	require.Equal(t, uint64(len(sizes)), da.Counters().RcvdPkts)
	require.Zero(t, da.Counters().McastDropped)
	require.Zero(t, da.Counters().UnknownQP)

	// da leaves the group once its last QP detaches.
	require.NoError(t, a2.qp.DetachMcast(gid, 0))
	require.NoError(t, a2.qp.Destroy())
	require.Equal(t, []netip.Addr{gid}, da.McastGroups())
	require.NoError(t, a1.qp.DetachMcast(gid, 0))
	require.Empty(t, da.McastGroups())
	mcastSend(t, s, ah, qkey, 9, 0, 64)
	wc := waitWC(t, b1.cq)
	require.Equal(t, uint32(GRHSize+64), wc.ByteLen)
	noWC(t, a1.cq, 20*time.Millisecond)
	require.Equal(t, uint64(len(sizes)), da.Counters().McastRcvd)
	require.Equal(t, uint64(len(sizes)+1), db.Counters().McastRcvd)
}

// TestUDMulticastWire: a UD send to a multicast handle leaves as a UDP
// datagram to the group's address and port that packet.Parse decodes as
// UD SEND Only to destination QP MulticastQPN, with the work request's
// Q_Key and the sender's QPN in its DETH, and whose ICRC, over the
// sender's address and the group's, is valid. The datagram is read from a
// socket the test joins to the group.
func TestUDMulticastWire(t *testing.T) {
	da, db := mcastDevices(t)
	gid := mcastGID()
	group := netip.AddrPortFrom(gid.Unmap(), da.Addr().Port())
	tap, err := netdev.ListenMulticastUDP(group, db.Addr().Addr(), netdev.Options{NoGSO: true, NoGRO: true})
	require.NoError(t, err)
	defer tap.Close()
	s := newTypedEnd(t, da, QPTypeUD)
	readyUD(t, s, 5)
	ah, err := s.pd.CreateAH(AH{DGID: gid, UDPPort: group.Port()})
	require.NoError(t, err)
	payload := []byte("multicast datagram of gorxe")
	copy(s.buf, payload)
	rc, err := tap.SyscallConn()
	require.NoError(t, err)
	testutil.SendQueuedOf(t, rc, 1, func(int) { mcastSend(t, s, ah, 0x4242, 1, 0, len(payload)) })
	msgs := []netdev.Message{{Buf: make([]byte, 9000)}}
	n, err := tap.ReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m := msgs[0]
	require.Equal(t, da.Addr().Addr(), m.Addr.Addr())
	require.Equal(t, group.Addr(), m.Local)
	pkt := m.Buf[:m.N]
	p, err := packet.Parse(pkt)
	require.NoError(t, err)
	require.Equal(t, packet.UDSendOnly, p.Opcode())
	require.Equal(t, uint32(MulticastQPN), p.DestQP())
	require.Equal(t, uint32(0x4242), p.DETH().QKey())
	require.Equal(t, s.qp.QPN(), p.DETH().SrcQP())
	require.Equal(t, payload, p.Payload())
	ph := packet.PseudoHeader{Src: m.Addr.Addr(), Dst: group.Addr(), SrcPort: m.Addr.Port(), DstPort: group.Port(), IPFlags: packet.IPv4FlagDF}
	var pre packet.ICRCPrefix
	crc, err := pre.ICRC(&ph, pkt)
	require.NoError(t, err)
	require.Equal(t, binary.LittleEndian.Uint32(pkt[len(pkt)-packet.ICRCSize:]), crc, "ICRC over IP ID 0 with DF")
}

// TestUDMulticastRefusals: AttachMcast and DetachMcast refuse QPs of other
// types than UD, GIDs that are not multicast or not of the device's
// family, and a detach from a group the QP is not attached to; a device
// on a pipe cannot send to a group. Destroy refuses a QP still attached
// to a group with ErrInUse (rxe_qp_chk_destroy's EBUSY), and the QP stays
// attached and usable; once detached it is destroyed. After Destroy and
// Device.Close AttachMcast and DetachMcast fail with ErrClosed, and Close
// leaves the device's groups, attached QPs or not.
func TestUDMulticastRefusals(t *testing.T) {
	da, _ := mcastDevices(t)
	gid := mcastGID()
	ud := newTypedEnd(t, da, QPTypeUD)
	for _, typ := range []QPType{QPTypeRC, QPTypeUC} {
		e := newTypedEnd(t, da, typ)
		require.ErrorIs(t, e.qp.AttachMcast(gid, 0), ErrInvalidArgument, "%v", typ)
		require.ErrorIs(t, e.qp.DetachMcast(gid, 0), ErrInvalidArgument, "%v", typ)
	}
	for _, g := range []string{"::ffff:127.0.0.9", "10.1.2.3", "ff0e::1", "::"} {
		err := ud.qp.AttachMcast(netip.MustParseAddr(g), 0)
		require.ErrorIs(t, err, ErrInvalidArgument, g)
	}
	require.ErrorIs(t, ud.qp.AttachMcast(netip.Addr{}, 0), ErrInvalidArgument)
	require.ErrorIs(t, ud.qp.DetachMcast(gid, 0), ErrInvalidArgument, "not attached")
	require.NoError(t, ud.qp.AttachMcast(gid.Unmap(), 0), "a plain IPv4 group address")
	require.ErrorIs(t, ud.qp.DetachMcast(mcastGID(), 0), ErrInvalidArgument, "another group")

	gone := newTypedEnd(t, da, QPTypeUD)
	other := mcastGID()
	require.NoError(t, gone.qp.AttachMcast(gid, 0))
	require.NoError(t, gone.qp.AttachMcast(other, 0))
	require.ErrorIs(t, gone.qp.Destroy(), ErrInUse, "attached to two groups")
	require.NoError(t, gone.qp.DetachMcast(other, 0), "the refused QP is still attached")
	require.ErrorIs(t, gone.qp.Destroy(), ErrInUse, "attached to one group")
	require.ElementsMatch(t, []netip.Addr{gid}, da.McastGroups())
	readyUD(t, gone, 9)
	require.Equal(t, QPSRTS, gone.qp.Query().State, "the refused QP still moves through its states")
	require.NoError(t, gone.qp.DetachMcast(gid, 0))
	require.NoError(t, gone.qp.Destroy())
	require.ErrorIs(t, gone.qp.AttachMcast(gid, 0), ErrClosed)
	require.ErrorIs(t, gone.qp.DetachMcast(gid, 0), ErrClosed)

	require.NoError(t, da.Close())
	require.Empty(t, da.McastGroups())
	require.ErrorIs(t, ud.qp.AttachMcast(gid, 0), ErrClosed)
	require.ErrorIs(t, ud.qp.DetachMcast(gid, 0), ErrClosed)

	pa, _ := newDevices(t, "pipe")
	pe := newTypedEnd(t, pa, QPTypeUD)
	_, err := pe.pd.CreateAH(AH{DGID: netip.MustParseAddr("239.1.2.3")})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "cannot send to or join a multicast group")
	// Nor does a pipe device join a group: there is no socket, and no
	// namespace, of its own to join it in.
	err = pe.qp.AttachMcast(netip.MustParseAddr("239.1.2.3"), 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "cannot send to or join a multicast group")
	require.Empty(t, pa.McastGroups())
}

// TestUDMulticastBounds: a device joins at most MaxMcastGrp groups and
// attaches at most MaxMcastQPAttach QPs to one; beyond, AttachMcast fails
// with ErrNoResources, and a detach makes room again.
func TestUDMulticastBounds(t *testing.T) {
	da, _ := mcastDevices(t)
	attr := da.Attr()
	require.Equal(t, maxMcastGroups, attr.MaxMcastGrp)
	require.Equal(t, maxMcastQPAttach, attr.MaxMcastQPAttach)
	require.Equal(t, maxMcastGroups*maxMcastQPAttach, attr.MaxTotalMcastQPAttach)

	pd, err := da.AllocPD()
	require.NoError(t, err)
	cq, err := da.CreateCQ(16, -1)
	require.NoError(t, err)
	qps := make([]*QP, attr.MaxMcastQPAttach+1)
	for i := range qps {
		qps[i], err = pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
	}
	gid := netip.MustParseAddr("::ffff:239.58.0.1")
	for _, qp := range qps[:attr.MaxMcastQPAttach] {
		require.NoError(t, qp.AttachMcast(gid, 0))
	}
	last := qps[attr.MaxMcastQPAttach]
	require.ErrorIs(t, last.AttachMcast(gid, 0), ErrNoResources)
	require.NoError(t, qps[0].DetachMcast(gid, 0))
	require.NoError(t, last.AttachMcast(gid, 0))

	// gid is one group; the others go up to the bound.
	for i := 1; i < attr.MaxMcastGrp; i++ {
		require.NoError(t, qps[0].AttachMcast(netip.MustParseAddr(fmt.Sprintf("::ffff:239.58.1.%d", i)), 0), "group %d", i)
	}
	require.Len(t, da.McastGroups(), attr.MaxMcastGrp)
	require.ErrorIs(t, qps[1].AttachMcast(netip.MustParseAddr("::ffff:239.58.2.1"), 0), ErrNoResources)
	require.NoError(t, qps[0].DetachMcast(netip.MustParseAddr("::ffff:239.58.1.1"), 0))
	require.NoError(t, qps[1].AttachMcast(netip.MustParseAddr("::ffff:239.58.2.1"), 0))
}

// blockSelfEnd returns a UD end on d whose QP is created with
// BlockSelfMcastLoopback (in RESET: readyUD brings it up).
func blockSelfEnd(t *testing.T, d *Device) *end {
	t.Helper()
	e := newTypedEnd(t, d, QPTypeUD)
	require.NoError(t, e.qp.Destroy())
	qp, err := e.pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq, BlockSelfMcastLoopback: true,
		Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	e.qp = qp
	return e
}

// TestUDMulticastBlockSelfLoopback: a QP created with
// BlockSelfMcastLoopback does not receive what it sends to a group it is
// attached to, and receives what another QP of its device sends there; a
// QP without it receives its own datagrams too.
func TestUDMulticastBlockSelfLoopback(t *testing.T) {
	da, _ := mcastDevices(t)
	const qkey = 0x77
	blocked := blockSelfEnd(t, da)
	plain := newTypedEnd(t, da, QPTypeUD)
	gid := mcastGID()
	for _, e := range []*end{blocked, plain} {
		readyUD(t, e, qkey)
		require.NoError(t, e.qp.AttachMcast(gid, 0))
		postRecvs(t, e, 4, 256)
	}
	for _, tc := range []struct {
		from     *end
		receives []*end
		none     *end
	}{
		{blocked, []*end{plain}, blocked},
		{plain, []*end{blocked, plain}, nil},
	} {
		ah, err := tc.from.pd.CreateAH(AH{DGID: gid, UDPPort: da.Addr().Port()})
		require.NoError(t, err)
		_, err = tc.from.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQKey: qkey,
			SGList: []SGE{tc.from.mr.SGE(0, 16)}})
		require.NoError(t, err)
		// The sender's CQ holds the send's completion and, if it receives
		// its own datagram, that receive's, in either order (the
		// loopback copy may be handled before the send completes).
		ends := []*end{tc.from}
		for _, e := range tc.receives {
			if e != tc.from {
				ends = append(ends, e)
			}
		}
		for _, e := range ends {
			want := 0
			if e == tc.from {
				want++
			}
			if slices.Contains(tc.receives, e) {
				want++
			}
			sends := 0
			for range want {
				wc := waitWC(t, e.cq)
				require.Equal(t, WCSuccess, wc.Status)
				if wc.Opcode == WCSend {
					require.Equal(t, tc.from, e, "a send completion on the sender's CQ only")
					require.Equal(t, uint64(1), wc.ID)
					sends++
					continue
				}
				require.Equal(t, WCRecv, wc.Opcode)
				require.Equal(t, tc.from.qp.QPN(), wc.SrcQP)
			}
			if e == tc.from {
				require.Equal(t, 1, sends, "the send's completion")
			}
		}
		if tc.none != nil {
			noWC(t, tc.none.cq, 20*time.Millisecond)
		}
	}
	noWC(t, blocked.cq, 20*time.Millisecond)
	noWC(t, plain.cq, 20*time.Millisecond)
}

// requireMcastCopies checks that e received one copy of each of the
// datagrams of sizes that s sent to group from address src, slot bytes
// apart in both buffers: its completion (the sender's QPN, the GRH flag,
// the source) and its GRH area (an IPv4 header after 20 zero bytes, or an
// IPv6 one, with the TTL or hop limit McastHops, src and group), then the
// payload byte for byte. src is compared without its zone.
func requireMcastCopies(t *testing.T, e, s *end, sizes []int, slot int, src, group netip.Addr) {
	t.Helper()
	for i, n := range sizes {
		wc := waitWC(t, e.cq)
		require.Equal(t, WCSuccess, wc.Status, "QP %#x datagram %d", e.qp.QPN(), i)
		require.Equal(t, uint64(1000+i), wc.ID)
		require.Equal(t, e.qp.QPN(), wc.QPNum)
		require.Equal(t, s.qp.QPN(), wc.SrcQP)
		require.Equal(t, uint32(GRHSize+n), wc.ByteLen)
		require.NotZero(t, wc.Flags&WCFlagGRH)
		require.Equal(t, src.WithZone(""), wc.Src.Addr().WithZone(""))
		e.qp.Query() // orders the test with the device's writes
		got := e.buf[i*slot : i*slot+GRHSize+n]
		if group.Is4() {
			require.Equal(t, make([]byte, 20), got[:20], "IPv4: the first 20 bytes of the GRH area are zero")
			require.Equal(t, byte(0x45), got[20], "GRH area: an IPv4 header")
			require.Equal(t, byte(McastHops), got[28], "GRH area: the TTL")
			require.Equal(t, src.As4(), [4]byte(got[32:36]), "GRH area: the sender's address")
			require.Equal(t, group.As4(), [4]byte(got[36:40]), "GRH area: the group's address")
		} else {
			require.Equal(t, byte(6), got[0]>>4, "GRH area: an IPv6 header")
			require.Equal(t, byte(17), got[6], "GRH area: next header UDP")
			require.Equal(t, byte(McastHops), got[7], "GRH area: the hop limit")
			require.Equal(t, src.As16(), [16]byte(got[8:24]), "GRH area: the sender's address")
			require.Equal(t, group.As16(), [16]byte(got[24:40]), "GRH area: the group's address")
		}
		require.Equal(t, s.buf[i*slot:i*slot+n], got[GRHSize:], "QP %#x datagram %d", e.qp.QPN(), i)
	}
}
