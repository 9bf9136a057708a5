package rxe

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestCountersCleanTransfer: device and QP counters after a SEND of three
// packets and a READ of five responses, without loss.
func TestCountersCleanTransfer(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			// A 4.3 s ACK timeout (20): the test asserts that no transport
			// retry happened, and a loaded machine can hold a packet past
			// the default 67 ms.
			o := qpOpts{timeout: 20}
			a, b := smallPair(t, kind, o, o)
			_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 4096)}})
			require.NoError(t, err)
			_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 3000)}})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			waitWCs(t, b.cq, 1)
			_, err = a.qp.PostSend(SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(8192, 5000)},
				RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{2, WCSuccess, WCRDMARead}}, briefs(waitWCs(t, a.cq, 1)))

			ac, bc := a.qp.Counters(), b.qp.Counters()
			require.Zero(t, ac.Requester.Retransmits, "a clean run")
			require.Equal(t, uint64(4), ac.Requester.PacketsSent, "3 SEND packets, 1 READ request")
			require.Equal(t, uint64(3000), ac.Requester.PayloadSent)
			require.Equal(t, uint64(5000), ac.Requester.ReadBytes)
			require.Equal(t, uint64(2), ac.Requester.Completions)
			require.Equal(t, uint64(1), ac.Requester.RDMASends, "the SEND, not the READ (rxe rdma_sends)")
			require.Equal(t, uint64(1), bc.Responder.RDMARecvs)
			require.Equal(t, uint64(3000), bc.Responder.BytesPlaced)
			require.Equal(t, uint64(5), bc.Responder.ReadResponses, "5000 bytes at 1024")
			require.Equal(t, uint64(5000), bc.Responder.BytesRead)
			require.Equal(t, uint64(4), bc.RcvdPkts)
			// BTH + payload + ICRC, no pad: 3 × 16 + 3000, and the READ
			// request with its RETH: 12 + 16 + 4.
			require.Equal(t, uint64(3048+32), bc.RcvdBytes)
			acks := bc.Responder.AcksSent
			require.GreaterOrEqual(t, acks, uint64(1))
			require.LessOrEqual(t, acks, uint64(3))
			// The device counters move after WriteBatch returns, maybe
			// after the peer has seen the packet, and a QP's RcvdPkts
			// after the engine has posted the completion: a gets b's ACKs
			// and the read responses.
			require.Eventually(t, func() bool {
				da, db := a.dev.Counters(), b.dev.Counters()
				return da.SentPkts == 4 && a.qp.Counters().SentPkts == 4 && db.RcvdPkts == 4 && a.qp.Counters().RcvdPkts == acks+5 &&
					db.SentPkts == acks+5 && b.qp.Counters().SentPkts == acks+5 && da.RcvdPkts == acks+5
			}, testutil.Bound(), time.Millisecond, "a %+v %+v\nb %+v %+v", a.dev.Counters(), a.qp.Counters(), b.dev.Counters(), b.qp.Counters())
			for _, c := range []Counters{a.dev.Counters(), b.dev.Counters()} {
				require.Zero(t, c.BadICRC+c.Malformed+c.UnknownQP+c.SendErr+c.QPErrors+c.EventsDropped)
			}
			require.Zero(t, ac.BadSource+ac.BadState+bc.BadSource+bc.BadState)
		})
	}
}

// rawSend builds a SEND ONLY of payload for qpn, with the ICRC of ph
// (nil: a zero ICRC slot).
func rawSend(t *testing.T, qpn uint32, psn uint32, payload []byte, ph *packet.PseudoHeader) []byte {
	t.Helper()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: qpn, PSN: packet.PSN(psn), AckReq: true}}
	buf := make([]byte, 256)
	n, err := packet.Build(buf, &h, payload, ph)
	require.NoError(t, err)
	return buf[:n]
}

