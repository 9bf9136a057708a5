package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestBidirSum: a -b row (print_full_bw_report with the peer's report)
// has this end's size and iterations, the sums of both directions' peak,
// average and message rate, and this end's --cpu_util figures.
func TestBidirSum(t *testing.T) {
	util, secs, remUtil, remSecs := 10.0, 0.2, 30.0, 0.4
	own := report.BW{Size: 8, Iters: 1000, Peak: 1.5, Avg: 1.25, MsgRate: 0.5, CPUUtil: &util, CPUSeconds: &secs}
	rem := report.BW{Size: 8, Iters: 999, Peak: 2.5, Avg: 2, MsgRate: 0.25, CPUUtil: &remUtil, CPUSeconds: &remSecs}
	want := report.BW{Size: 8, Iters: 1000, Peak: 4, Avg: 3.25, MsgRate: 0.75, CPUUtil: &util, CPUSeconds: &secs}
	require.Equal(t, want, bidirSum(own, rem, false))
	require.Equal(t, want, bidirSum(own, rem, true), "this end's 1.25 Gb/s needs no six decimals")
}

// TestBidirSendRow: one end of send-bw -b -D counts the messages it sent
// and those it received in its sample window, over the sender's window
// (its count over its rate), or the receiver's when it sent nothing; its
// --cpu_util figures are that window's. Sent 2000 in 2 s (0.001 Mpps),
// received 1000 in 4 s: 3000 messages of 1000 bytes in 2 s, 0.0015 Mpps
// and 3e6 / 2 / 2^20 MiB/s; received alone, 1000 in 4 s.
func TestBidirSendRow(t *testing.T) {
	su, ru := 10.0, 30.0
	sent := report.BW{Size: 1000, Iters: 2000, MsgRate: 0.001, CPUUtil: &su}
	rcvd := report.BW{Size: 1000, Iters: 1000, MsgRate: 0.00025, CPUUtil: &ru}
	r := bidirSendRow(sent, rcvd, false)
	require.Equal(t, uint64(1000), r.Size)
	require.Equal(t, uint64(3000), r.Iters)
	require.InDelta(t, 0.0015, r.MsgRate, 1e-12)
	require.InDelta(t, 3e6/2/0x100000, r.Avg, 1e-9)
	require.Same(t, &su, r.CPUUtil)

	r = bidirSendRow(report.BW{Size: 1000}, rcvd, true)
	require.Equal(t, uint64(1000), r.Iters)
	require.InDelta(t, 0.00025, r.MsgRate, 1e-12)
	require.InDelta(t, 1e6/4/125e6, r.Avg, 1e-12)
	require.Same(t, &ru, r.CPUUtil)
}
