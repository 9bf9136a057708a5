package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// Under selective repeat the window counts packets in flight, not PSNs
// outstanding: what the responder reports received (the end of a hole
// report, a progress report) leaves the flight, so new packets go out
// while the hole at the oldest PSN is repaired, up to what the peer's
// out-of-order buffer holds (Config.PeerOOOLimit) and never further.
func TestSRFlightAccounting(t *testing.T) {
	const window, slots = 8, 20
	for _, tc := range []struct {
		name string
		sr   bool
	}{{"selective-repeat", true}, {"go-back-n", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(srPMTU, srSQ)
			cfg.SelectiveRepeat = tc.sr
			cfg.Window = window
			cfg.PeerOOOLimit = slots * (srPMTU + packet.OOOSlotOverhead)
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
			sent := len(h.drain())
			require.Equal(t, window, sent, "a full window")

			// fresh counts the packets of got sent for the first time.
			fresh := func(got [][]byte) int {
				n := 0
				for _, b := range got {
					if !parse(t, b).PSN().Before(srSQ.Add(sent)) {
						n++
					}
				}
				return n
			}
			// The first packet is lost; the responder holds the next one.
			h.recv(srHoleReport(srSQ, srSQ.Add(1)))
			sent += fresh(h.drain())
			if !tc.sr {
				require.Equal(t, window, sent, "go-back-N takes no hole report")
				return
			}
			require.Equal(t, window+2, sent, "PSNs 0 and 1 are not in flight")
			// Progress: the responder holds everything sent but PSN 0.
			h.recv(srHoleReport(srSQ.Add(sent), srSQ.Add(sent)))
			for range 10 {
				n := fresh(h.drain())
				if n == 0 {
					break
				}
				sent += n
				h.recv(srHoleReport(srSQ.Add(sent), srSQ.Add(sent)))
			}
			require.Equal(t, slots, sent, "bounded by the peer's out-of-order buffer")
			c := h.r.Counters()
			require.Equal(t, uint64(1), c.SRHolesReceived)
			require.Positive(t, c.SRProgress)
			require.Zero(t, c.SRHolesIgnored)

			// The hole fills: the cumulative ACK frees the rest of the span.
			h.recv(ack(srSQ.Add(sent - 1)))
			got := h.drain()
			require.NotEmpty(t, got)
			for _, b := range got {
				require.False(t, parse(t, b).PSN().Before(srSQ.Add(sent)), "nothing resent")
			}
		})
	}
}
