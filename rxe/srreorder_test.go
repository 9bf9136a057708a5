package rxe

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/requester"

	"github.com/stretchr/testify/require"
)

// TestSRReorderNoResend streams WRITEs, SENDs and READs under selective
// repeat through a link that reorders 2 % of the datagrams of one
// direction by one, two or three later ones and loses none: the requests
// (a's sends) or the READ responses (a's receives). It reorders only the
// first packet of each 4-packet message, which the message's three other
// packets always follow, so every reordering is overtaken within its
// flight; or READ requests, by the requests outstanding behind them or
// the WRITE that ends each stream. A reordering is not a loss: the
// requester resends nothing (sr-requester.md, "Resends": a hole report's
// resends wait until the responder reports received the request packet
// srHoldPackets (4) request packets past the hole, a READ request being
// one packet, or a reorder window when nothing was sent that far; a READ
// response is taken as lost once responses srReorder PSNs past it have
// arrived), the responder sends no READ response twice, and every byte
// arrives in order.
func TestSRReorderNoResend(t *testing.T) {
	for _, tc := range []struct {
		op    WROpcode
		dir   string
		ops   string // the opcodes reordered
		maxBy int    // the longest overtaking tried
		trail bool   // each stream ends with a WRITE (srReorderStream)
	}{
		{WRRDMAWrite, "send", "RC_RDMA_WRITE_FIRST", 3, false},
		{WRSend, "send", "RC_SEND_FIRST", 3, false},
		{WRRDMARead, "recv", "RC_RDMA_READ_RESPONSE_FIRST", 3, false},
		// A READ request overtaken by later ones, each a packet for 4
		// PSNs: the hold counts request packets (requester
		// srThreshold). The WRITE that ends each stream follows the
		// last READ requests, so they too are overtaken within their
		// flight.
		{WRRDMARead, "send", "RC_RDMA_READ_REQUEST", 3, true},
	} {
		for by := 1; by <= tc.maxBy; by++ {
			t.Run(fmt.Sprintf("%v/%s/by%d", tc.op, tc.dir, by), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rule := fmt.Sprintf("reorder=2%%,by=%d,dir=%s,op=%s", by, tc.dir, tc.ops)
					st, rq, lb := srReorderStream(t, tc.op, rule, uint64(by), tc.trail)
					require.Zero(t, st.Send.Lost+st.Recv.Lost, "the link lost datagrams")
					require.Zero(t, rq.Retransmits, "request packets sent again")
					require.Zero(t, lb.ReadResponsesResent, "READ responses sent again")
				})
			})
		}
	}
}

// TestSRReorderTail is TestSRReorderNoResend with every datagram of the
// direction open to reordering by two (the fault injector's default
// longest hold, 10 ms): a flight's last packet, the READ requests (one
// packet each, for 4 PSNs) and the ACKs too. A datagram held at the end
// of a flight waits for the next flight, or for the longest hold, and the
// requester cannot tell that from a loss: a hole report with nothing sent
// after the hole waits only the reorder window, a quarter of SRTT or its
// 50 µs floor (SRTT is 0 on this virtual-time pipe), and an ACK held
// beyond the recovery timer's floor (2 ms) is answered by a tail-loss
// probe. A READ request overtaken by the next one leaves a hole of 4
// PSNs, held until srHoldPackets later request packets are received
// (requester srThreshold); near a flight's end, with fewer behind it, the
// hole waits only the reorder window.
// So there a reordering may cost a resend, but at most one: the
// request packets sent again are at most the reorderings, and each READ
// request re-read has the responder send at most its 4 responses again.
func TestSRReorderTail(t *testing.T) {
	for _, op := range []WROpcode{WRRDMAWrite, WRSend, WRRDMARead} {
		for _, dir := range []string{"send", "recv"} {
			t.Run(fmt.Sprintf("%v/%s", op, dir), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					st, rq, lb := srReorderStream(t, op, "reorder=2%,by=2,dir="+dir, 7, false)
					require.Zero(t, st.Send.Lost+st.Recv.Lost, "the link lost datagrams")
					require.LessOrEqual(t, rq.Retransmits, st.Send.Reordered+st.Recv.Reordered, "request packets sent again")
					require.LessOrEqual(t, lb.ReadResponsesResent, 4*st.Send.Reordered, "READ responses sent again")
				})
			})
		}
	}
}

