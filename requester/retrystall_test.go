package requester

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestErrorRetryRewindNoStall: after a go-back-N rewind (timeout or
// sequence NAK) the head WQE is always sendable or a timer is armed, even
// with a fenced WQE, a READ/atomic limit of 1 and an RNR NAK in the mix:
// at every quiescent point (nothing to send, nothing on the wire, WQEs
// outstanding) Deadline is set, and every WR completes successfully.
func TestErrorRetryRewindNoStall(t *testing.T) {
	for mode := range 4 {
		for drop := range 64 { // bit i drops the i-th request packet
			for _, rnrAt := range []int{-1, 0, 1, 2, 3} {
				t.Run(fmt.Sprintf("mode=%d/drop=%06b/rnr=%d", mode, drop, rnrAt), func(t *testing.T) {
					cfg := baseConfig(1024, 0x100)
					cfg.MaxRdAtomic = 1
					cfg.Timeout = 8
					cfg.SigAll = true
					cfg.Recovery.Off = mode&1 == 0 // IB timer only: the suspect path
					cfg.SelectiveRepeat = mode&2 != 0
					h, f, _ := withResponder(t, cfg, 1<<16, verbs.AccessRemoteRead|verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic, 3)
					f.sr.on = cfg.SelectiveRepeat
					h.post(&verbs.SendWR{ID: 0, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 2048, LKey: lkeyA}}})
					h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey,
						SGList: []verbs.SGE{{Addr: baseA + 4096, Length: 2048, LKey: lkeyA}}})
					h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRAtomicFetchAndAdd, RemoteAddr: rbase + 8192, RKey: rkey, CompareAdd: 1,
						SGList: []verbs.SGE{{Addr: baseA + 8192, Length: 8, LKey: lkeyA}}})
					h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendFence,
						SGList: []verbs.SGE{{Addr: baseA + 12288, Length: 100, LKey: lkeyA}}})
					h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendFence, RemoteAddr: rbase + 16384, RKey: rkey,
						SGList: []verbs.SGE{{Addr: baseA, Length: 3000, LKey: lkeyA}}})
					sent := 0
					for steps := 0; h.r.Outstanding() > 0; steps++ {
						require.Less(t, steps, 1000, "no progress")
						_, failed := h.r.Failed()
						require.False(t, failed)
						h.now = h.now.Add(time.Microsecond)
						for b := h.next(); b != nil; b = h.next() {
							if sent == rnrAt {
								f.rq = 0
							} else if f.rq == 0 {
								f.rq = -1
							}
							if sent < 6 && drop&(1<<sent) != 0 {
								sent++
								continue
							}
							sent++
							f.handle(b)
						}
						out := f.take()
						for _, o := range out {
							h.recv(o)
						}
						if len(out) == 0 && !h.r.Pending() && h.r.Outstanding() > 0 {
							d := h.r.Deadline()
							require.False(t, d.IsZero(), "stalled: %d outstanding, nothing to send, no timer", h.r.Outstanding())
							h.now = d
							h.r.OnTimeout(h.now)
						}
					}
					require.Equal(t, []uint64{0, 1, 2, 3, 4}, h.cq.ids())
					for _, wc := range h.cq.wcs {
						require.Equal(t, verbs.WCSuccess, wc.Status)
					}
					require.Len(t, f.msgs, 2)
					_ = packet.PSN(0)
				})
			}
		}
	}
}
