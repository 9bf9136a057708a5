package requester

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestReadPartsStaleMark: under go-back-N a response of the oldest READ
// (asked for in parts) placed past a hole is marked in the response bitmap
// (placePart). If the hole is then filled while the READ waits to be sent
// again (a retry rewound it, and advanceParts does not run), the in-order
// responses pass the marked PSN through doRead. The mark must not outlive
// its PSN: 4096 PSNs later (srTrack) it would stand for a response never
// received, and the READ would complete with those bytes missing.
func TestReadPartsStaleMark(t *testing.T) {
	const pmtu, p0 = 256, packet.PSN(0xFFF000)
	const npkts = srTrack + 2 // the last PSN aliases the marked one
	const size = npkts * pmtu
	for _, tc := range []struct {
		name  string
		retry func(h *harness)
	}{
		{"timeout", func(h *harness) {
			h.now = h.r.retrans.When()
			h.r.OnTimeout(h.now)
		}},
		{"rnr-nak", func(h *harness) { h.recv(rnr(p0, 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.MaxReadPkts = 2
			h := newHarness(t, cfg)
			dst := h.mem.add(lkeyA, baseA, size, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
			require.NotEmpty(t, h.drain())
			data := bytes.Repeat([]byte{0xEE}, pmtu)
			rd := func(op packet.Opcode, k int) []byte {
				return resp(op, p0.Add(k), packet.SyndromeACKUnlimited, 1, data)
			}

			// Response 1 (the LAST of part 0) comes before response 0:
			// placed past the hole, and marked.
			h.recv(rd(packet.RCRDMAReadResponseLast, 1))
			require.Equal(t, 1, h.r.sr.ngot)
			tc.retry(h) // the READ waits to be asked for again

			// The hole fills, and the rest streams in order up to the
			// last PSN, which stays missing.
			h.recv(rd(packet.RCRDMAReadResponseFirst, 0))
			h.recv(rd(packet.RCRDMAReadResponseLast, 1))
			h.recv(rd(packet.RCRDMAReadResponseFirst, 2))
			for k := 3; k < npkts-1; k++ {
				h.recv(rd(packet.RCRDMAReadResponseMiddle, k))
			}
			require.Equal(t, p0.Add(npkts-1), h.r.compPSN)
			require.Zero(t, h.r.sr.ngot, "no mark left behind the oldest unacknowledged PSN")

			// The READ is asked for again and any response comes: it
			// must not complete without its last response.
			h.now = h.now.Add(h.r.ack)
			h.r.OnTimeout(h.now)
			h.drain()
			h.recv(rd(packet.RCRDMAReadResponseMiddle, 5)) // a stale duplicate
			require.Empty(t, h.cq.wcs, "the READ completed with its last response missing")

			h.recv(rd(packet.RCRDMAReadResponseOnly, npkts-1))
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
			require.Equal(t, bytes.Repeat([]byte{0xEE}, size), dst.buf)
		})
	}
}
