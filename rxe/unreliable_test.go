package rxe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// lossyConn drops the outgoing datagrams for which drop returns true.
type lossyConn struct {
	netdev.Conn
	mu      sync.Mutex
	drop    func(b []byte) bool
	scratch []netdev.Message
}

func (c *lossyConn) WriteBatch(msgs []netdev.Message) (int, error) {
	c.mu.Lock()
	keep := c.scratch[:0]
	for _, m := range msgs {
		if c.drop == nil || !c.drop(m.Buf[:m.N]) {
			keep = append(keep, m)
		}
	}
	c.scratch = keep[:0]
	c.mu.Unlock()
	if len(keep) > 0 {
		if n, err := c.Conn.WriteBatch(keep); err != nil {
			return min(n, len(msgs)), err
		}
	}
	return len(msgs), nil
}

// newLossyDevices returns two devices over kind whose first one's sends
// pass through a lossyConn.
func newLossyDevices(t *testing.T, kind string) (*Device, *Device, *lossyConn) {
	ca, cb := connPair(t, kind)
	lc := &lossyConn{Conn: ca}
	da, db := openPair(t, lc, cb)
	return da, db, lc
}

func newTypedEnd(t *testing.T, d *Device, typ QPType) *end {
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(1024, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	return &end{dev: d, pd: pd, cq: cq, qp: qp, mr: mr, buf: buf}
}

// connectUC takes two UC QPs to RTS, each aimed at the other.
func connectUC(t *testing.T, a, b *end) {
	aimUC(t, a, b)
	aimUC(t, b, a)
}

// aimUC takes me's UC QP from RESET to RTS aimed at peer's QP (MTU 1024,
// PSNs 100 both ways).
func aimUC(t *testing.T, me, peer *end) {
	t.Helper()
	require.NoError(t, me.qp.Modify(&QPAttr{State: QPSInit, PKeyIndex: 0, Port: 1, AccessFlags: AccessRemoteWrite},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, me.qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: peer.dev.GID(), UDPPort: peer.dev.Addr().Port()},
		PathMTU: MTU1024, DestQPN: peer.qp.QPN(), RQPSN: 100},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN))
	require.NoError(t, me.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 100}, QPAttrState|QPAttrSQPSN))
}

// readyUD takes a UD QP to RTS with Q_Key qkey.
func readyUD(t *testing.T, e *end, qkey uint32) {
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSInit, Port: 1, QKey: qkey}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrQKey))
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSRTR}, QPAttrState))
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 7}, QPAttrState|QPAttrSQPSN))
}

// aimUnreliable readies a and b, ends of type typ, for wr to go from a
// to b: a UC pair connected (connectUC), or UD QPs in RTS with Q_Key qkey
// (readyUD) and wr addressed to b (an AH for b's device, b's QPN, qkey).
func aimUnreliable(t *testing.T, typ QPType, a, b *end, qkey uint32, wr *SendWR) {
	t.Helper()
	if typ == QPTypeUC {
		connectUC(t, a, b)
		return
	}
	wr.AH, wr.RemoteQPN, wr.RemoteQKey = aimUD(t, a, b, qkey), b.qp.QPN(), qkey
}

// aimUD takes the UD QPs of a and b to RTS with Q_Key qkey (readyUD) and
// returns an address handle of a's for b's device.
func aimUD(t *testing.T, a, b *end, qkey uint32) *AddrHandle {
	t.Helper()
	readyUD(t, a, qkey)
	readyUD(t, b, qkey)
	ah, err := a.pd.CreateAH(AH{DGID: b.dev.GID(), UDPPort: b.dev.Addr().Port()})
	require.NoError(t, err)
	return ah
}

func postRecvs(t *testing.T, e *end, n, size int) {
	for i := range n {
		_, err := e.qp.PostRecv(RecvWR{ID: uint64(1000 + i), SGList: []SGE{{Addr: e.mr.Addr() + uint64(i*size), Length: uint32(size), LKey: e.mr.LKey()}}})
		require.NoError(t, err)
	}
}

