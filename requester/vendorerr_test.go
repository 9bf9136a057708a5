package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestVendorErrNamesTheFailingNAK: a send completion's VendorErr is the
// AETH syndrome of the NAK that ended the WQE, and 0 for a status no NAK
// caused. A PSN sequence error NAK that only started a retry leaves no
// trace in a later flush or in a RETRY_EXC_ERR the timer ran out.
func TestVendorErrNamesTheFailingNAK(t *testing.T) {
	const pmtu, p0 = 256, 0x100
	seq := uint32(packet.NAKSyndrome(packet.NAKPSNSeqError))
	for _, tc := range []struct {
		name       string
		retryCnt   uint8
		after      func(h *harness) // after the sequence NAK and its retry
		wantStatus verbs.WCStatus
		wantVendor uint32
	}{
		{"flush-after-sequence-nak", 7, func(h *harness) { h.r.Flush() }, verbs.WCWRFlushErr, 0},
		{"retry-exceeded-by-the-timer", 1, func(h *harness) {
			// The recovery timer's probes come first; the IB timeout
			// then spends the last retry.
			for range 50 {
				if _, failed := h.r.Failed(); failed {
					return
				}
				h.now = h.r.Deadline()
				h.r.OnTimeout(h.now)
				h.drain()
			}
		}, verbs.WCRetryExcErr, 0},
		{"retry-exceeded-by-the-nak", 0, func(h *harness) {}, verbs.WCRetryExcErr, seq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.RetryCnt = tc.retryCnt
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 3 * pmtu, LKey: lkeyA}}})
			require.Len(t, h.drain(), 3)
			h.recv(nak(p0+1, packet.NAKPSNSeqError))
			h.drain()
			tc.after(h)
			h.r.Flush()
			require.Len(t, h.cq.wcs, 1)
			require.Equal(t, tc.wantStatus, h.cq.wcs[0].Status)
			require.Equal(t, tc.wantVendor, h.cq.wcs[0].VendorErr)
		})
	}
}
