package flows_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestLostReadRequestCaptures checks real captures of 8 READs whose second
// request was dropped before the capture point and sent again: every READ
// was answered whole, so the responses are 8 messages. The resent request
// has a PSN below the highest requested, and the analysis used to take it
// for a re-read of an opened READ and count 7. testdata/read_request_lost.pcap
// is of rxectl read-bw --loopback -n 8 -s 4096 -m 1024
// --drop 'RC_RDMA_READ_REQUEST#2' --pcap (selective repeat: a hole report,
// the lost READ resent alone), testdata/read_request_lost_gbn.pcap the same
// with --selective-repeat=off (a sequence NAK, the lost READ and the six
// after it sent again).
func TestLostReadRequestCaptures(t *testing.T) {
	for _, tc := range []struct {
		file    string
		packets int // READ requests in the capture
	}{
		{"testdata/read_request_lost.pcap", 8},
		{"testdata/read_request_lost_gbn.pcap", 14},
	} {
		t.Run(tc.file, func(t *testing.T) {
			pkts, err := flowstest.ReadPcap(tc.file)
			require.NoError(t, err)
			rep := flowstest.Analyse(pkts, flows.Options{})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			req, resp := c.Flows[0], c.Flows[1]
			require.Equal(t, []int{tc.packets, 8}, []int{req.Packets, req.Messages})
			require.Equal(t, []int{1, 4, 1}, []int{req.PSNGaps, req.PSNMissing, req.PSNRewinds}, "one READ of 4 PSNs lost, sent again")
			require.Equal(t, []int{33, 8}, []int{resp.Packets, resp.Messages}, "8 READs answered whole, and an ACK")
			require.Zero(t, resp.PSNGaps+resp.PSNRewinds)
			require.Len(t, c.Recoveries, 1)
		})
	}
}