func TestUCSendAndWrite(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			da, db := newDevices(t, kind)
			a, b := newTypedEnd(t, da, QPTypeUC), newTypedEnd(t, db, QPTypeUC)
			connectUC(t, a, b)
			const slot = 8192
			postRecvs(t, b, 4, slot)
			fill(a.buf[:64<<10], 1)
			for i, tc := range []struct {
				op  WROpcode
				n   int
				imm bool
			}{{WRSend, 2, false}, {WRSend, 4096, false}, {WRSendWithImm, 3000, true}} {
				_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: tc.op, Imm: 0xABCD, Flags: SendSignaled,
					SGList: []SGE{{Addr: a.mr.Addr() + uint64(i*slot), Length: uint32(tc.n), LKey: a.mr.LKey()}}})
				require.NoError(t, err)
				wc := waitWC(t, a.cq)
				require.Equal(t, WCSuccess, wc.Status)
				rwc := waitWC(t, b.cq)
				require.Equal(t, WCSuccess, rwc.Status)
				require.Equal(t, uint64(1000+i), rwc.ID)
				require.Equal(t, uint32(tc.n), rwc.ByteLen)
				require.Equal(t, tc.imm, rwc.Flags&WCFlagWithImm != 0)
				syncMem(a, b)
				require.Equal(t, a.buf[i*slot:i*slot+tc.n], b.buf[i*slot:i*slot+tc.n])
			}
			// RDMA WRITE (no receive WQE, no receive completion), then
			// WRITE WITH IMM (one receive completion, the write's length).
			dst := b.mr.Addr() + 256<<10
			_, err := a.qp.PostSend(SendWR{ID: 10, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: dst, RKey: b.mr.RKey(),
				SGList: []SGE{{Addr: a.mr.Addr(), Length: 5000, LKey: a.mr.LKey()}}},
				SendWR{ID: 11, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, Imm: 7, RemoteAddr: dst + 8192, RKey: b.mr.RKey(),
					SGList: []SGE{{Addr: a.mr.Addr() + 8192, Length: 2048, LKey: a.mr.LKey()}}})
			require.NoError(t, err)
			require.Equal(t, uint64(10), waitWC(t, a.cq).ID)
			require.Equal(t, uint64(11), waitWC(t, a.cq).ID)
			rwc := waitWC(t, b.cq)
			require.Equal(t, WCRecvRDMAWithImm, rwc.Opcode)
			require.Equal(t, uint32(2048), rwc.ByteLen)
			require.Equal(t, uint32(7), rwc.Imm)
			syncMem(a, b)
			require.Equal(t, a.buf[:5000], b.buf[256<<10:256<<10+5000])
			require.Equal(t, a.buf[8192:8192+2048], b.buf[256<<10+8192:256<<10+8192+2048])
			require.Equal(t, uint32(100+1+4+3+5+2), a.qp.Query().SQPSN, "one PSN per packet, MTU 1024")
			require.Equal(t, a.qp.Query().SQPSN, b.qp.Query().RQPSN)
		})
	}
}

// TestUCLossDropsMessage: losing the second packet of a 4 KiB SEND drops
// that message at the receiver (the rest of its packets are discarded);
// the next message resynchronises and lands in the same receive WQE,
// intact. The sender completes both: UC has no acknowledgements.
func TestUCLossDropsMessage(t *testing.T) {
	da, db, lc := newLossyDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUC), newTypedEnd(t, db, QPTypeUC)
	connectUC(t, a, b)
	lc.mu.Lock()
	lc.drop = func(p []byte) bool { return packet.BTH(p).PSN() == 101 }
	lc.mu.Unlock()
	postRecvs(t, b, 2, 8192)
	fill(a.buf[:16384], 2)
	for i := range 2 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled,
			SGList: []SGE{{Addr: a.mr.Addr() + uint64(i*8192), Length: 4096, LKey: a.mr.LKey()}}})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	}
	rwc := waitWC(t, b.cq)
	require.Equal(t, uint64(1000), rwc.ID, "the first WQE takes the second message")
	syncMem(a, b)
	require.Equal(t, a.buf[8192:8192+4096], b.buf[:4096])
	noWC(t, b.cq, 50*time.Millisecond)
	c := b.qp.Counters().Unreliable
	require.Equal(t, uint64(1), c.MessagesDropped)
	require.Equal(t, uint64(2), c.OutOfSeq, "the two packets after the gap")
	require.Equal(t, uint64(1), c.RDMARecvs)
}

