package flows_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

const captures = "../../../../testdata/captures/"

// TestRealCaptures checks the analysis of the real captures against counts
// made by hand from their dumps (and the perftest commands that made them).
func TestRealCaptures(t *testing.T) {
	type flow struct {
		packets, messages int
	}
	tests := []struct {
		file  string
		conns [][]flow // per connection, per flow
		rtt   []int    // RTT samples per connection
	}{
		// 20 SENDs of 4 KiB at PMTU 1024 (FIRST, 2 MIDDLE, LAST) and 20 ACKs,
		// after the RDMA CM exchange (UD on QP1, 6 + 4 MADs) and perftest's
		// 11 SEND_ONLY + ACK handshakes each way.
		{"kernel-rxe_rdmacm_send_4KiB.pcap", [][]flow{{{6, 6}}, {{4, 4}}, {{22, 11}, {22, 11}}, {{80, 20}, {20, 0}}}, []int{0, 0, 22, 20}},
		// 20 UD SENDs of 512 bytes, no responses.
		{"kernel-rxe_ud_send_512B.pcap", [][]flow{{{20, 20}}}, []int{0}},
		// 10 UC WRITEs of 64 KiB: FIRST, 62 MIDDLE, LAST.
		{"kernel-rxe_uc_write_64KiB.pcap", [][]flow{{{640, 10}}}, []int{0}},
		// Huawei: 33 SEND FIRST + LAST_WITH_IMMEDIATE and 1 ONLY_WITH_IMMEDIATE
		// one way, 1 ONLY_WITH_IMMEDIATE the other, 37 ACKs in all.
		{"huawei_hiroce_oferby_proxy.pcap", [][]flow{{{68, 34}, {37, 1}}}, []int{36}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			rep := flowstest.Analyse(readPcap(t, captures+tc.file), flows.Options{})
			require.Len(t, rep.Connections, len(tc.conns))
			for i, c := range rep.Connections {
				require.Len(t, c.Flows, len(tc.conns[i]))
				for j, f := range c.Flows {
					require.Equal(t, tc.conns[i][j], flow{f.Packets, f.Messages}, "connection %d flow %d", i+1, j+1)
					require.Zero(t, f.PSNGaps+f.PSNRewinds+f.NAKs.Total(), "a clean capture")
				}
				require.Empty(t, c.Recoveries)
				require.Empty(t, c.Explain)
				require.Equal(t, tc.rtt[i], c.RTT.Samples, "connection %d", i+1)
			}
		})
	}
}

// TestPreview prints the report of the capture named by $FLOWS_PCAP.
func TestPreview(t *testing.T) {
	name := os.Getenv("FLOWS_PCAP")
	if name == "" {
		t.Skip("set FLOWS_PCAP to print the report of a capture")
	}
	rep := flowstest.Analyse(readPcap(t, name), flows.Options{})
	require.NoError(t, rep.WriteText(os.Stdout))
}

func readPcap(t *testing.T, name string) []flows.Packet {
	t.Helper()
	pkts, err := flowstest.ReadPcap(name)
	require.NoError(t, err)
	return pkts
}
