package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestSRReReadFaultKeepsEarlierCompletions: an extra stream of a re-read
// whose region has gone fails the QP with a Remote Access NAK for the
// re-read's PSN, and the receive completions held behind the READ's train
// are posted as kernel rxe posts them. Rxe sends a READ's whole train
// (read_reply) before it takes the next request, so every request that
// arrived before the re-read had executed and completed when the re-read
// (duplicate_request, then read_reply's rxe_recheck_mr) faults: their
// completions are successes, in order. The fault's class C error completes
// the receive WQE of a message in progress at the re-read with
// IBV_WC_REM_ACCESS_ERR (do_complete); the requests after the re-read
// never run, and Flush completes their WQEs with WR_FLUSH_ERR.
func TestSRReReadFaultKeepsEarlierCompletions(t *testing.T) {
	const mtu = srReadMTU
	type want struct {
		id     uint64
		status verbs.WCStatus
	}
	reread := func(h *harness) {
		h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu))
	}
	tests := []struct {
		name    string
		reqs    func(h *harness) // the re-read of 101 among requests from 108
		cqLimit int              // > 0: the receive CQ overflows after that many
		atFault []want           // posted when the extra stream faults
		ok      uint64           // successful among them (RDMARecvs)
		nak     bool             // the fault's NAK is sent (no CQ overflow first)
		ack     packet.PSN       // else the ACK sent instead, 0 for none
		lost    int              // WQEs whose completion the full CQ lost (rxe do_complete consumes the WQE first)
	}{
		{name: "send_before", reqs: func(h *harness) {
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			reread(h)
			h.rx(packet.RCSendOnly, 109, pattern(10, 9), ackReq)
		}, atFault: []want{{1, verbs.WCSuccess}}, ok: 1, nak: true},
		{name: "two_sends_before", reqs: func(h *harness) {
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			h.rx(packet.RCSendOnly, 109, pattern(10, 9), ackReq)
			reread(h)
		}, atFault: []want{{1, verbs.WCSuccess}, {2, verbs.WCSuccess}}, ok: 2, nak: true},
		{name: "send_after", reqs: func(h *harness) {
			reread(h)
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
		}, nak: true},
		{name: "message_begun_completes_after", reqs: func(h *harness) {
			h.rx(packet.RCSendFirst, 108, pattern(mtu, 8))
			reread(h)
			h.rx(packet.RCSendLast, 109, pattern(10, 9), ackReq)
		}, atFault: []want{{1, verbs.WCRemAccessErr}}, nak: true},
		{name: "message_in_progress", reqs: func(h *harness) {
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			h.rx(packet.RCSendFirst, 109, pattern(mtu, 9))
			reread(h)
		}, atFault: []want{{1, verbs.WCSuccess}, {2, verbs.WCRemAccessErr}}, ok: 1, nak: true},
		{name: "cq_overflow_first", reqs: func(h *harness) {
			// The CQ overflows on SEND 109, before the re-read: rxe
			// fails there (class G) and never serves the re-read.
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			h.rx(packet.RCSendOnly, 109, pattern(10, 9), ackReq)
			reread(h)
		}, cqLimit: 1, atFault: []want{{1, verbs.WCSuccess}}, ok: 1, ack: 108, lost: 1},
		{name: "cq_overflow_in_progress", reqs: func(h *harness) {
			// The CQ overflows on the error completion of the
			// message in progress: rxe fails there, before its
			// acknowledge sends the NAK.
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			h.rx(packet.RCSendFirst, 109, pattern(mtu, 9))
			reread(h)
		}, cqLimit: 1, atFault: []want{{1, verbs.WCSuccess}}, ok: 1, lost: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := srReadTrain(t, 6)
			const wqes = 4
			for id := range uint64(wqes) {
				h.postRecv(id+1, 2*mtu)
			}
			for range 4 { // 100..103 leave
				require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))
			}
			tc.reqs(h)
			require.Empty(t, h.cq.wcs, "held behind the train")
			h.remote.valid = false
			h.cq.limit = tc.cqLimit
			out := h.drain()
			status, failed := h.r.Failed()
			require.True(t, failed)
			switch {
			case tc.nak:
				require.Len(t, out, 1, "the NAK only")
				expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(101),
					syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
				require.Equal(t, verbs.WCRemAccessErr, status)
			case tc.ack != 0:
				require.Len(t, out, 1, "the ACK of the requests before the overflow")
				expectACK(t, out[0], tc.ack, 2)
				require.Equal(t, verbs.WCGeneralErr, status)
			default:
				require.Empty(t, out)
				require.Equal(t, verbs.WCGeneralErr, status)
			}
			require.Len(t, h.cq.wcs, len(tc.atFault), "completions posted at the fault")
			for i, w := range tc.atFault {
				wc := h.cq.wcs[i]
				require.Equal(t, w.id, wc.ID)
				require.Equal(t, w.status, wc.Status, "completion %d", w.id)
				require.Equal(t, uint32(ourQPN), wc.QPNum)
				if w.status == verbs.WCSuccess {
					require.Equal(t, verbs.WCRecv, wc.Opcode)
					require.Equal(t, uint32(10), wc.ByteLen)
				}
			}
			require.Equal(t, tc.ok, h.r.Counters().RDMARecvs)
			h.cq.limit = 0
			h.r.Flush()
			require.Len(t, h.cq.wcs, wqes-tc.lost, "every receive WQE completes once")
			for i, wc := range h.cq.wcs[len(tc.atFault):] {
				require.Equal(t, uint64(len(tc.atFault)+tc.lost+i+1), wc.ID)
				require.Equal(t, verbs.WCWRFlushErr, wc.Status)
			}
		})
	}
}