func TestUCModifyAttributes(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	e := newTypedEnd(t, da, QPTypeUC)
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	av := QPAttr{State: QPSRTR, AH: AH{DGID: da.GID()}, PathMTU: MTU1024, DestQPN: 0x20, RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 1}
	err := e.qp.Modify(&av, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer)
	require.ErrorIs(t, err, ErrInvalidArgument, "UC takes no responder resources nor RNR timer")
	require.NoError(t, e.qp.Modify(&av, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN))
	err = e.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7}, QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry)
	require.ErrorIs(t, err, ErrInvalidArgument, "UC has no retry")
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 1}, QPAttrState|QPAttrSQPSN))
	_, err = e.qp.PostSend(SendWR{Opcode: WRRDMARead, SGList: []SGE{{Addr: e.mr.Addr(), Length: 8, LKey: e.mr.LKey()}}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, requester.ErrUnsupportedOpcode)
}

func TestUDSendRecv(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			da, db := newDevices(t, kind)
			a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
			const qkey = 0x11223344
			ah := aimUD(t, a, b, qkey)
			const slot = 8192 // room for the GRH area and a 4096-byte datagram
			postRecvs(t, b, 3, slot)
			fill(a.buf[:3*slot], 3)
			mtu := da.ActiveMTU().Bytes()
			for i, n := range []int{2, 1000, mtu} {
				wr := SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey,
					SGList: []SGE{{Addr: a.mr.Addr() + uint64(i*slot), Length: uint32(n), LKey: a.mr.LKey()}}}
				if i == 1 {
					wr.Opcode, wr.Imm = WRSendWithImm, 0x55
				}
				_, err := a.qp.PostSend(wr)
				require.NoError(t, err)
				require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
				wc := waitWC(t, b.cq)
				require.Equal(t, WCSuccess, wc.Status)
				require.Equal(t, uint32(GRHSize+n), wc.ByteLen)
				require.Equal(t, a.qp.QPN(), wc.SrcQP)
				require.NotZero(t, wc.Flags&WCFlagGRH)
				require.Equal(t, i == 1, wc.Flags&WCFlagWithImm != 0)
				require.Equal(t, da.Addr(), wc.Src)
				syncMem(a, b)
				got := b.buf[i*slot : i*slot+GRHSize+n]
				require.Equal(t, make([]byte, 20), got[:20], "IPv4: the first 20 bytes of the GRH area are zero")
				ip := got[20:40]
				require.Equal(t, byte(0x45), ip[0])
				require.Equal(t, byte(17), ip[9])
				require.Equal(t, da.Addr().Addr().As4(), [4]byte(ip[12:16]))
				require.Equal(t, db.Addr().Addr().As4(), [4]byte(ip[16:20]))
				require.Equal(t, uint16(20+8+packet.PacketLen(packet.UDSendOnly, n)+4*btoi(i == 1)), binary.BigEndian.Uint16(ip[2:]))
				require.Equal(t, a.buf[i*slot:i*slot+n], got[GRHSize:])
				if i == 0 {
					// Answer through an AH made from the completion.
					back, err := b.pd.CreateAHFromWC(&wc, got[:GRHSize])
					require.NoError(t, err)
					// The sender's address at this device's port, where
					// RoCE peers listen (here the pipe's devices share one).
					require.Equal(t, netip.AddrPortFrom(da.Addr().Addr(), db.Addr().Port()), back.Dest())
				}
			}
			require.Equal(t, uint64(3), a.qp.Counters().Requester.RDMASends, "rxe rdma_sends")
			require.Equal(t, uint64(3), b.qp.Counters().Unreliable.RDMARecvs, "rxe rdma_recvs")
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestUDQKeyAndSize: a datagram with another Q_Key is dropped and counted;
// a work request's controlled Q_Key is replaced by the QP's own; a message
// longer than the path MTU is refused at post time; a multicast handle is
// refused on a pipe, which cannot send to a group (mcast_test.go has the
// multicast tests).
func TestUDQKeyAndSize(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	ah := aimUD(t, a, b, 0x80000042) // a controlled Q_Key
	postRecvs(t, b, 2, 2048)
	send := func(id uint64, qkey uint32, n int) error {
		_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey,
			SGList: []SGE{{Addr: a.mr.Addr(), Length: uint32(n), LKey: a.mr.LKey()}}})
		return err
	}
	require.NoError(t, send(1, 0x1234, 16))
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status, "the sender completes: UD has no acknowledgement")
	noWC(t, b.cq, 50*time.Millisecond)
	require.Equal(t, uint64(1), b.qp.Counters().Unreliable.QKeyMismatch)
	require.NoError(t, send(2, 0x80000000, 16), "controlled bit: the QP's Q_Key goes out")
	waitWC(t, a.cq)
	require.Equal(t, uint32(16+GRHSize), waitWC(t, b.cq).ByteLen)

	err := send(3, 0x1234, da.ActiveMTU().Bytes()+1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, requester.ErrUDTooLong)
	_, err = a.qp.PostSend(SendWR{Opcode: WRRDMAWrite, AH: ah})
	require.ErrorIs(t, err, requester.ErrUnsupportedOpcode)
	_, err = a.qp.PostSend(SendWR{Opcode: WRSend})
	require.ErrorIs(t, err, requester.ErrNoAH)
	_, err = a.pd.CreateAH(AH{DGID: netip.MustParseAddr("239.1.2.3")})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "multicast")
	err = a.qp.Modify(&QPAttr{State: QPSInit}, QPAttrState)
	require.Error(t, err)
	c, err := da.AllocPD()
	require.NoError(t, err)
	q, err := c.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	require.NoError(t, err)
	require.ErrorIs(t, q.Modify(&QPAttr{State: QPSInit, Port: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort), ErrInvalidArgument, "UD needs a Q_Key")
}

