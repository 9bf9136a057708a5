package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestLossSignals checks what the requester counts as a sign of loss
// recovery: not an RNR NAK or the packets its retry sends again (flow
// control), but a sequence-error NAK and the packets its go-back-N retry
// sends again, after a new packet ended the RNR retry.
func TestLossSignals(t *testing.T) {
	const p0 = 0x10
	h := newHarness(t, baseConfig(1024, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	post := func(n int) {
		for i := range n {
			h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
				SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
		}
	}
	post(3)
	require.Len(t, h.drain(), 3)
	require.Zero(t, h.r.LossSignals(), "first transmissions")

	h.recv(rnr(p0+1, 12))
	h.now = h.now.Add(640 * time.Microsecond)
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 2, "the RNR retry")
	require.Equal(t, uint64(2), h.r.Counters().Retransmits)
	require.Zero(t, h.r.LossSignals(), "an RNR NAK and its retry")

	post(1) // a new packet ends the RNR retry
	require.Len(t, h.drain(), 1)
	h.recv(nak(p0+2, packet.NAKPSNSeqError))
	again := h.drain()
	require.NotEmpty(t, again, "the go-back-N retry")
	c := h.r.Counters()
	require.Equal(t, uint64(1), c.RcvdSeqErr)
	require.Equal(t, c.RcvdSeqErr+c.Retransmits-2, h.r.LossSignals(), "the NAK and every packet its retry sent again")
	require.Equal(t, uint64(1+len(again)), h.r.LossSignals())
}
