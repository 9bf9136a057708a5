package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Parameters of BenchmarkWrite2BRate, after rxectl write-bw -s 2 (and
// ib_write_bw): tx depth 128, every 100th work request signaled (cq_mod).
const (
	rateDepth  = 128
	rateSignal = 100
)

// BenchmarkWrite2BRate measures the 2-byte RDMA WRITE message rate over
// loopback UDP (127.0.0.1 to 127.0.0.2, PMTU 4096) as rxectl write-bw -s 2
// does: one work request per PostSend, up to rateDepth outstanding, every
// rateSignal'th signaled, the poster sleeping in CQ.Wait when the queue is
// full. Mpps is messages per second; syscalls/op counts the recvmmsg and
// sendmmsg calls of both devices per message, pkts/sendmmsg the datagrams
// per sendmmsg of the requester's device (WRITEs) and of the responder's
// (ACKs).
func BenchmarkWrite2BRate(b *testing.B) {
	a, z, _ := udpPair(b, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := &rateStream{a: a, z: z, wcs: make([]WC, 64), ctx: ctx}
	r.wr = SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 2)},
		RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()}
	require.NoError(b, r.run(10*rateDepth)) // warm up
	ca0, cz0 := benchSnap(a.dev), benchSnap(z.dev)
	b.ReportAllocs()
	b.ResetTimer()
	require.NoError(b, r.run(b.N))
	b.StopTimer()
	ca, cz := benchSnap(a.dev).sub(ca0), benchSnap(z.dev).sub(cz0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(ca.calls()+cz.calls())/float64(b.N), "syscalls/op")
	b.ReportMetric(float64(ca.sent)/float64(max(ca.writes, 1)), "pkts/sendmmsg")
	b.ReportMetric(float64(cz.sent)/float64(max(cz.writes, 1)), "acks/sendmmsg")
}

// rateStream posts wr from a, one work request per PostSend, keeping up to
// rateDepth outstanding and signaling every rateSignal'th, as rxectl's
// bandwidth client does (runBWClient).
type rateStream struct {
	a, z         *end
	wr           SendWR
	wcs          []WC
	ctx          context.Context
	posted, done int
}

// run posts n more work requests and waits until all have completed (the
// last one is signaled).
func (r *rateStream) run(n int) error {
	target := r.posted + n
	for r.done < target {
		for r.posted < target && r.posted-r.done < rateDepth {
			wr := r.wr
			r.posted++
			if r.posted%rateSignal == 0 || r.posted == target {
				wr.Flags |= SendSignaled
				wr.ID = uint64(r.posted)
			}
			if _, err := r.a.qp.PostSend(wr); err != nil {
				return err
			}
		}
		k, err := r.a.cq.Wait(r.ctx, r.wcs)
		if err != nil {
			return fmt.Errorf("waiting for completions (%d of %d done): %w", r.done, target, err)
		}
		for _, wc := range r.wcs[:k] {
			if wc.Status != WCSuccess {
				return fmt.Errorf("completion after %d WRs: %v", r.done, wc.Status)
			}
			r.done = int(wc.ID)
		}
	}
	return nil
}

// TestDataPathAllocsPostOne requires that small RDMA WRITEs posted one per
// PostSend, as rxectl's bandwidth tests post them (PostSend(wr) passes a
// one-element slice), carried and completed over loopback UDP allocate
// nothing once warmed up: PostSend's variadic slice stays on the caller's
// stack.
func TestDataPathAllocsPostOne(t *testing.T) {
	if benchRaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	a, z, _ := udpPair(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &rateStream{a: a, z: z, wcs: make([]WC, 64), ctx: ctx}
	r.wr = SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 2)},
		RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()}
	require.NoError(t, r.run(4*rateDepth))
	var err error
	allocs := testing.AllocsPerRun(20, func() {
		if e := r.run(rateSignal); e != nil && err == nil {
			err = e
		}
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per %d 2-byte WRITEs posted one by one", rateSignal)
}