// TestUDLossDropsDatagram: a lost datagram is simply missing; the others
// arrive intact, each in its own WQE.
func TestUDLossDropsDatagram(t *testing.T) {
	da, db, lc := newLossyDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	ah := aimUD(t, a, b, 5)
	lc.mu.Lock()
	lc.drop = func(p []byte) bool { return packet.BTH(p).PSN() == 8 } // the second datagram
	lc.mu.Unlock()
	postRecvs(t, b, 3, 2048)
	fill(a.buf[:4096], 4)
	for i := range 3 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5,
			SGList: []SGE{{Addr: a.mr.Addr() + uint64(i*1000), Length: 1000, LKey: a.mr.LKey()}}})
		require.NoError(t, err)
	}
	for _, src := range []int{0, 2} {
		wc := waitWC(t, b.cq)
		require.Equal(t, WCSuccess, wc.Status)
		slot := int(wc.ID - 1000)
		syncMem(a, b)
		require.True(t, bytes.Equal(a.buf[src*1000:src*1000+1000], b.buf[slot*2048+GRHSize:slot*2048+GRHSize+1000]))
	}
	noWC(t, b.cq, 50*time.Millisecond)
}

// TestUDRecvCQOverflow: a UD receive completion that finds the receive CQ
// full moves the QP to ERR (rxe do_complete, every QP type) and the CQ
// raises CQ_ERR; before, the completion was dropped and the QP went on
// consuming receive WQEs.
func TestUDRecvCQOverflow(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a := newTypedEnd(t, da, QPTypeUD)
	pd, err := db.AllocPD()
	require.NoError(t, err)
	cq, err := db.CreateCQ(1, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 8}})
	require.NoError(t, err)
	buf := make([]byte, 8*4200)
	mr, err := pd.RegMR(buf, AccessLocalWrite)
	require.NoError(t, err)
	b := &end{dev: db, pd: pd, cq: cq, qp: qp, mr: mr, buf: buf}
	ah := aimUD(t, a, b, 5)
	postRecvs(t, b, 8, 4200)
	for i := range 2 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: qp.QPN(), RemoteQKey: 5,
			SGList: []SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}}})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	}
	require.Eventually(t, func() bool { return qp.State() == QPSErr }, testutil.Bound(), time.Millisecond)
	for {
		select {
		case ev := <-db.Events():
			if ev.Type == EventCQErr {
				return
			}
		case <-time.After(testutil.Bound()):
			t.Fatal("no CQ_ERR event")
		}
	}
}

