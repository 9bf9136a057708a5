package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Receive completions held behind an extra READ stream and then behind a
// hole or progress report are posted by the Receive whose drain withdraws
// that report (withdrawFilled), in PSN order, not by a later NextPacket:
// once the report is gone nothing queued ahead of them is a response of an
// earlier request.
func TestSRHeldCompletionsReleasedWithReport(t *testing.T) {
	const mtu = srReadMTU
	tests := []struct {
		name string
		held int // SENDs held after the hole at 109: 1 draws a hole report, SRProgressEvery a progress report too
		sent int // packets taken before the hole fills: the extra stream's, and the hole report if a progress report follows it
		// The counters of the withdrawn report: a hole report counts
		// as filled, a progress report names no hole.
		filled, reported uint64
		// cqLimit > 0: the receive CQ overflows after that many.
		cqLimit int
	}{
		{name: "hole_report", held: 1, sent: 1, filled: 1},
		{name: "progress_report", held: SRProgressEvery, sent: 2, reported: 1},
		{name: "cq_overflow", held: 1, sent: 1, filled: 1, cqLimit: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := srReadTrain(t, 4)
			for id := range uint64(2 + tc.held) {
				h.postRecv(id+1, 100)
			}
			require.Len(t, h.drain(), 8, "the READ's train")
			// Response 101 was lost: its extra stream is queued, and
			// SEND 108's completion waits behind it.
			h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva+mtu, rkey, mtu))
			h.rx(packet.RCSendOnly, 108, pattern(10, 8), ackReq)
			// 109 is lost: what follows is held, with its reports
			// behind the extra stream and ahead of the completion.
			for i := range tc.held {
				psn := packet.PSN(110 + i)
				h.rx(packet.RCSendOnly, psn, pattern(10, byte(psn)), ackReq)
			}
			for range tc.sent {
				require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))
			}
			require.Empty(t, h.cq.wcs, "SEND 108 waits behind the report")

			h.cq.limit = tc.cqLimit
			h.rx(packet.RCSendOnly, 109, pattern(10, 9), ackReq)
			require.Equal(t, packet.PSN(110+tc.held), h.r.EPSN())
			if tc.cqLimit > 0 {
				// SEND 109's completion overflows the CQ: the QP
				// fails there (class G), with the ACK of 108 only.
				require.Len(t, h.cq.wcs, 1)
				require.Equal(t, uint64(1), h.cq.wcs[0].ID)
				status, failed := h.r.Failed()
				require.True(t, failed)
				require.Equal(t, verbs.WCGeneralErr, status)
				out := h.drain()
				require.Len(t, out, 1)
				expectACK(t, out[0], 108, 2)
				return
			}
			require.Len(t, h.cq.wcs, 2+tc.held, "posted as the report is withdrawn, not on a later NextPacket")
			for i, wc := range h.cq.wcs {
				require.Equal(t, uint64(i+1), wc.ID, "in PSN order")
				require.Equal(t, verbs.WCSuccess, wc.Status)
			}
			require.Equal(t, uint64(2+tc.held), h.r.Counters().RDMARecvs)
			out := h.drain()
			require.Len(t, out, 1)
			expectACK(t, out[0], 109+packet.PSN(tc.held), uint32(3+tc.held))
			c := h.r.Counters()
			require.Equal(t, uint64(tc.held), c.OOOHeld)
			require.Equal(t, tc.filled, c.SRHolesFilled)
			require.Equal(t, tc.reported, c.SRHolesReported)
			require.Zero(t, c.SRProgressReports, "the progress report was withdrawn")
		})
	}
}

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
