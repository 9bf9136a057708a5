package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestFailureBehindReadTrainCompletions: a SEND that fails (its receive
// buffer overflows) while the response train of an earlier READ is still
// queued reports its receive WQE only once the train has gone. If the
// READ's region goes before that, the READ's fault fails the QP and the
// SEND's WQE is flushed (WR_FLUSH_ERR), as in kernel rxe, which sends a
// READ's whole train (read_reply) before it looks at the next request and
// so never executed the SEND; and so it is if the QP is flushed before the
// train has gone. Otherwise the WQE completes with the SEND's own error.
func TestFailureBehindReadTrainCompletions(t *testing.T) {
	const mtu = 1024
	overflowOnly := func(h *harness) {
		h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
	}
	overflowLast := func(h *harness) {
		h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
		h.rx(packet.RCSendLast, 103, pattern(1000, 0), ackReq)
	}
	tests := []struct {
		name      string
		recvLen   uint32
		send      func(*harness)
		regionGo  bool // the READ's region is deregistered before the train is sent
		flushNow  bool // the QP is flushed before the train is sent
		nak       packet.NAKCode
		nakPSN    packet.PSN
		fail      verbs.WCStatus
		wantWC    verbs.WCStatus
		responses int // READ response packets sent before the NAK
	}{
		{name: "region_stays", recvLen: 10, send: overflowOnly,
			nak: packet.NAKInvalidRequest, nakPSN: 102, fail: verbs.WCLocLenErr, wantWC: verbs.WCLocLenErr, responses: 2},
		{name: "region_goes", recvLen: 10, send: overflowOnly, regionGo: true,
			nak: packet.NAKRemoteAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, wantWC: verbs.WCWRFlushErr},
		{name: "region_goes_message_begun", recvLen: 1500, send: overflowLast, regionGo: true,
			nak: packet.NAKRemoteAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, wantWC: verbs.WCWRFlushErr},
		{name: "flushed_before_train", recvLen: 10, send: overflowOnly, flushNow: true,
			fail: verbs.WCLocLenErr, wantWC: verbs.WCWRFlushErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.postRecv(7, tc.recvLen)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			tc.send(h)
			_, failed := h.r.Failed()
			require.True(t, failed)
			if tc.regionGo {
				h.remote.valid = false
			}
			var out []packet.Packet
			if tc.flushNow {
				h.r.Flush()
			} else {
				out = h.drain()
				require.Len(t, out, tc.responses+1, "READ responses, then the NAK")
				expect(t, out[len(out)-1], opcode(packet.RCAcknowledge), psnIs(tc.nakPSN), syndrome(packet.NAKSyndrome(tc.nak)))
				h.r.Flush()
			}
			status, _ := h.r.Failed()
			require.Equal(t, tc.fail, status)
			require.Len(t, h.cq.wcs, 1, "one completion of the receive WQE")
			require.Equal(t, uint64(7), h.cq.wcs[0].ID)
			require.Equal(t, tc.wantWC, h.cq.wcs[0].Status)
		})
	}
}