// TestUDReceiveErrorClasses: a UD datagram too long for the receive WQE of
// an SRQ completes that WQE with REM_INV_REQ_ERR and the QP goes on
// (class E, UConfig.SRQ set from the QP's SRQ); a receive WQE with a bad
// L_Key completes with LOC_QP_OP_ERR, the QP enters ERR with QP_FATAL and
// its other receive WQEs are flushed (class A, rxe
// RESPST_ERR_MALFORMED_WQE).
func TestUDReceiveErrorClasses(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a := newTypedEnd(t, da, QPTypeUD)
	readyUD(t, a, 5)
	ah, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
	require.NoError(t, err)
	send := func(qpn uint32, n int) {
		_, err := a.qp.PostSend(SendWR{Opcode: WRSend, AH: ah, RemoteQPN: qpn, RemoteQKey: 5,
			SGList: []SGE{a.mr.SGE(0, n)}})
		require.NoError(t, err)
	}

	t.Run("class E with an SRQ", func(t *testing.T) {
		b := newTypedEnd(t, db, QPTypeUD)
		srq, err := b.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
		require.NoError(t, err)
		qp, err := b.pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: QPCap{MaxSendWR: 4}})
		require.NoError(t, err)
		b.qp = qp
		readyUD(t, b, 5)
		_, err = srq.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, GRHSize+100)}},
			RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(4096, 4096)}})
		require.NoError(t, err)
		send(qp.QPN(), 200)
		wc := waitWC(t, b.cq)
		require.Equal(t, wcBrief{1, WCRemInvReqErr, WCRecv}, wcBrief{wc.ID, wc.Status, wc.Opcode})
		require.Equal(t, qp.QPN(), wc.QPNum)
		send(qp.QPN(), 200)
		wc = waitWC(t, b.cq)
		require.Equal(t, wcBrief{2, WCSuccess, WCRecv}, wcBrief{wc.ID, wc.Status, wc.Opcode})
		require.Equal(t, uint32(GRHSize+200), wc.ByteLen)
		require.Equal(t, QPSRTS, qp.State())
		require.Equal(t, uint64(1), qp.Counters().Unreliable.TooLong)
	})

	t.Run("class A", func(t *testing.T) {
		b := newTypedEnd(t, db, QPTypeUD)
		readyUD(t, b, 5)
		_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{{Addr: b.mr.Addr(), Length: 4096, LKey: b.mr.LKey() + 99}}},
			RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(4096, 4096)}})
		require.NoError(t, err)
		send(b.qp.QPN(), 16)
		wcs := waitWCs(t, b.cq, 2)
		require.Equal(t, []wcBrief{{1, WCLocQPOpErr, WCRecv}, {2, WCWRFlushErr, WCRecv}}, briefs(wcs))
		require.Equal(t, QPSErr, b.qp.State())
		ev, _ := waitEvent(t, db, EventQPFatal)
		require.Equal(t, b.qp, ev.QP)
		require.Zero(t, b.qp.Counters().Unreliable.TooLong)
	})
}

// lockFreedWithin reports whether mu could be locked within d; it returns
// with mu held if so. A step of the QP's vector holds the QP's lock for a
// moment at any time (the transmit goroutine steps a QP that Modify
// scheduled), so one failed TryLock does not show a lock left held, and
// unlocking on it would unlock the step's hold; a lock a call left held
// stays held for the whole of d.
func lockFreedWithin(mu *sync.Mutex, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// foreignAH is an AddressHandle that PD.CreateAH did not make.
type foreignAH struct{ dest netip.AddrPort }

func (a *foreignAH) Dest() netip.AddrPort { return a.dest }

func (a *foreignAH) TrafficClass() uint8 { return 0 }

// TestUDPostSendForeignAH: a UD work request's AH must be one that
// PD.CreateAH made on the QP's PD, as ibv_post_send takes only an ibv_ah.
// Any other verbs.AddressHandle skipped every check of CreateAH: a nil one
// panicked in PostSend with the QP's lock held, and one of the other IP
// family failed the QP (LOC_QP_OP_ERR) when its datagram was built.
func TestUDPostSendForeignAH(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	readyUD(t, a, 0x42)
	readyUD(t, b, 0x42)
	for _, c := range []struct {
		name string
		ah   verbs.AddressHandle
	}{
		{"nil", (*foreignAH)(nil)},
		{"other-family", &foreignAH{netip.MustParseAddrPort("[2001:db8::1]:4791")}},
		{"own-type", &foreignAH{db.Addr()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := func() (n int, err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return a.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, AH: c.ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x42,
					SGList: []SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}}})
			}()
			if !lockFreedWithin(&a.qp.mu, time.Second) {
				a.qp.mu.Unlock() // white box: free it for the rest of the test and the cleanup
				t.Fatalf("PostSend left the QP's lock held (%v)", err)
			}
			a.qp.mu.Unlock()
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorContains(t, err, "PD.CreateAH")
			require.Zero(t, n)
			require.Equal(t, QPSRTS, a.qp.State(), "the QP's lock is free and the QP did not fail")
		})
	}
}

