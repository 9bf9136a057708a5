package flows

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestWriteTextSingular: counts of one read in the singular in the text
// report (a packet, a PSN missing, an RTT sample), counts of two or more
// in the plural; the opcode table keeps its columns either way.
func TestWriteTextSingular(t *testing.T) {
	send := func(us int, psn uint32) pk {
		return pk{us: us, op: packet.RCSendOnly, psn: psn, payload: 4, ackReq: true}
	}
	acked := func(us int, psn uint32) pk {
		return pk{us: us, fromB: true, op: packet.RCAcknowledge, psn: psn, syn: ack}
	}
	tests := []struct {
		name string
		ps   []pk
		want []string
	}{
		{"one of each", []pk{send(0, 1), send(1, 3), acked(11, 3)}, []string{
			"  10.0.0.2:4791 → 10.0.0.1:49152 QP 0x000011: 1 packet, 20 bytes, frames 3-3\n",
			"    RC_ACKNOWLEDGE                            1 packet            20 bytes\n",
			"    messages 1, psn_gaps 1 (1 PSN missing), psn_rewinds 0, first gap at frame 2\n",
			"  RTT: 1 sample, min 10 µs, median 10 µs, max 10 µs\n",
		}},
		{"two of each", []pk{send(0, 1), acked(10, 1), send(20, 4), acked(50, 4)}, []string{
			"  10.0.0.2:4791 → 10.0.0.1:49152 QP 0x000011: 2 packets, 40 bytes, frames 2-4\n",
			"    RC_ACKNOWLEDGE                            2 packets           40 bytes\n",
			"    messages 1, psn_gaps 1 (2 PSNs missing), psn_rewinds 0, first gap at frame 3\n",
			"  RTT: 2 samples, min 10 µs, median 20 µs, max 30 µs\n",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, analyse(build(t, tc.ps), Options{}).WriteText(&b))
			for _, line := range tc.want {
				require.Contains(t, b.String(), line)
			}
		})
	}
}

// TestExplainOneRNRNAK: an RNR NAK with no resend in the capture is
// explained in the singular.
func TestExplainOneRNRNAK(t *testing.T) {
	rep := analyse(build(t, []pk{
		{us: 0, op: packet.RCSendOnly, psn: 1, payload: 4, ackReq: true},
		{us: 10, fromB: true, op: packet.RCAcknowledge, psn: 1, syn: rnr12},
	}), Options{})
	require.Contains(t, rep.Connections[0].Explain, "1 RNR NAK: the responder had no receive WQE posted.")
}

// TestFirstFramesWord: the frames of probe and unexplained episodes are
// "at frame N" for one episode and "at frames N, M" for more.
func TestFirstFramesWord(t *testing.T) {
	ep := func(c Cause, frame int) Recovery { return Recovery{Cause: c, RewindFrame: frame} }
	require.Equal(t, "1 probe (one packet sent again, then on at the highest PSN; at frame 7)",
		recoverySentence([]Recovery{ep(CauseProbe, 7)}))
	require.Equal(t, "2 probes (one packet sent again, then on at the highest PSN; at frames 7, 9)",
		recoverySentence([]Recovery{ep(CauseProbe, 7), ep(CauseProbe, 9)}))
	require.Equal(t, "4 resends with no cause in the capture (at frames 3, 5, 8 and 1 more)",
		recoverySentence([]Recovery{ep(CauseUnknown, 3), ep(CauseUnknown, 5), ep(CauseUnknown, 8), ep(CauseUnknown, 11)}))
}
