package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeReceived makes a UDPConn bound to local whose receive header 0
// holds what recvmmsg would have left there: a datagram of size bytes
// from 127.0.0.9:7 with control data oob and a control length of
// controllen (len(oob) if negative).
func fakeReceived(local netip.AddrPort, size int, oob []byte, controllen int) *UDPConn {
	c := &UDPConn{local: local, wildcard: local.Addr().IsUnspecified(), batch: DefaultBatchSize, gro: true}
	c.rx = newRecvMmsg(1, recvOOBSize)
	c.grx.init(1)
	c.grx.bufs[0] = make([]byte, groBufSize)
	h := &c.rx.hdrs[0]
	h.Len = uint32(size)
	h.Hdr.Namelen = uint32(putSockaddr(&c.rx.names[0], netip.MustParseAddrPort("127.0.0.9:7"), false))
	copy(c.rx.oobAt(0), oob)
	if controllen < 0 {
		controllen = len(oob)
	}
	h.Hdr.SetControllen(controllen)
	return c
}

// pktinfo4 is an IP_PKTINFO control message for a datagram sent to dst.
func pktinfo4(dst netip.Addr) []byte {
	data := make([]byte, unix.SizeofInet4Pktinfo)
	a := dst.As4()
	copy(data[8:12], a[:]) // ipi_addr
	return cmsgBytes(unix.IPPROTO_IP, unix.IP_PKTINFO, data)
}

// TestRecvInfoDestination: Local is the IP_PKTINFO destination on a
// socket bound to a wildcard address, the bound address otherwise and
// whenever the kernel gave none, and recvInfo reads no further than the
// control buffer whatever length the header reports.
func TestRecvInfoDestination(t *testing.T) {
	bound := netip.MustParseAddrPort("127.0.0.1:4791")
	wild := netip.MustParseAddrPort("0.0.0.0:4791")
	dst := netip.MustParseAddr("127.0.0.3")
	tests := []struct {
		name       string
		local      netip.AddrPort
		oob        []byte
		controllen int
		want       netip.Addr
	}{
		{"wildcard with pktinfo", wild, pktinfo4(dst), -1, dst},
		{"wildcard without pktinfo", wild, nil, -1, wild.Addr()},
		{"bound ignores pktinfo", bound, pktinfo4(dst), -1, bound.Addr()},
		{"bound without pktinfo", bound, nil, -1, bound.Addr()},
		{"control length beyond the buffer", wild, pktinfo4(dst), recvOOBSize + 64, dst},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeReceived(tc.local, 10, tc.oob, tc.controllen)
			require.Equal(t, tc.want, c.recvInfo(0).dst)
		})
	}
}

// TestFillGROSegments: a received buffer is split at the UDP_GRO segment
// size and counts in Stats.GROBuffers only when the kernel coalesced
// several datagrams into it (a segment size below its length); without a
// segment size, or with one as long as the buffer, it is one datagram.
func TestFillGROSegments(t *testing.T) {
	gro := func(seg uint32) []byte {
		return cmsgBytes(unix.SOL_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint32(nil, seg))
	}
	tests := []struct {
		name      string
		size      int
		oob       []byte
		want      []int
		coalesced uint64
	}{
		{"coalesced", 250, gro(100), []int{100, 100, 50}, 1},
		{"segment size equal to the buffer", 100, gro(100), []int{100}, 0},
		{"segment size beyond the buffer", 100, gro(200), []int{100}, 0},
		{"no segment size", 300, nil, []int{300}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeReceived(netip.MustParseAddrPort("127.0.0.1:4791"), tc.size, tc.oob, -1)
			c.fillGRO(1)
			msgs := newMsgs(len(tc.want)+1, 0)
			n := c.splitGRO(msgs)
			var got []int
			for _, m := range msgs[:n] {
				got = append(got, m.N)
				require.Equal(t, netip.MustParseAddrPort("127.0.0.9:7"), m.Addr)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.coalesced, c.Stats().GROBuffers)
		})
	}
}