// TestAHHoldsPD: an address handle is a user of its PD, as in verbs
// (ibv_dealloc_pd fails with EBUSY while an ibv_ah exists on the PD):
// Dealloc fails with ErrInUse until the handle is destroyed, a second
// Destroy fails with ErrClosed, and a deallocated PD makes no handles.
func TestAHHoldsPD(t *testing.T) {
	da, db := newDevices(t, "pipe")
	for _, c := range []struct {
		name   string
		create func(pd *PD) (*AddrHandle, error)
	}{
		{"CreateAH", func(pd *PD) (*AddrHandle, error) {
			return pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
		}},
		{"CreateAHFromWC", func(pd *PD) (*AddrHandle, error) {
			return pd.CreateAHFromWC(&WC{Flags: WCFlagGRH, Src: db.Addr()}, nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pd, err := da.AllocPD()
			require.NoError(t, err)
			ah, err := c.create(pd)
			require.NoError(t, err)
			other, err := c.create(pd)
			require.NoError(t, err)

			err = pd.Dealloc()
			require.ErrorIs(t, err, ErrInUse)
			require.ErrorContains(t, err, "the PD still has 2 objects (MRs, QPs, SRQs or address handles)")
			require.NoError(t, ah.Destroy())
			require.ErrorIs(t, ah.Destroy(), ErrClosed, "a second Destroy")
			require.ErrorIs(t, pd.Dealloc(), ErrInUse, "one handle is left")
			require.NoError(t, other.Destroy())
			require.NoError(t, pd.Dealloc())

			_, err = c.create(pd)
			require.ErrorIs(t, err, ErrClosed, "a deallocated PD")
			require.ErrorIs(t, ah.Destroy(), ErrClosed, "Destroy after Dealloc")
		})
	}
}

// TestUDPostSendDestroyedAH: PostSend refuses an address handle after
// Destroy and posts nothing for it (the WRs before it in the call are
// posted); a WR posted before Destroy still reaches its destination, which
// PostSend copied.
func TestUDPostSendDestroyedAH(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	ah := aimUD(t, a, b, 0x42)
	postRecvs(t, b, 4, 2048)
	live, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
	require.NoError(t, err)
	wr := func(id uint64, h *AddrHandle) SendWR {
		return SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, AH: h, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x42,
			SGList: []SGE{a.mr.SGE(0, 16)}}
	}

	n, err := a.qp.PostSend(wr(1, ah))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, ah.Destroy())
	require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	require.Equal(t, uint32(GRHSize+16), waitWC(t, b.cq).ByteLen, "the WR posted before Destroy arrives")

	n, err = a.qp.PostSend(wr(2, ah))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "destroyed address handle")
	require.Zero(t, n)
	n, err = a.qp.PostSend(wr(3, live), wr(4, ah))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "send WR 1: destroyed address handle")
	require.Equal(t, 1, n, "the WR before the refused one is posted")
	require.Equal(t, []wcBrief{{3, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	waitWC(t, b.cq)
	noWC(t, a.cq, 50*time.Millisecond)
	require.Zero(t, b.cq.Poll(make([]WC, 4)), "the refused WRs sent nothing")
	require.Equal(t, QPSRTS, a.qp.State(), "a refused WR does not fail the QP")
}

// TestCloseWithAHs: Device.Close does not wait for address handles to be
// destroyed; afterwards Destroy, like every call that changes state, fails
// with ErrClosed, and so does CreateAH.
func TestCloseWithAHs(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a := newTypedEnd(t, da, QPTypeUD)
	readyUD(t, a, 0x42)
	ahs := make([]*AddrHandle, 3)
	for i := range ahs {
		var err error
		ahs[i], err = a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
		require.NoError(t, err)
	}
	require.NoError(t, ahs[0].Destroy())
	require.NoError(t, da.Close())
	for i, ah := range ahs {
		require.ErrorIs(t, ah.Destroy(), ErrClosed, "handle %d", i)
	}
	_, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, a.pd.Dealloc(), ErrClosed)
}
