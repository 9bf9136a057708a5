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
