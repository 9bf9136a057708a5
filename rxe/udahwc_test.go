package rxe

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestUDAHFromWCIgnoresEntropyPort: kernel rxe sends every QP's packets
// from UDP source port 0xC000 + hash(QPN) (rxe_qp_init_req) and listens
// only on 4791; RoCEv2 answers go to the RoCE port, never to the source
// port. A UD datagram from such a peer (here: a socket on another port
// than the receiving device's) must give an AH whose destination is the
// RoCE port the device itself uses, not the peer's entropy source port.
func TestUDAHFromWCIgnoresEntropyPort(t *testing.T) {
	_, db := newDevices(t, "udp")
	b := newTypedEnd(t, db, QPTypeUD)
	readyUD(t, b, 9)
	postRecvs(t, b, 1, 2048)

	src := sendUDFromPeer(t, db, b.qp.QPN(), 0)
	require.NotEqual(t, db.Addr().Port(), src.Port())

	wc := waitWC(t, b.cq)
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, src, wc.Src)
	ah, err := b.pd.CreateAHFromWC(&wc, b.buf[:GRHSize])
	require.NoError(t, err)
	require.Equal(t, src.Addr(), ah.Dest().Addr())
	require.Equal(t, db.Addr().Port(), ah.Dest().Port(), "the answer goes to the peer's source port %d, where a kernel rxe peer does not listen", src.Port())
}

// TestUDGRHCarriesIPHeaderFields: a UD datagram's GRH area carries the
// traffic class and TTL it arrived with, as kernel rxe's copy of the
// received IP header does (rxe_resp.c execute), and CreateAHFromWC answers
// with that traffic class and, as hop limit, that TTL (libibverbs
// ibv_init_ah_from_wc takes both from the IPv4 header in the GRH area).
func TestUDGRHCarriesIPHeaderFields(t *testing.T) {
	_, db := newDevices(t, "udp")
	b := newTypedEnd(t, db, QPTypeUD)
	readyUD(t, b, 9)
	postRecvs(t, b, 1, 2048)

	sendUDFromPeer(t, db, b.qp.QPN(), 0xb8)

	wc := waitWC(t, b.cq)
	require.Equal(t, WCSuccess, wc.Status)
	grh := b.buf[:GRHSize]
	require.Equal(t, byte(0x45), grh[20])
	require.Equal(t, byte(0xb8), grh[21], "the TOS the datagram arrived with")
	require.Equal(t, defaultTTL(t), grh[28], "the TTL the datagram arrived with")
	ah, err := b.pd.CreateAHFromWC(&wc, grh)
	require.NoError(t, err)
	require.Equal(t, uint8(0xb8), ah.TrafficClass())
	require.Equal(t, defaultTTL(t), ah.attr.HopLimit)
}

// sendUDFromPeer sends a UD SEND ONLY of "hello" (Q_Key 9) to QP qpn of d
// from a plain socket on 127.0.0.1, with the IP traffic class tos, and
// returns the socket's address.
func sendUDFromPeer(t *testing.T, d *Device, qpn uint32, tos uint8) netip.AddrPort {
	t.Helper()
	peer, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), SocketOptions(Options{}))
	require.NoError(t, err)
	t.Cleanup(func() { peer.Close() })
	src := peer.LocalAddr()
	h := packet.Headers{
		BTH:  packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: qpn, PSN: 1},
		DETH: packet.DETHFields{QKey: 9, SrcQP: 0x11},
	}
	ph := packet.PseudoHeader{Src: src.Addr(), Dst: d.Addr().Addr(), SrcPort: src.Port(), DstPort: d.Addr().Port(), IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, 256)
	n, err := packet.Build(buf, &h, []byte("hello"), &ph)
	require.NoError(t, err)
	_, err = peer.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: d.Addr(), TOS: tos}})
	require.NoError(t, err)
	return src
}

// defaultTTL is the host's IPv4 default TTL, what loopback datagrams
// arrive with.
func defaultTTL(t *testing.T) uint8 {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_default_ttl")
	require.NoError(t, err)
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return uint8(v)
}

// TestAHFromWCGRHVersion: CreateAHFromWC tells an IPv6 GRH area from an
// IPv4 one by the IPv6 version nibble, so an IPv6 source address whose
// 13th byte looks like an IPv4 version and header length is still read as
// IPv6 (with its traffic class and flow label); an area holding neither is
// refused.
func TestAHFromWCGRHVersion(t *testing.T) {
	checkGoroutines(t)
	p4a, p4b := netdev.NewPipe()
	d4, _ := openPair(t, p4a, p4b)
	p6a, p6b := netdev.NewPipeWith(netdev.PipeOptions{AddrA: netip.MustParseAddrPort("[fd00::1]:4791"), AddrB: netip.MustParseAddrPort("[fd00::2]:4791")})
	d6, _ := openPair(t, p6a, p6b)
	pd4, err := d4.AllocPD()
	require.NoError(t, err)
	pd6, err := d6.AllocPD()
	require.NoError(t, err)
	v6 := netip.MustParseAddr("2001:db8::4500:1")
	tests := []struct {
		name      string
		grh       func() []byte
		want      netip.Addr
		tc        uint8
		flowLabel uint32
		hopLimit  uint8
		err       bool
	}{
		{"ipv6", func() []byte {
			g := make([]byte, GRHSize)
			binary.BigEndian.PutUint32(g, 6<<28|0x68<<20|0x12345)
			g[7] = 17 // the IPv6 hop limit
			copy(g[8:24], v6.AsSlice())
			return g
		}, v6, 0x68, 0x12345, 17, false},
		{"ipv4", func() []byte {
			g := make([]byte, GRHSize)
			g[20], g[21] = 0x45, 0x2e
			g[28] = 61 // the IPv4 TTL
			copy(g[32:36], []byte{192, 0, 2, 7})
			return g
		}, netip.MustParseAddr("192.0.2.7"), 0x2e, 0, 61, false},
		{"neither", func() []byte { return make([]byte, GRHSize) }, netip.Addr{}, 0, 0, 0, true},
		{"short", func() []byte { return make([]byte, GRHSize-1) }, netip.Addr{}, 0, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pd := pd4
			if tc.want.Is6() {
				pd = pd6
			}
			ah, err := pd.CreateAHFromWC(&WC{Flags: WCFlagGRH}, tc.grh())
			if tc.err {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, ah.Dest().Addr())
			require.Equal(t, tc.tc, ah.TrafficClass())
			require.Equal(t, tc.flowLabel, ah.attr.FlowLabel)
			require.Equal(t, tc.hopLimit, ah.attr.HopLimit, "the hop limit the datagram arrived with (ibv_init_ah_from_wc)")
		})
	}
}
