package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestRDMACMHeaderServerBlock: with -R perftest's header
// (ctx_print_test_info) adds to the "Data ex. method" line the TOS of
// -T, and on the server the box asking for the client's rdma_cm QP.
func TestRDMACMHeaderServerBlock(t *testing.T) {
	port := sharedUDPPort(t)
	tests := []struct {
		extra  []string
		method string // the "Data ex. method" line, both ends
	}{
		{nil, " Data ex. method : rdma_cm\n"},
		{[]string{"-T", "106"}, " Data ex. method : rdma_cm \tTOS    : 106\n"},
	}
	for _, tc := range tests {
		common := append([]string{"-R", "--udp-port", port, "-n", "20", "-s", "64"}, tc.extra...)
		srvOut, cliOut, serr, cerr := runCMEnds(t, "write-bw", "write-bw",
			append([]string{"--bind", "127.0.0.1"}, common...),
			append([]string{"127.0.0.1", "--bind", "127.0.0.2"}, common...))
		require.NoError(t, cerr)
		require.NoError(t, serr)
		require.Contains(t, srvOut, tc.method+report.ResultLine+"\n"+
			" Waiting for client rdma_cm QP to connect\n"+
			" Please run the same command with the IB/RoCE interface IP\n", "%v", tc.extra)
		require.Contains(t, cliOut, tc.method, "%v", tc.extra)
		require.NotContains(t, cliOut, "Waiting for client rdma_cm QP", "%v", tc.extra)
	}
}
