package flows_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestCorruptedCapture checks the analysis of a real capture of corrupted
// requests. The capture, testdata/corrupt.pcap, is of rxectl write-bw
// --loopback -n 20 -s 4096 -m 1024 --corrupt 0.04,dir=send --seed 4
// --gso=off --pcap: the client corrupted 7 of its datagrams (one bit after
// the BTH), the server counted 7 bad ICRCs, and the client retransmitted 7
// packets. The capture holds the 7 with a bad ICRC: 6 carry the PSNs of the
// 6 one-PSN gaps, and the 7th (frame 94) is a corrupted retransmission of
// PSN 4741040. The analysis used to leave them out and explain the gaps as
// requests lost before the capture point, as it still does when they are
// left out of its input.
func TestCorruptedCapture(t *testing.T) {
	all, err := flowstest.ReadPcap("testdata/corrupt.pcap")
	require.NoError(t, err)
	good := slices.DeleteFunc(slices.Clone(all), func(p flows.Packet) bool { return p.BadICRC })
	require.Len(t, all, 106)
	require.Len(t, good, 99)
	tests := []struct {
		name       string
		pkts       []flows.Packet
		bad        int
		badFrames  []int
		psnCorrupt int
		explain    string
	}{{
		name: "as captured", pkts: all,
		bad: 7, badFrames: []int{18, 23, 29, 53, 65, 73, 94}, psnCorrupt: 6,
		explain: "Requests corrupted before the capture point (6 PSNs in 6 gaps, first at frame 18): the capture holds them with a bad ICRC, " +
			"and the receiver dropped them; recovered by 1 selective resend in 898 µs and 1 ACK timeout of 4.4 ms at frame 105.",
	}, {
		name: "bad-ICRC packets left out", pkts: good,
		explain: "Requests lost before the capture point (6 PSNs in 6 gaps, first at frame 19); " +
			"recovered by 1 selective resend in 898 µs and 1 ACK timeout of 4.4 ms at frame 105.",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := flowstest.Analyse(tt.pkts, flows.Options{})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			req, resp := c.Flows[0], c.Flows[1]
			require.Equal(t, []int{80, 20}, []int{req.Packets, req.Messages})
			require.Equal(t, []int{6, 6, 19}, []int{req.PSNGaps, req.PSNMissing, req.FirstGapFrame})
			require.Equal(t, tt.bad, req.BadICRC)
			require.Equal(t, tt.badFrames, req.BadICRCFrames)
			require.Equal(t, tt.psnCorrupt, req.PSNCorrupt)
			require.Zero(t, resp.BadICRC)
			require.Zero(t, rep.BadICRCNoFlow)
			require.Equal(t, []string{tt.explain}, c.Explain)
		})
	}
}
