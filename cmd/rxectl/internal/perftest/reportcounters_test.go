package perftest

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestParseReportCounters: -W takes kernel rxe's hw_counters names and
// gorxe's, from the device or summed over the QPs, and the port's packet
// counters; anything else is refused with what there is.
func TestParseReportCounters(t *testing.T) {
	cs, err := parseReportCounters("hw_counters/sent_pkts,hw_counters/rcvd_seq_err,counters/port_xmit_packets,counters/port_rcv_packets,hw_counters/srtt_us")
	require.NoError(t, err)
	require.Equal(t, []reportCounter{
		{name: "hw_counters/sent_pkts", hw: "sent_pkts", device: true},
		{name: "hw_counters/rcvd_seq_err", hw: "rcvd_seq_err"},
		{name: "counters/port_xmit_packets", hw: "sent_pkts", device: true},
		{name: "counters/port_rcv_packets", hw: "rcvd_pkts", device: true},
		{name: "hw_counters/srtt_us", hw: "srtt_us", device: true},
	}, cs)
	for _, tc := range []struct{ list, want string }{
		{"hw_counters/nope", "-W hw_counters/nope: no such counter; hw_counters/ has sent_pkts, rcvd_pkts,"},
		{"counters/port_xmit_data", "gorxe counts the port's packets, not its data words"},
		{"counters/symbol_error", "rxectl's port counters are counters/port_xmit_packets and counters/port_rcv_packets"},
		{"rcvd_seq_err", "a counter is counters/NAME or hw_counters/NAME"},
		{"hw_counters/", "a counter is counters/NAME or hw_counters/NAME"},
		{"hw_counters/sent_pkts,", "a counter is counters/NAME or hw_counters/NAME"},
		{"ports/1/hw_counters/sent_pkts", "a counter is counters/NAME or hw_counters/NAME"},
	} {
		_, err := parseReportCounters(tc.list)
		require.ErrorContains(t, err, tc.want, tc.list)
	}
	require.Contains(t, func() string { _, err := parseReportCounters("hw_counters/x"); return err.Error() }(), "retry_rnr_exceeded_err")
}

// TestReportCountersRun: after each row, each -W counter's movement in
// that row, as perftest's counters_print prints it, and in --json.
func TestReportCountersRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-s", "8192", "-n", "300", "-q", "2",
		"--report-counters", "hw_counters/rdma_sends,counters/port_xmit_packets,hw_counters/retry_rnr_exceeded_err")
	require.Equal(t, cli.ExitOK, code, errs)
	// 600 SENDs of two 4096-byte packets each, and any packet sent again.
	m := regexp.MustCompile(`\n 8192 .*\n\thw_counters/rdma_sends=600\n\tcounters/port_xmit_packets=(\d+)\n\thw_counters/retry_rnr_exceeded_err=0\n\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	sent, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	// The device counts a batch once its sendmmsg returns, and on loopback
	// the peer can receive, answer and complete the last messages within
	// that call: the row's reading may come before the last batch (up to
	// 64 datagrams) is counted, which then shows in the next reading.
	require.GreaterOrEqual(t, sent, 1200-64)

	// With -R the test QPs come from the rdma_cm connections: the first
	// reading is taken once they exist (it used to be skipped, and -W
	// printed nothing); the exchange's QP is not counted.
	out, errs, code = runCmd(t, "send-bw", "-R", "--loopback", "--udp-port", "0", "-s", "8192", "-n", "300", "-q", "2",
		"-W", "hw_counters/rdma_sends,hw_counters/rdma_recvs")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Regexp(t, `\n 8192 .*\n\thw_counters/rdma_sends=600\n\thw_counters/rdma_recvs=0\n\n`, out)

	// -u 18: an ACK timeout of about 1 s (8.6 s of retries), not 67 ms
	// (0.5 s). Both ends of --loopback run in this process; on a 2-CPU
	// machine loaded by other tests, one end's packets have reached the
	// other up to 1.2 s after its requester built them, with no packet
	// lost and no local drop, and 8 expiries of the default timeout, each
	// timed from its retry, ended the run with RETRY_EXC_ERR.
	// -n 5, the fewest a latency test takes: -a's largest messages of
	// 8 MiB make every iteration cost seconds under -race.
	out, errs, code = runCmd(t, "send-lat", "--loopback", "--udp-port", "0", "-s", "2", "-n", "5", "-a", "-u", "18",
		"-W", "hw_counters/rdma_sends,hw_counters/rdma_recvs", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var doc struct {
		Results []report.Lat `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Results, 23)
	for _, r := range doc.Results {
		require.Equal(t, map[string]uint64{"hw_counters/rdma_sends": 5, "hw_counters/rdma_recvs": 5}, r.Counters, "size %d: this size's, not the run's", r.Size)
	}
}
