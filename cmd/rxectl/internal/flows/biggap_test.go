package flows

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestBigSkippedGapCostsLittle: a go-back-N resend round that skips a
// gap of millions of PSNs (two runs' packets on the same QP numbers in
// one capture, or a PSN the capture got wrong) is counted at the cost of
// the packets, not of the PSNs skipped: the analysis of its five packets
// allocates under a megabyte.
func TestBigSkippedGapCostsLittle(t *testing.T) {
	const far = 0x300000
	ps := []pk{
		{us: 0, op: packet.RCSendOnly, psn: 0, payload: 10},
		{us: 1, op: packet.RCSendOnly, psn: far, payload: 10, ackReq: true},
		{us: 5000, op: packet.RCSendOnly, psn: 0, payload: 10}, // a timeout's resend round
		{us: 5001, op: packet.RCSendOnly, psn: far, payload: 10, ackReq: true},
		{us: 5010, fromB: true, op: packet.RCAcknowledge, psn: far, syn: packet.SyndromeACKUnlimited},
	}
	pkts := build(t, ps)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep := analyse(pkts, Options{})
	runtime.ReadMemStats(&after)
	require.Len(t, rep.Connections, 1)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")
}
