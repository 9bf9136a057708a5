package flows_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestReorderedCaptureIsNoLoss checks that a real capture of reordered,
// never lost requests shows no loss and counts every message. The capture,
// testdata/reorder.pcap, is of rxectl write-bw --loopback -n 20 -s 4096 -m 1024
// --reorder=0.1,by=2,dir=send --seed 3 --pcap. The run reordered 2 of the
// client's datagrams and lost none: both devices report 0 packets
// retransmitted, and the capture holds each of the 80 request PSNs exactly
// once (tshark: no duplicate infiniband.bth.psn). 20 WRITEs were delivered.
// The analysis used to report the late PSNs as retransmissions with gaps
// and recoveries, and count fewer messages.
func TestReorderedCaptureIsNoLoss(t *testing.T) {
	pkts, err := flowstest.ReadPcap("testdata/reorder.pcap")
	require.NoError(t, err)
	rep := flowstest.Analyse(pkts, flows.Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	req := c.Flows[0]
	t.Logf("messages %d gaps %d missing %d rewinds %d; explain %q", req.Messages, req.PSNGaps, req.PSNMissing, req.PSNRewinds, c.Explain)
	require.Equal(t, 80, req.Packets)
	require.Zero(t, req.PSNGaps, "no PSN is missing from the capture")
	require.Zero(t, req.PSNRewinds, "no PSN was sent twice")
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
	require.Equal(t, 20, req.Messages)
}

// TestReorderedReadResponsesAreNoLoss checks that a real capture of READ
// responses reordered on the way, none lost or resent, shows them as late
// arrivals and no loss. The capture, testdata/read_reorder.pcap, is the
// server's of rxectl read-bw -n 20 -s 4096 -m 1024
// --reorder=0.1,by=2,dir=send --seed 3 --pcap, the client a second
// process: the server reordered 2 of its datagrams and retransmitted
// none, and the capture holds each response PSN once and each READ
// request once. The analysis used to count the late responses as rewinds
// and their holes as 4 READ responses lost in 3 gaps.
func TestReorderedReadResponsesAreNoLoss(t *testing.T) {
	pkts, err := flowstest.ReadPcap("testdata/read_reorder.pcap")
	require.NoError(t, err)
	rep := flowstest.Analyse(pkts, flows.Options{})
	require.Len(t, rep.Connections, 1)
	c := rep.Connections[0]
	req, resp := c.Flows[0], c.Flows[1]
	require.Equal(t, []int{20, 20}, []int{req.Packets, req.Messages})
	require.Equal(t, []int{80, 20}, []int{resp.Packets, resp.Messages})
	for _, f := range c.Flows {
		require.Zero(t, f.PSNGaps+f.PSNMissing+f.PSNRewinds, "%s", f.Name())
	}
	require.Equal(t, 2, resp.PSNLate)
	require.Zero(t, req.PSNLate)
	require.Empty(t, c.Recoveries)
	require.Empty(t, c.Explain)
	for ref, n := range rep.Notes {
		require.Equal(t, flows.Note{}, *n, "frame %d", ref.Frame)
	}
}
