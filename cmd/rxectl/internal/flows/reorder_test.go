package flows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestReorderNoLoss checks that requests reordered on the way, each sent
// once, are no loss: a capture on the receiving side of a path that
// reorders holds WRITE ONLY 100..105 as 100 101 103 102 104 105, and the
// responder ACKs the lot. 102 comes late into the gap 103 opened, which it
// closes: no gap, no rewind, no recovery, no note, and all six messages.
// The analysis used to count 102 as a rewind (a retransmission with a
// probe recovery), keep the gap before 103 as a loss, and count three
// messages.
func TestReorderNoLoss(t *testing.T) {
	ps := []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 101, payload: 64},
		{us: 2, op: packet.RCRDMAWriteOnly, psn: 103, payload: 64},
		{us: 3, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64},
		{us: 4, op: packet.RCRDMAWriteOnly, psn: 104, payload: 64},
		{us: 5, op: packet.RCRDMAWriteOnly, psn: 105, payload: 64, ackReq: true},
		{us: 15, fromB: true, op: packet.RCAcknowledge, psn: 105, syn: ack},
	}
	rep := analyse(build(t, ps), Options{})
	c := rep.Connections[0]
	a := c.Flows[0]
	require.Zero(t, a.PSNGaps)
	require.Zero(t, a.PSNMissing)
	require.Zero(t, a.FirstGapFrame)
	require.Zero(t, a.PSNRewinds)
	require.Equal(t, 6, a.Messages)
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
	for ref, n := range rep.Notes {
		require.Equal(t, Note{}, *n, "frame %d", ref.Frame)
	}
	total := 0
	for _, iv := range c.Goodput {
		total += iv.Bytes
	}
	require.Equal(t, 6*64, total)
}

// TestReorderPartlyLate checks that late arrivals shrink a gap they do not
// close: 100 jumps to 105 (gap 101..104), 104 and 102 come late, and the
// gap still misses 101 and 103. The note on 105's frame spans 101..103,
// the first to the last PSN still missing; neither late one is a rewind.
func TestReorderPartlyLate(t *testing.T) {
	ps := []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 105, payload: 64},
		{us: 2, op: packet.RCRDMAWriteOnly, psn: 104, payload: 64},
		{us: 3, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64},
	}
	rep := analyse(build(t, ps), Options{})
	a := rep.Connections[0].Flows[0]
	require.Equal(t, 1, a.PSNGaps)
	require.Equal(t, 2, a.PSNMissing)
	require.Equal(t, 2, a.FirstGapFrame)
	require.Zero(t, a.PSNRewinds)
	require.Equal(t, 1, a.Messages, "102, 104 and 105 wait for 101")
	n := rep.Notes[Ref{Frame: 2}]
	require.NotNil(t, n)
	require.Equal(t, 3, n.Gap)
	require.Equal(t, uint32(101), n.GapPSN)
	require.Nil(t, rep.Notes[Ref{Frame: 3}])
	require.Nil(t, rep.Notes[Ref{Frame: 4}])
}

// TestReorderThenResend checks that a reordered capture still counts a
// real retransmission: 103 comes before 102 (reordered, no loss), then the
// requester resends 104, which the capture held before. The resend is one
// rewind with a recovery episode; the late 102 is neither.
func TestReorderThenResend(t *testing.T) {
	ps := []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 101, payload: 64},
		{us: 2, op: packet.RCRDMAWriteOnly, psn: 103, payload: 64},
		{us: 3, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64},
		{us: 4, op: packet.RCRDMAWriteOnly, psn: 104, payload: 64, ackReq: true},
		{us: 5000, op: packet.RCRDMAWriteOnly, psn: 104, payload: 64, ackReq: true}, // timeout: resent
		{us: 5010, fromB: true, op: packet.RCAcknowledge, psn: 104, syn: ack},
	}
	rep := analyse(build(t, ps), Options{})
	c := rep.Connections[0]
	a := c.Flows[0]
	require.Zero(t, a.PSNGaps)
	require.Equal(t, 1, a.PSNRewinds)
	require.Equal(t, 5, a.Messages)
	require.Len(t, c.Recoveries, 1)
	require.Equal(t, CauseTimeout, c.Recoveries[0].Cause)
	require.Equal(t, 6, c.Recoveries[0].RewindFrame)
	require.True(t, rep.Notes[Ref{Frame: 6}].Resent)
	require.Nil(t, rep.Notes[Ref{Frame: 4}])
}

// TestLossBeforeCaptureIsNoLateArrival checks that a PSN lost before the
// capture point and resent after a sequence NAK is a retransmission, not a
// late arrival, although the capture never held its first copy: the NAK
// came after the gap. 102 is missing, the responder NAKs it, and the
// requester resends 102 and 103: one gap, one rewind, one episode.
func TestLossBeforeCaptureIsNoLateArrival(t *testing.T) {
	ps := []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 101, payload: 64},
		{us: 2, op: packet.RCRDMAWriteOnly, psn: 103, payload: 64},
		{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: seqNAK},
		{us: 20, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64},
		{us: 21, op: packet.RCRDMAWriteOnly, psn: 103, payload: 64, ackReq: true},
		{us: 30, fromB: true, op: packet.RCAcknowledge, psn: 103, syn: ack},
	}
	rep := analyse(build(t, ps), Options{})
	c := rep.Connections[0]
	a := c.Flows[0]
	require.Equal(t, 1, a.PSNGaps)
	require.Equal(t, 1, a.PSNMissing)
	require.Equal(t, 1, a.PSNRewinds)
	require.Equal(t, 4, a.Messages)
	require.Len(t, c.Recoveries, 1)
	require.Equal(t, CauseSequenceNAK, c.Recoveries[0].Cause)
}