// TestCountersInjected: a datagram with a bad ICRC, a malformed one and
// one for no QP are counted and dropped; the QP is not disturbed (rxe_rcv,
// rxe_icrc_check; docs/threading.md).
func TestCountersInjected(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		da, db, ca, cb := pipeDevices(t)
		a := smallEnd(t, da, nil, qpOpts{})
		b := smallEnd(t, db, nil, qpOpts{})
		link(t, a, b, qpOpts{}, qpOpts{})
		ph := packet.PseudoHeader{Src: ca.LocalAddr().Addr(), Dst: cb.LocalAddr().Addr(),
			SrcPort: ca.LocalAddr().Port(), DstPort: cb.LocalAddr().Port(), IPFlags: packet.IPv4FlagDF}
		inject := func(p []byte) {
			t.Helper()
			n, err := ca.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: cb.LocalAddr()}})
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		injectedCounters(t, a, b, ph, inject)
	})
	t.Run("udp", func(t *testing.T) {
		a, b := smallPair(t, "udp", qpOpts{}, qpOpts{})
		// A third socket on a's address sends toward b.
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		defer conn.Close()
		src := conn.LocalAddr().(*net.UDPAddr).AddrPort()
		dst := b.dev.Addr()
		ph := packet.PseudoHeader{Src: src.Addr().Unmap(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port(), IPFlags: packet.IPv4FlagDF}
		inject := func(p []byte) {
			t.Helper()
			_, err := conn.WriteToUDPAddrPort(p, netip.AddrPortFrom(dst.Addr(), dst.Port()))
			require.NoError(t, err)
		}
		injectedCounters(t, a, b, ph, inject)
	})
}

func injectedCounters(t *testing.T, a, b *end, ph packet.PseudoHeader, inject func([]byte)) {
	t.Helper()
	psn := b.qp.Query().RQPSN
	before := b.dev.Counters()

	// A valid SEND with one payload byte flipped after the ICRC.
	p := rawSend(t, b.qp.QPN(), psn, []byte("hello, responder"), &ph)
	p[packet.BTHSize] ^= 0x01
	inject(p)
	require.Eventually(t, func() bool { return b.dev.Counters().BadICRC == before.BadICRC+1 }, testutil.Bound(), time.Millisecond)

	// Too short to be a RoCE packet.
	inject([]byte{0x04, 0, 0xFF})
	require.Eventually(t, func() bool { return b.dev.Counters().Malformed == before.Malformed+1 }, testutil.Bound(), time.Millisecond)

	// Well formed, good ICRC, but for a QP that does not exist.
	inject(rawSend(t, 0xABCDE, psn, []byte("nobody"), &ph))
	require.Eventually(t, func() bool { return b.dev.Counters().UnknownQP == before.UnknownQP+1 }, testutil.Bound(), time.Millisecond)

	after := b.dev.Counters()
	require.Equal(t, before.RcvdPkts, after.RcvdPkts, "none was handed to a QP")
	require.Zero(t, b.qp.Counters().RcvdPkts)
	require.Equal(t, psn, b.qp.Query().RQPSN)

	// The connection still works, from the first PSN: the corrupted SEND
	// consumed nothing.
	_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 64)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	require.Equal(t, []wcBrief{{1, WCSuccess, WCRecv}}, briefs(waitWCs(t, b.cq, 1)))
	require.Equal(t, before.BadICRC+1, b.dev.Counters().BadICRC)

	// The same SEND uncorrupted, at the next PSN, is taken: the ICRC was
	// the only thing wrong with it.
	_, err = b.qp.PostRecv(RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(64, 64)}})
	require.NoError(t, err)
	inject(rawSend(t, b.qp.QPN(), (psn+1)&0xFFFFFF, []byte("hello, responder"), &ph))
	rw := waitWCs(t, b.cq, 1)
	require.Equal(t, []wcBrief{{2, WCSuccess, WCRecv}}, briefs(rw))
	require.Equal(t, uint32(16), rw[0].ByteLen)
	syncMem(a, b)
	require.Equal(t, "hello, responder", string(b.buf[64:80]))
	require.Equal(t, before.BadICRC+1, b.dev.Counters().BadICRC)
}
