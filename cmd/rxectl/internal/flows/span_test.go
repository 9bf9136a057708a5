package flows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestReadSpan: a READ request consumes one PSN per response packet
// (IBA 9.7.2), one for a zero-length READ; without FIRST or MIDDLE
// packets, which carry exactly one PMTU, the PMTU is unknown and so is a
// READ's span (the ONLY packets' payloads say nothing of it): no gap is
// counted after it.
func TestReadSpan(t *testing.T) {
	read := func(us int, psn, dmaLen uint32) pk {
		return pk{us: us, op: packet.RCRDMAReadRequest, psn: psn, dmaLen: dmaLen, ackReq: true}
	}
	only := func(us int, psn uint32, n int) pk {
		return pk{us: us, fromB: true, op: packet.RCRDMAReadResponseOnly, psn: psn, payload: n, syn: ack}
	}
	send := func(us int, psn uint32) pk {
		return pk{us: us, op: packet.RCSendOnly, psn: psn, payload: 100, ackReq: true}
	}
	tests := []struct {
		name string
		ps   []pk
		opts Options
		pmtu int
	}{
		{"zero-length READ", []pk{read(0, 10, 0), only(5, 10, 0), send(10, 11)}, Options{PMTU: 1024}, 1024},
		{"two-packet READ", []pk{read(0, 10, 2048), send(1, 12)}, Options{PMTU: 1024}, 1024},
		{"unknown PMTU", []pk{read(0, 10, 1000), only(5, 10, 1000), send(10, 11), read(20, 12, 5000), send(21, 17)}, Options{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, tc.ps), tc.opts)
			c := rep.Connections[0]
			require.Equal(t, tc.pmtu, c.PMTU)
			f := c.Flows[0]
			require.Equal(t, []int{0, 0, 0}, []int{f.PSNGaps, f.PSNMissing, f.PSNRewinds})
		})
	}
}

// TestSilenceThreshold: with no Options.Silence, a quiet time counts as
// a retransmission timeout from 1 ms, or from 4 median RTTs when that is
// longer.
func TestSilenceThreshold(t *testing.T) {
	h := &half{}
	require.Equal(t, time.Millisecond, h.silenceThreshold())
	h.rtts = []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 900 * time.Microsecond}
	require.Equal(t, time.Millisecond, h.silenceThreshold())
	h.rtts = []time.Duration{100 * time.Microsecond, 300 * time.Microsecond, 900 * time.Microsecond}
	require.Equal(t, 1200*time.Microsecond, h.silenceThreshold())
	h.silence = 5 * time.Millisecond
	require.Equal(t, 5*time.Millisecond, h.silenceThreshold())
}

// TestManyReorderedGaps: requests that overtook others over several
// gaps, the late ones arriving after, are late arrivals, not losses.
func TestManyReorderedGaps(t *testing.T) {
	var ps []pk
	for i, psn := range []uint32{1, 3, 5, 7, 9, 2, 4, 6, 8} {
		ps = append(ps, pk{us: i, op: packet.RCSendOnly, psn: psn, payload: 100})
	}
	rep := analyse(build(t, ps), Options{})
	f := rep.Connections[0].Flows[0]
	require.Equal(t, []int{0, 0, 0, 4}, []int{f.PSNGaps, f.PSNMissing, f.PSNRewinds, f.PSNLate})
	require.Equal(t, 9, f.Messages)
}
