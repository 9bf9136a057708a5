//go:build linux

package rxe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/cmsgtest"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tosReceiver is a plain UDP socket bound to addr (port 0) that reports
// the IP traffic class of what it receives (IP_RECVTOS, IPV6_RECVTCLASS).
type tosReceiver struct {
	fd   int
	port uint16
	v6   bool
}

func newTOSReceiver(t *testing.T, addr netip.Addr) *tosReceiver {
	t.Helper()
	r := &tosReceiver{v6: addr.Is6()}
	var sa unix.Sockaddr
	family := unix.AF_INET
	if r.v6 {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Addr: addr.As16()}
	} else {
		sa = &unix.SockaddrInet4{Addr: addr.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	r.fd = fd
	if r.v6 {
		require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1))
	} else {
		require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1))
	}
	// Bound the wait for a datagram: a device that sent nothing fails
	// the test instead of hanging it.
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}))
	require.NoError(t, unix.Bind(fd, sa))
	got, err := unix.Getsockname(fd)
	require.NoError(t, err)
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		r.port = uint16(a.Port)
	case *unix.SockaddrInet6:
		r.port = uint16(a.Port)
	}
	return r
}

// read returns the next datagram's payload and traffic class.
func (r *tosReceiver) read(t *testing.T) ([]byte, uint8) {
	t.Helper()
	buf, oob := make([]byte, 9000), make([]byte, 128)
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(r.fd, buf, oob, 0)
		if err != unix.EINTR {
			break
		}
	}
	require.NoError(t, err, "no datagram within 10 s")
	tc, ok, err := cmsgtest.TrafficClass(oob[:oobn], r.v6)
	require.NoError(t, err)
	require.True(t, ok, "no traffic class in the control messages")
	return buf[:n], tc
}

// TestTrafficClass: a device opened with Options.TrafficClass (on the
// socket options Listen uses) sends every
// packet with that IP traffic class (IPv4 TOS, IPv6 Traffic Class), and
// one opened without it with 0; the packet's ICRC is valid either way
// (the ICRC covers the field as ones).
func TestTrafficClass(t *testing.T) {
	tests := []struct {
		name string
		addr string
		tc   uint8
	}{
		{"ipv4", "127.0.0.1", 0xb8}, // DSCP 46 (EF)
		{"ipv4 ecn", "127.0.0.1", 0x6a},
		{"ipv4 default", "127.0.0.1", 0},
		{"ipv6", "::1", 0x68},
		{"ipv6 default", "::1", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := netip.MustParseAddr(tc.addr)
			if addr.Is6() && !hostHasIPv6Loopback() {
				t.Skip("no IPv6 loopback address on this host")
			}
			d := tcDevice(t, netip.AddrPortFrom(addr, 0), tc.tc)
			peer := newTOSReceiver(t, addr)
			e := newEnd(t, d, 4096)
			local := e.qp.Info(1)
			remote := ConnInfo{GID: addr, UDPPort: peer.port, QPN: 0x99, PSN: 100, MTU: MTU1024}
			require.NoError(t, e.qp.Connect(local, remote, ConnectOptions{}))
			_, err := e.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{e.mr.SGE(0, 64)}, Flags: SendSignaled})
			require.NoError(t, err)

			pkt, got := peer.read(t)
			require.Equal(t, tc.tc, got)
			p, err := packet.Parse(pkt)
			require.NoError(t, err)
			require.Equal(t, packet.RCSendOnly, p.Opcode())
			ph := packet.PseudoHeader{Src: addr, Dst: addr, SrcPort: d.Addr().Port(), DstPort: peer.port}
			if addr.Is4() {
				ph.IPFlags = packet.IPv4FlagDF // rxe sends IPv4 with DF and ID 0
			}
			require.NoError(t, ph.CheckICRC(pkt))
		})
	}
}

// tcDevice opens a device with traffic class tc on a socket of its own at
// addr (port 0: an ephemeral one; Listen's port 0 is 4791, which other
// tests and a kernel rxe may hold), with the socket options Listen gives
// (SocketOptions).
func tcDevice(t *testing.T, addr netip.AddrPort, tc uint8) *Device {
	t.Helper()
	opts := Options{TrafficClass: tc, CompVectors: 1}
	c, err := netdev.ListenUDP(addr, SocketOptions(opts))
	require.NoError(t, err)
	opts.OwnConn, opts.Name = true, "rxe-tc"
	d, err := Open(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// hostHasIPv6Loopback reports whether a UDP socket can be bound to ::1
// (a host or container without IPv6 has none).
func hostHasIPv6Loopback() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}) == nil
}

