package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRHoldReadRequests overtakes a READ request on the way: the
// responder reports a hole as long as the READ (its response PSNs) when
// the next READ request arrives. The reorder hold counts request packets,
// as RFC 8985's reordering threshold counts packets sent after the lost
// one, not PSNs: the READ is asked again only once the responder reports
// received the request srHoldPackets request packets after it, not at
// the first report (a READ of four responses is four PSNs, as far as a
// threshold of four PSNs at once).
func TestSRHoldReadRequests(t *testing.T) {
	const reads, size = 7, 4 * srPMTU // request PSNs 0, 4, 8, 12, 16, 20, 24
	for _, tc := range []struct {
		name     string
		progress int // a progress report's PSN offset (0: none)
		want     int // re-reads of the first READ
	}{
		{"hole-only", 0, 0},
		{"three-later", 16, 0}, // the requests at 4, 8 and 12 received
		{"four-later", 20, 1},  // and the one at 16
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := srSetup(t)
			for i := range reads {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					RemoteAddr: rbase + uint64(i*size), RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
			}
			require.Len(t, h.drain(), reads, "one request per READ")
			h.now = h.now.Add(time.Millisecond)
			h.recv(srHoleReport(srSQ, srSQ.Add(4))) // the first READ's request missing, the second's held
			if tc.progress > 0 {
				h.recv(srHoleReport(srSQ.Add(tc.progress), srSQ.Add(tc.progress)))
			}
			require.Equal(t, tc.want, sentWithPSN(t, h.drain(), srSQ))
		})
	}
}

// TestSRReorderWindowFloor: a hole with too few packets sent after it to
// count (a flight's tail) is held for the reorder window, a quarter of
// SRTT but at least srMinReorderWindow: with an RTT near zero (the
// packets that fill the hole one receive batch behind its report), the
// hole is not resent at once.
func TestSRReorderWindowFloor(t *testing.T) {
	h, _, _ := srSetup(t)
	h.post(&verbs.SendWR{ID: 100, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.recv(ack(srSQ)) // at once: an RTT of zero
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTTSamples)
	require.Less(t, rc.SRTT, 4*srMinReorderWindow)
	p := srSQ.Next()
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4 * srPMTU, LKey: lkeyA}}})
	require.Len(t, h.drain(), 4)
	resent := func() int {
		if d := h.r.Deadline(); !d.IsZero() && !h.now.Before(d) {
			h.r.OnTimeout(h.now)
		}
		return sentWithPSN(t, h.drain(), p.Add(1))
	}
	h.recv(srHoleReport(p.Add(1), p.Add(2))) // the second packet missing, the third held
	require.Zero(t, resent(), "held for the reorder window")
	h.now = h.now.Add(srMinReorderWindow - time.Microsecond)
	require.Zero(t, resent(), "still within the window's floor")
	h.now = h.now.Add(time.Microsecond)
	require.Equal(t, 1, resent(), "resent once the window passed")
}

// sentWithPSN returns how many of the packets sent have PSN psn.
func sentWithPSN(t *testing.T, sent [][]byte, psn packet.PSN) int {
	t.Helper()
	n := 0
	for _, b := range sent {
		if parse(t, b).PSN() == psn {
			n++
		}
	}
	return n
}
