package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// BenchmarkLoss64K streams 64 KiB SENDs or RDMA WRITEs between two devices
// over loopback UDP, selective repeat negotiated (connect offers it on
// both ends), with no loss and with the fault injector dropping 1 % of
// the requester's datagrams (seed 11), and reports besides MB/s (b.SetBytes):
//
//   - cpu-µs/op: CPU time (user and system, all threads) per 64 KiB;
//   - held/op: requests the responder held behind a hole per operation
//     (each copied into an out-of-order slot and out again);
//   - placed/op: those of them placed on arrival (placeAhead);
//   - window: the requester's window at the end, in PSNs.
//
// The sub-benchmarks of one invocation measure the lossy and the
// loss-free stream of an operation in the same minutes: their MB/s
// ratio is the selective-repeat goodput of issue 13 in process, without
// rxectl (docs/performance.md).
func BenchmarkLoss64K(b *testing.B) {
	for _, op := range []struct {
		name string
		op   WROpcode
	}{{"send", WRSend}, {"write", WRRDMAWrite}} {
		for _, drop := range []string{"0", "1%"} {
			b.Run(op.name+"/drop="+drop, func(b *testing.B) { benchLoss(b, op.op, drop) })
		}
	}
}

// benchLoss is one BenchmarkLoss64K stream: op, with the requester's
// datagrams dropped at rate drop ("0": no fault injector).
func benchLoss(b *testing.B, op WROpcode, drop string) {
	ca, cb := connPair(b, "udp")
	if drop != "0" {
		ca = faults.Wrap(ca, faults.Config{Seed: 11, Rules: parseRules(b, "drop="+drop+",dir=send")})
	}
	a, z := benchPairOn(b, ca, cb, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := warmStream(ctx, b, a, z, op)
	r0 := z.qp.Counters().Responder
	b.SetBytes(benchMsg)
	b.ResetTimer()
	c0 := benchCPUTime()
	require.NoError(b, s.run(b.N))
	cpu := benchCPUTime() - c0
	b.StopTimer()
	r := z.qp.Counters().Responder
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(r.OOOHeld-r0.OOOHeld)/float64(b.N), "held/op")
	b.ReportMetric(float64(r.OOOPlaced-r0.OOOPlaced)/float64(b.N), "placed/op")
	b.ReportMetric(float64(a.qp.Counters().Requester.Recovery.Window), "window")
}
