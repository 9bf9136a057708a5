package rxe

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// heldCount returns how many datagrams qp holds after local drops.
func heldCount(qp *QP) int {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.localDrop.n - qp.localDrop.head
}

// wireFrom returns the opcodes of the datagrams that reached the wire
// addressed to the QP qpn, in order.
func wireFrom(oc *orderConn, qpn uint32) []packet.Opcode {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	var ops []packet.Opcode
	for _, r := range oc.wire {
		if r.qpn == qpn {
			ops = append(ops, r.op)
		}
	}
	return ops
}

// TestRCHeldInError: an RC QP holds RDMA WRITE datagrams its local host
// refused (LocalDropAdaptive) when it enters ERR. A QP in ERR sends no
// request: kernel rxe's requester only flushes its WQEs in ERR and builds
// a packet again from its WQE only outside ERR (rxe_requester), so once the
// back-off ends the held requests must not reach the wire, where the peer
// would execute WRITEs whose work requests completed with WR_FLUSH_ERR.
// The ERR comes from Modify, from a fatal NAK the requester receives (an
// R_Key violation at the peer), or from the QP's own responder, whose
// fatal NAK is itself refused and held: that NAK, built before the QP
// entered ERR as rxe_resp.c sends it before it moves its QP to ERR, still
// goes once the host takes datagrams again, so the peer learns why (its
// work request completes with REM_ACCESS_ERR, not after its retries). So
// does an ACK the responder held when the QP entered ERR (the peer's WRITE
// completes), while held READ responses do not go, as rxe's responder
// answers nothing in ERR (the peer's READ ends after its retries). Each
// work request completes once, nothing else leaves, and nothing of a held
// request lands in the peer's memory.
func TestRCHeldInError(t *testing.T) {
	const (
		wrLen  = 4096 // four packets at MTU 1024
		wrs    = 3
		badKey = 0xBAD0BAD
	)
	for _, tc := range []struct {
		name string
		// pass is how many datagrams the host takes before it refuses.
		pass uint64
		// fail moves a to ERR while it holds its WRITE datagrams (refused
		// until then); it returns the completions a then expects, in
		// order.
		fail func(t *testing.T, a, b *end) []wcBrief
		// wantOps are a's datagrams on the wire, all told.
		wantOps []packet.Opcode
		// peerWC is the completion b then has, if any.
		peerWC []wcBrief
	}{
		{
			name: "modify",
			fail: func(t *testing.T, a, b *end) []wcBrief {
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				return flushed(1, wrs)
			},
		},
		{
			// a's responder holds the ACK of b's WRITE, built before
			// ERR: it goes.
			name: "modify-ack",
			fail: func(t *testing.T, a, b *end) []wcBrief {
				_, err := b.qp.PostSend(SendWR{ID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGList: []SGE{b.mr.SGE(0, 64)}, RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()})
				require.NoError(t, err)
				heldAfterBackoff(t, a, wrs*wrLen/1024+1)
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				return flushed(1, wrs)
			},
			wantOps: []packet.Opcode{packet.RCAcknowledge},
			peerWC:  []wcBrief{{9, WCSuccess, WCRDMAWrite}},
		},
		{
			// a's responder holds its READ responses to b: they do not
			// go, and b's READ ends with its retries.
			name: "modify-read",
			fail: func(t *testing.T, a, b *end) []wcBrief {
				_, err := b.qp.PostSend(SendWR{ID: 9, Opcode: WRRDMARead, Flags: SendSignaled,
					SGList: []SGE{b.mr.SGE(0, wrLen)}, RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()})
				require.NoError(t, err)
				heldAfterBackoff(t, a, wrs*wrLen/1024+wrLen/1024)
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				return flushed(1, wrs)
			},
			peerWC: []wcBrief{{9, WCRetryExcErr, WCRDMARead}},
		},
		{
			name: "requester-nak",
			pass: 1, // the first WRITE (a bad R_Key) leaves, the rest are held
			fail: func(t *testing.T, a, b *end) []wcBrief {
				synctest.Wait() // b NAKs the first WRITE: a enters ERR
				return append([]wcBrief{{0, WCRemAccessErr, WCRDMAWrite}}, flushed(1, wrs)...)
			},
			wantOps: []packet.Opcode{packet.RCRDMAWriteOnly},
		},
		{
			name: "responder-nak",
			fail: func(t *testing.T, a, b *end) []wcBrief {
				_, err := b.qp.PostSend(SendWR{ID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGList: []SGE{b.mr.SGE(0, 64)}, RemoteAddr: a.mr.Addr(), RKey: badKey})
				require.NoError(t, err)
				// a's responder NAKs b's WRITE and a enters ERR, holding
				// the NAK.
				heldAfterBackoff(t, a, 1)
				require.Equal(t, QPSErr, a.qp.Query().State)
				return flushed(1, wrs)
			},
			wantOps: []packet.Opcode{packet.RCAcknowledge},
			peerWC:  []wcBrief{{9, WCRemAccessErr, WCRDMAWrite}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var refusing atomic.Bool
				ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
				oa := &orderConn{Conn: ca, refuse: func(i uint64) bool { return refusing.Load() && i > tc.pass }}
				da, db := openPair(t, oa, cb)
				a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
				connectVirtual(t, a, b)
				fill(a.buf, 5)
				syncMem(a, b)

				refusing.Store(true)
				var post []SendWR
				if tc.pass > 0 {
					post = append(post, SendWR{ID: 0, Opcode: WRRDMAWrite, Flags: SendSignaled,
						SGList: []SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: badKey})
				}
				for i := range wrs {
					post = append(post, SendWR{ID: uint64(1 + i), Opcode: WRRDMAWrite, Flags: SendSignaled,
						SGList:     []SGE{a.mr.SGE(wrLen*(1+i), wrLen)},
						RemoteAddr: b.mr.Addr() + uint64(wrLen*(1+i)), RKey: b.mr.RKey()})
				}
				_, err := a.qp.PostSend(post...)
				require.NoError(t, err)
				synctest.Wait()
				require.Positive(t, a.qp.Counters().LocalDrops, "nothing was refused: the test tests nothing")
				if tc.pass == 0 { // a is not in ERR yet
					require.GreaterOrEqual(t, heldCount(a.qp), wrs*wrLen/1024, "the WRITEs were never held")
				}

				want := tc.fail(t, a, b)
				require.Equal(t, want, briefs(waitWCs(t, a.cq, len(want))), "a's completions")

				// The host takes datagrams again; every back-off ends.
				refusing.Store(false)
				// b's READ (modify-read) ends after its retries: 8
				// timeouts of 4.2 ms.
				time.Sleep(200 * time.Millisecond)
				synctest.Wait()
				syncMem(a, b)

				ops := wireFrom(oa, b.qp.QPN())
				require.Equal(t, tc.wantOps, ops, "a's datagrams on the wire")
				require.Zero(t, heldCount(a.qp), "a still holds datagrams")
				require.Empty(t, briefs(pollAll(a.cq)), "a second completion on a")
				require.Equal(t, append([]wcBrief{}, tc.peerWC...), briefs(pollAll(b.cq)), "b's completions")
				require.Equal(t, make([]byte, len(b.buf)), b.buf, "a held WRITE landed in b's memory")

				ac, bc := a.qp.Counters(), b.qp.Counters()
				require.Equal(t, uint64(len(ops)), ac.SentPkts, "a's sent_pkts")
				require.Equal(t, uint64(len(ops)), da.Counters().SentPkts, "a's device sent_pkts")
				require.Equal(t, uint64(len(ops)), bc.RcvdPkts, "b's rcvd_pkts")
				require.Equal(t, ac.LocalDrops, da.Counters().LocalDrops)
				require.Positive(t, ac.LocalDrops)
				require.Zero(t, ac.Requester.Retransmits, "a local drop became a retransmission")
			})
		})
	}
}

