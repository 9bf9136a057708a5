package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// A SEND packet placed ahead into a receive buffer whose region is
// deregistered before the packet executes in order fails when it
// executes, as it would have in order (rxe send_data_in, copy_data:
// RESPST_ERR_MALFORMED_WQE): the message does not complete with success.
func TestPlaceAheadSendRegionGone(t *testing.T) {
	const lkey2, lva2 = 0x99, 0x700000
	for _, gone := range []bool{false, true} {
		name := "kept"
		if gone {
			name = "gone"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, withPMTU(256), withSR(0))
			second := &fakeMR{key: lkey2, va: lva2, buf: make([]byte, 4096), valid: true, access: verbs.AccessLocalWrite}
			h.mem.mrs = append(h.mem.mrs, second)
			// Bytes 0..511 in the first region, 512..767 in the second.
			h.rq.post(verbs.RecvWR{ID: 7, SGList: []verbs.SGE{
				{Addr: lva, Length: 512, LKey: lkey},
				{Addr: lva2, Length: 512, LKey: lkey2},
			}})
			data := pattern(768, 4)
			h.rx(packet.RCSendFirst, 100, data[:256])
			h.rx(packet.RCSendLast, 102, data[512:], ackReq)
			h.drain()
			require.EqualValues(t, 1, h.r.Counters().OOOPlaced)
			require.Equal(t, data[512:], second.buf[:256])
			if gone {
				second.valid = false
			}
			h.rx(packet.RCSendMiddle, 101, data[256:512])
			out := h.drain()
			require.Len(t, h.cq.wcs, 1)
			if !gone {
				require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
				return
			}
			require.Equal(t, verbs.WCLocQPOpErr, h.cq.wcs[0].Status)
			require.NotEmpty(t, out)
			expect(t, out[len(out)-1], opcode(packet.RCAcknowledge), psnIs(102),
				syndrome(packet.NAKSyndrome(packet.NAKRemoteOperation)))
			_, failed := h.r.Failed()
			require.True(t, failed)
		})
	}
}
