package rxe

import (
	"net/netip"
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

	peer, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), SocketOptions(Options{}))
	require.NoError(t, err)
	defer peer.Close()
	src := peer.LocalAddr()
	require.NotEqual(t, db.Addr().Port(), src.Port())

	h := packet.Headers{
		BTH:  packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: b.qp.QPN(), PSN: 1},
		DETH: packet.DETHFields{QKey: 9, SrcQP: 0x11},
	}
	ph := packet.PseudoHeader{Src: src.Addr(), Dst: db.Addr().Addr(), SrcPort: src.Port(), DstPort: db.Addr().Port(), IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, 256)
	n, err := packet.Build(buf, &h, []byte("hello"), &ph)
	require.NoError(t, err)
	_, err = peer.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: db.Addr()}})
	require.NoError(t, err)

	wc := waitWC(t, b.cq)
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, src, wc.Src)
	ah, err := b.pd.CreateAHFromWC(&wc, b.buf[:GRHSize])
	require.NoError(t, err)
	require.Equal(t, src.Addr(), ah.Dest().Addr())
	require.Equal(t, db.Addr().Port(), ah.Dest().Port(), "the answer goes to the peer's source port %d, where a kernel rxe peer does not listen", src.Port())
}