// srReorderStream runs streams of 32 op work requests of 4 KiB (4
// packets at MTU 1024), up to 16 outstanding, from a to b through a link
// with the fault rule, until the rule has reordered srReorderMin
// datagrams (at most srReorderRounds streams), each stream ended, with
// trail, by a 4 KiB WRITE from a to b, checks that every WR completed in
// order and every byte of the op WRs arrived, and returns the link's
// statistics, a's requester counters and b's loss counters.
func srReorderStream(t *testing.T, op WROpcode, rule string, seed uint64, trail bool) (faults.Stats, requester.Counters, LossCounters) {
	const wrs, size, depth = 32, 4 << 10, 16
	a, b, fa := faultyPairSR(t, seed, []string{rule}, true)
	src, dst := a, b
	if op == WRRDMARead {
		src, dst = b, a
	}
	off := func(i int) int { return i * size }
	reordered := func() uint64 { st := fa.Stats(); return st.Send.Reordered + st.Recv.Reordered }
	round := 0
	for ; round < srReorderRounds && reordered() < srReorderMin; round++ {
		for i := range wrs {
			fill(src.buf[off(i):off(i)+size], uint64(round*wrs+i)+seed<<20)
			clear(dst.buf[off(i) : off(i)+size])
			if op == WRSend {
				_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(off(i), size)}})
				require.NoError(t, err)
			}
		}
		syncMem(a, b)
		total := wrs
		if trail {
			total++
		}
		posted, done := 0, 0
		for done < total {
			for posted < total && posted-done < depth {
				o := op
				if posted == wrs {
					o = WRRDMAWrite // the trailing WRITE
				}
				_, err := a.qp.PostSend(SendWR{ID: uint64(posted), Opcode: o, Flags: SendSignaled,
					SGList: []SGE{a.mr.SGE(off(posted), size)}, RemoteAddr: b.mr.Addr() + uint64(off(posted)), RKey: b.mr.RKey()})
				require.NoError(t, err)
				posted++
			}
			wc := waitVirtual(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status, "round %d WR %d", round, wc.ID)
			require.Equal(t, uint64(done), wc.ID, "round %d", round)
			done++
		}
		if op == WRSend {
			for i := range wrs {
				wc := waitVirtual(t, b.cq)
				require.Equal(t, WCSuccess, wc.Status)
				require.Equal(t, uint64(i), wc.ID)
			}
		}
		syncMem(a, b)
		require.True(t, bytes.Equal(src.buf[:wrs*size], dst.buf[:wrs*size]), "round %d: data differs", round)
	}
	st := fa.Stats()
	rq := a.qp.Counters().Requester
	lb := b.qp.Counters().Loss()
	t.Logf("%s: %d streams; reordered send %d recv %d; retransmits %d, sr resent %d, re-reads %d, probes %d, rto %d, holes reported %d, progress %d, read responses resent %d",
		rule, round, st.Send.Reordered, st.Recv.Reordered, rq.Retransmits, rq.SRPacketsResent, rq.ReadHoleRereads,
		rq.Recovery.TailProbes, rq.Recovery.RTOExpiries, lb.SRHolesReported, lb.SRProgressReports, lb.ReadResponsesResent)
	require.GreaterOrEqual(t, reordered(), uint64(srReorderMinSeen), "too few reorderings: the test tests too little")
	return st, rq, lb
}

// srReorderStream runs streams until srReorderMin reorderings, at most
// srReorderRounds of them, and requires srReorderMinSeen.
const srReorderMin, srReorderRounds, srReorderMinSeen = 20, 60, 5