// TestREQTrafficClass: a Dial's REQ carries the device's traffic class in
// its primary path, as rdma_cm carries an id's TOS, so that a peer's QP
// answers with it too; a device without one sends 0.
func TestREQTrafficClass(t *testing.T) {
	for _, tc := range []uint8{0x68, 0} {
		d := tcDevice(t, netip.MustParseAddrPort("127.0.0.1:0"), tc)
		e := newEnd(t, d, 4096)
		from, to := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.2:7471")
		req := buildREQ(d, e.qp, from, to, 1, &CMOptions{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MTU: MTU1024})
		require.Equal(t, tc, req.Primary.TrafficClass)
		var mad [packet.MADSize]byte
		packet.EncodeCM(mad[:], 1, &req)
		_, area, err := packet.DecodeCMHeader(mad[:])
		require.NoError(t, err)
		var got packet.REQ
		require.NoError(t, got.Decode(area))
		require.Equal(t, tc, got.Primary.TrafficClass, "on the wire")
	}
}

// TestQPTrafficClass: an RC QP whose address vector has a traffic class
// sends with it, whatever the device's; one whose address vector has 0
// sends with the device's.
func TestQPTrafficClass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dev, av uint8
		want    uint8
	}{
		{"av on a plain device", 0, 0x28, 0x28},
		{"av over the device's", 0xb8, 0x28, 0x28},
		{"the device's", 0xb8, 0, 0xb8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := netip.MustParseAddr("127.0.0.1")
			d := tcDevice(t, netip.AddrPortFrom(addr, 0), tc.dev)
			peer := newTOSReceiver(t, addr)
			e := newEnd(t, d, 4096)
			for _, s := range []struct {
				attr QPAttr
				mask QPAttrMask
			}{
				{QPAttr{State: QPSInit, Port: 1}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
				{QPAttr{State: QPSRTR, AH: AH{DGID: addr, UDPPort: peer.port, TrafficClass: tc.av}, PathMTU: MTU1024, DestQPN: 0x99, RQPSN: 7},
					QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
				{QPAttr{State: QPSRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
					QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic},
			} {
				require.NoError(t, e.qp.Modify(&s.attr, s.mask))
			}
			_, err := e.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{e.mr.SGE(0, 64)}, Flags: SendSignaled})
			require.NoError(t, err)
			_, got := peer.read(t)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestAcceptTakesREQTrafficClass: the passive side of a connection takes
// the traffic class of the REQ's path into its QP's address vector, as
// the kernel's CM does, so it answers with the class the active side's
// device sends with.
func TestAcceptTakesREQTrafficClass(t *testing.T) {
	ca, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), SocketOptions(Options{TrafficClass: 0x68}))
	require.NoError(t, err)
	cb, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), ca.LocalAddr().Port()), SocketOptions(Options{}))
	if err != nil {
		ca.Close()
		t.Skipf("the active side's port is taken on 127.0.0.2: %v", err)
	}
	da, err := Open(ca, Options{Name: "tc-a", OwnConn: true, TrafficClass: 0x68})
	require.NoError(t, err)
	t.Cleanup(func() { da.Close() })
	db, err := Open(cb, Options{Name: "tc-b", OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc, sc := listenOn(t, da, db, 7471, CMOptions{}).connect(ctx, t, CMOptions{})
	require.Equal(t, uint8(0x68), sc.QP.Query().AH.TrafficClass, "the passive QP's class, from the REQ")
	require.Zero(t, cc.QP.Query().AH.TrafficClass, "the active QP sends with its device's class")
}

// TestUnreliableTrafficClass: a UD datagram carries its address handle's
// traffic class, a UC QP's packets its address vector's, and either
// without one the device's.
func TestUnreliableTrafficClass(t *testing.T) {
	addr := netip.MustParseAddr("127.0.0.1")
	d := tcDevice(t, netip.AddrPortFrom(addr, 0), 0xb8)
	peer := newTOSReceiver(t, addr)

	ud := newTypedEnd(t, d, QPTypeUD)
	readyUD(t, ud, 0x1234)
	for _, tc := range []struct{ ah, want uint8 }{{0x48, 0x48}, {0, 0xb8}} {
		ah, err := ud.pd.CreateAH(AH{DGID: addr, UDPPort: peer.port, TrafficClass: tc.ah})
		require.NoError(t, err)
		require.Equal(t, tc.ah, ah.TrafficClass())
		_, err = ud.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: 0x99, RemoteQKey: 0x1234,
			SGList: []SGE{{Addr: ud.mr.Addr(), Length: 16, LKey: ud.mr.LKey()}}})
		require.NoError(t, err)
		_, got := peer.read(t)
		require.Equal(t, tc.want, got, "UD with an address handle of class %#x", tc.ah)
	}

	for _, tc := range []struct{ av, want uint8 }{{0x30, 0x30}, {0, 0xb8}} {
		uc := newTypedEnd(t, d, QPTypeUC)
		require.NoError(t, uc.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite},
			QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		require.NoError(t, uc.qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: addr, UDPPort: peer.port, TrafficClass: tc.av},
			PathMTU: MTU1024, DestQPN: 0x99, RQPSN: 100}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN))
		require.NoError(t, uc.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 100}, QPAttrState|QPAttrSQPSN))
		_, err := uc.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: uc.mr.Addr(), Length: 16, LKey: uc.mr.LKey()}}})
		require.NoError(t, err)
		_, got := peer.read(t)
		require.Equal(t, tc.want, got, "UC with an address vector of class %#x", tc.av)
	}
}