// heldAfterBackoff lets a's local-drop back-offs (at most 1 ms,
// retry.DefaultBackoffMax) pass while its host still refuses every
// datagram, so that its responder answers b, and checks that a then holds
// at least n datagrams. 2 ms is less than either side's ACK timeout.
func heldAfterBackoff(t *testing.T, a *end, n int) {
	t.Helper()
	time.Sleep(2 * time.Millisecond)
	synctest.Wait()
	require.GreaterOrEqual(t, heldCount(a.qp), n, "a's answer to b was never held: the test tests nothing")
}

// flushed returns the WR_FLUSH_ERR completions of RDMA WRITEs with IDs
// first to first+n-1.
func flushed(first, n int) []wcBrief {
	out := make([]wcBrief, n)
	for i := range out {
		out[i] = wcBrief{uint64(first + i), WCWRFlushErr, WCRDMAWrite}
	}
	return out
}

// TestRCHeldInErrorKeepsAcks: the datagrams a local drop hands back to an
// RC QP in ERR, a mix of requests, READ responses, atomic acknowledges
// and ACK or NAK packets (a batch built before the QP entered ERR and
// written after), are kept only if they are ACK or NAK packets, and so
// are those it held from before ERR; they keep the order takeBack gives
// them (those refused first, then those still held, which the QP built
// after them), and the step sends exactly them once the back-off ends.
func TestRCHeldInErrorKeepsAcks(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	qp := initQP(t, da)
	v := qp.vec
	// The test is the vector's transmit pass: it holds txMu, as step and
	// takeBack's callers do, so the transmit goroutine stays out.
	v.txMu.Lock()
	defer v.txMu.Unlock()

	// batch returns datagrams of qp with the given opcodes, each tagged
	// with tag and its index in its second byte.
	batch := func(tag byte, ops ...packet.Opcode) ([]netdev.Message, []*QP, []uint32) {
		msgs := make([]netdev.Message, len(ops))
		owners := make([]*QP, len(ops))
		for i, op := range ops {
			msgs[i] = netdev.Message{Buf: make([]byte, maxPacket), N: 64}
			packet.BTH(msgs[i].Buf).SetOpcode(op)
			msgs[i].Buf[1] = tag<<4 | byte(i)
			owners[i] = qp
		}
		return msgs, owners, make([]uint32, len(ops)) // the QP's first incarnation
	}
	held := func() []byte {
		qp.mu.Lock()
		defer qp.mu.Unlock()
		var out []byte
		for _, h := range qp.localDrop.held[qp.localDrop.head:qp.localDrop.n] {
			out = append(out, h.Buf[1])
		}
		return out
	}
	mixed := []packet.Opcode{packet.RCRDMAWriteFirst, packet.RCAcknowledge, packet.RCRDMAReadResponseFirst,
		packet.RCAtomicAcknowledge, packet.RCAcknowledge, packet.RCSendOnly, packet.RCRDMAReadRequest}

	qp.takeBack(batch(1, mixed...)) // in INIT: all are kept
	require.Equal(t, []byte{0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16}, held())

	require.NoError(t, qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	msgs, owners, gens := batch(2, mixed...)
	rest, _, _ := qp.takeBack(msgs, owners, gens)
	require.Empty(t, rest, "the batch had only the QP's datagrams")
	require.Equal(t, []byte{0x21, 0x24, 0x11, 0x14}, held(), "held in ERR")

	qp.mu.Lock()
	qp.localDrop.until = time.Time{} // the back-off is over
	out := make([]netdev.Message, len(mixed))
	for i := range out {
		out[i].Buf = make([]byte, maxPacket)
	}
	k, done := qp.stepHeld(time.Now(), out, make([]*QP, len(out)), 0)
	qp.mu.Unlock()
	require.True(t, done)
	var sent []byte
	for _, m := range out[:k] {
		require.Equal(t, packet.RCAcknowledge, packet.BTH(m.Buf[:m.N]).Opcode())
		sent = append(sent, m.Buf[1])
	}
	require.Equal(t, []byte{0x21, 0x24, 0x11, 0x14}, sent, "sent after the back-off")
	require.Empty(t, held())
}
