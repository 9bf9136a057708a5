package requester

import (
	"fmt"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestRNRMixed: a stream of SENDs, WRITEs and a READ meets RNR NAKs (the
// responder's receive queue refilled one WQE per RNR wait), in go-back-N
// and selective repeat, from a low PSN and across the 2^24 wrap: every
// work request completes, in order.
func TestRNRMixed(t *testing.T) {
	for _, sr := range []bool{false, true} {
		for _, sq := range []packet.PSN{0x10, packet.PSNMask - 3} {
			t.Run(fmt.Sprintf("sr%v/sq%x", sr, sq), func(t *testing.T) {
				cfg := baseConfig(1024, sq)
				cfg.SelectiveRepeat = sr
				cfg.RNRRetry = 3
				h, f, _ := withResponder(t, cfg, 64<<10, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 1)
				f.sr.on = sr
				f.rq = 1
				f.rnrCode = 1
				ops := []verbs.WROpcode{verbs.WRSend, verbs.WRRDMAWrite, verbs.WRSend, verbs.WRRDMARead, verbs.WRSend, verbs.WRRDMAWriteWithImm, verbs.WRSend}
				for i, op := range ops {
					h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: op, Flags: verbs.SendSignaled, RemoteAddr: rbase + uint64(i)*4096, RKey: rkey,
						SGList: []verbs.SGE{{Addr: baseA + uint64(i)*4096, Length: 3000, LKey: lkeyA}}})
				}
				// RQ refilled one WQE per RNR wait.
				for i := 0; i < 10000 && h.r.Outstanding() > 0; i++ {
					if _, failed := h.r.Failed(); failed {
						break
					}
					b := h.next()
					if b != nil {
						f.handle(b)
					}
					out := f.take()
					for _, o := range out {
						h.recv(o)
					}
					if b == nil && len(out) == 0 {
						d := h.r.Deadline()
						require.False(t, d.IsZero(), "stalled")
						h.now = d
						if h.r.rnrWait.Armed() {
							f.rq++
						}
						h.r.OnTimeout(h.now)
					}
				}
				st, failed := h.r.Failed()
				require.False(t, failed, "%v", st)
				require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, h.cq.ids())
			})
		}
	}
}
