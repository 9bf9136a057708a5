package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteStatsSingular: the statistics' counts of one read in the
// singular and other counts in the plural, line by line.
func TestWriteStatsSingular(t *testing.T) {
	sr := func(n uint64) Transport {
		return Transport{SRHolesReceived: n, SRProgressReceived: n, SRPacketsResent: n, ReadHoleRereads: n, SRReadRequestsLost: n,
			SRHolesReported: n, SRProgressReports: n, SRHolePSNs: n, OOOHeld: n, OOOPlaced: n, OOOPeak: n, OOOBytesPeak: n, OOODropped: n}
	}
	all := func(n uint64) *Final {
		tr := sr(n)
		tr.Retransmits, tr.Timeouts, tr.RcvdSeqErr, tr.RcvdRNRErr, tr.DuplicateRequest, tr.OutOfSeqRequest = n, n, n, n, n, n
		tr.RTOExpiries, tr.TailProbes, tr.IBTimeouts, tr.Window, tr.WindowDecr, tr.RetryDoubled = n, n, n, int(n), n, n
		return &Final{Device: Device{Name: "rxe0", Addr: "10.0.0.1:4791", SentPkts: n, RcvdPkts: n}, Transport: tr,
			Capture: &Capture{File: "run.pcap", Sent: n, Received: 0}}
	}
	tests := []struct {
		name string
		st   *Final
		want []string
	}{
		{"one", all(1), []string{
			" Device rxe0 10.0.0.1:4791: sent 1 packet, received 1;",
			"   transport: 1 packet retransmitted, 1 timeout, 1 sequence-error NAK and 1 RNR NAK received; 1 duplicate request and 1 out-of-sequence request received\n",
			"   recovery: srtt 0 µs, 1 recovery timer expiry (1 tail probe), 1 IB ACK timeout; window 1 packet, 1 decrease\n",
			"   go-back-N: 1 retry sent its first packet twice\n",
			"   selective repeat: requester 1 hole report and 1 progress report received, 1 packet resent, 1 READ hole re-read, 1 READ request found lost; " +
				"responder 1 hole reported, 1 progress report, 1 packet lost (seen as a hole), 1 request held out of order (1 of them placed on arrival), buffer peak 1 packet (1 byte), 1 dropped\n",
			" Capture run.pcap: 1 packet (1 sent, 0 received)\n",
		}},
		{"two", all(2), []string{
			" Device rxe0 10.0.0.1:4791: sent 2 packets, received 2;",
			"   transport: 2 packets retransmitted, 2 timeouts, 2 sequence-error NAKs and 2 RNR NAKs received; 2 duplicate requests and 2 out-of-sequence requests received\n",
			"   recovery: srtt 0 µs, 2 recovery timer expiries (2 tail probes), 2 IB ACK timeouts; window 2 packets, 2 decreases\n",
			"   go-back-N: 2 retries sent their first packet twice\n",
			"   selective repeat: requester 2 hole reports and 2 progress reports received, 2 packets resent, 2 READ holes re-read, 2 READ requests found lost; " +
				"responder 2 holes reported, 2 progress reports, 2 packets lost (seen as holes), 2 requests held out of order (2 of them placed on arrival), buffer peak 2 packets (2 bytes), 2 dropped\n",
			" Capture run.pcap: 2 packets (2 sent, 0 received)\n",
		}},
		{"none", all(0), []string{
			" Device rxe0 10.0.0.1:4791: sent 0 packets, received 0;",
			"   transport: 0 packets retransmitted, 0 timeouts, 0 sequence-error NAKs and 0 RNR NAKs received; 0 duplicate requests and 0 out-of-sequence requests received\n",
			"   recovery: srtt 0 µs, 0 recovery timer expiries (0 tail probes), 0 IB ACK timeouts; window 0 packets, 0 decreases\n",
			" Capture run.pcap: 0 packets (0 sent, 0 received)\n",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			WriteStats(&b, tc.st, nil)
			for _, s := range tc.want {
				require.Contains(t, b.String(), s)
			}
		})
	}
}

// TestStatusLineSingular: the live status line of a -D run writes a
// message size of one byte and one iteration in the singular.
func TestStatusLineSingular(t *testing.T) {
	var b bytes.Buffer
	l := &StatusLine{w: &b, unit: "MiB/sec"}
	l.Show(BW{Size: 1, Iters: 1, Avg: 0.5, MsgRate: 0.25})
	require.Equal(t, "\r 1 byte: 1 iteration, 0.50 MiB/sec, 0.250000 Mpps so far ", b.String())
	b.Reset()
	l.Show(BW{Size: 2, Iters: 3, Avg: 0.5, MsgRate: 0.25})
	require.Equal(t, "\r 2 bytes: 3 iterations, 0.50 MiB/sec, 0.250000 Mpps so far ", b.String())
}
