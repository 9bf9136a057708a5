package flows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestHoleReportCause: a selective-repeat hole report is the responder
// asking for the PSNs of a hole again, so the resend that follows it is
// a selective resend, with the report as its evidence, whether the
// requester then goes on at its frontier or has nothing more to send (a
// round that skips nothing); the explanation and the note the ladder
// labels the resent packet with say so. It used to be "unknown": "1
// resend with no cause in the capture", the report in the capture
// notwithstanding.
func TestHoleReportCause(t *testing.T) {
	hole := packet.NAKSyndrome(packet.NAKSelectiveRepeat)
	rep := analyse(build(t, []pk{
		{us: 0, op: packet.RCRDMAWriteOnly, psn: 100, payload: 64},                // 1
		{us: 1, op: packet.RCRDMAWriteOnly, psn: 102, payload: 64, ackReq: true},  // 2: 101 lost
		{us: 5, fromB: true, op: packet.RCAcknowledge, psn: 101, syn: hole},       // 3: hole [101, 102)
		{us: 10, op: packet.RCRDMAWriteOnly, psn: 101, payload: 64, ackReq: true}, // 4: resent
		{us: 15, fromB: true, op: packet.RCAcknowledge, psn: 102, syn: ack},       // 5
	}), Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	require.Len(t, c.Recoveries, 1)
	ep := c.Recoveries[0]
	require.Equal(t, CauseSelective, ep.Cause)
	require.Equal(t, []int{2, 4}, []int{ep.FirstFrame, ep.RewindFrame})
	require.Equal(t, CauseSelective, rep.Notes[Ref{Frame: 4}].Cause)
	require.Equal(t, []string{"Requests lost before the capture point (1 PSN in 1 gap, first at frame 2); recovered by 1 selective resend in 14 µs."}, c.Explain)
}