// Receive completions held behind an extra READ stream are posted as the
// stream's last response is taken, although a hole or progress report
// queued behind the stream is still ahead of them: a report acknowledges
// nothing, so nothing it carries is ordered before them (kernel rxe has
// no such report and posts them once the responses of earlier requests
// are out). The reports go out afterwards as they are. A receive CQ that
// overflows on one of them fails the QP there (class G, no NAK), with the
// ACK of the requests before it only.
func TestSRHeldCompletionsPassReports(t *testing.T) {
	const mtu = srReadMTU
	tests := []struct {
		name    string
		before  int // SENDs held from 108, behind the extra stream
		after   int // SENDs held after the hole that follows them: SRReorderPackets draw a progress report too
		cqLimit int // > 0: the receive CQ overflows after that many
	}{
		{name: "hole_report", before: 1, after: 1},
		{name: "hole_and_progress_report", before: 2, after: SRReorderPackets},
		{name: "cq_overflow", before: 2, after: 1, cqLimit: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := srReadTrain(t, 7)
			for id := range uint64(tc.before + tc.after) {
				h.postRecv(id+1, 100)
			}
			require.Len(t, h.drain(), 8, "the READ's train")
			// Response 101 was lost: its extra stream is queued, and
			// the completions of the SENDs from 108 wait behind it.
			h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu))
			for i := range tc.before {
				psn := packet.PSN(108 + i)
				h.rx(packet.RCSendOnly, psn, pattern(10, byte(psn)), ackReq)
			}
			// The PSN after them is lost: what follows is held, and
			// its reports queue behind the extra stream, ahead of the
			// completions.
			hole := packet.PSN(108 + tc.before)
			for i := range tc.after {
				psn := hole.Add(1 + i)
				h.rx(packet.RCSendOnly, psn, pattern(10, byte(psn)), ackReq)
			}
			require.Empty(t, h.cq.wcs, "held behind the extra stream")
			h.cq.limit = tc.cqLimit

			n := h.r.NextPacket(t0, h.rxbuf)
			require.NotZero(t, n)
			p, err := packet.Parse(h.rxbuf[:n])
			require.NoError(t, err)
			expect(t, p, opcode(packet.RCRDMAReadResponseOnly), psnIs(101))
			if tc.cqLimit > 0 {
				require.Len(t, h.cq.wcs, tc.cqLimit, "the completions the CQ took")
				status, failed := h.r.Failed()
				require.True(t, failed)
				require.Equal(t, verbs.WCGeneralErr, status)
				out := h.drain()
				require.Len(t, out, 1, "the ACK of the SENDs before the overflow, no report")
				expectACK(t, out[0], hole.Add(-tc.before+tc.cqLimit-1), uint32(1+tc.cqLimit))
				return
			}
			require.Len(t, h.cq.wcs, tc.before, "posted with the stream's last response, ahead of the reports")
			for i, wc := range h.cq.wcs {
				require.Equal(t, uint64(i+1), wc.ID, "in PSN order")
				require.Equal(t, verbs.WCSuccess, wc.Status)
			}
			require.Equal(t, uint64(tc.before), h.r.Counters().RDMARecvs)

			out := h.drain()
			reports := 1
			if tc.after >= SRReorderPackets {
				reports = 2
			}
			require.Len(t, out, reports+1, "the reports, then the ACK")
			expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(hole),
				aeth(packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(hole.Next())))
			if reports == 2 {
				past := hole.Add(1 + tc.after)
				expect(t, out[1], opcode(packet.RCAcknowledge), psnIs(past),
					aeth(packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(past)))
			}
			expectACK(t, out[reports], hole.Add(-1), uint32(1+tc.before))
			require.Len(t, h.cq.wcs, tc.before, "the SENDs after the hole wait for it")
		})
	}
}
