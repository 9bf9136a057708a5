package rxe

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev/rawudp"
)

// gsoBaseline accumulates the GSO+GRO raw-UDP rounds of a benchmark.
type gsoBaseline struct {
	bytes float64
	time  time.Duration
	cpu   time.Duration
}

// benchGSORound measures raw UDP with GSO and GRO for as many full-MTU
// datagrams as n 64 KiB operations carry.
func benchGSORound(ctx context.Context, b *testing.B, n int) rawudp.Result {
	var res rawudp.Result
	var err error
	pprof.Do(ctx, pprof.Labels("phase", "rawUDP"), func(ctx context.Context) {
		res, err = rawudp.Measure(ctx, rawudp.Config{Size: benchDatagram, Count: max(n*benchPackets, 1024), GSO: true})
	})
	require.NoError(b, err)
	return res
}

func (g *gsoBaseline) add(r rawudp.Result, cpu time.Duration) {
	g.bytes += float64(r.Received) * float64(r.Size)
	g.time += r.Elapsed
	g.cpu += cpu
}

// report adds the GSO metrics beside the RoCE rate mbps.
func (g *gsoBaseline) report(b *testing.B, mbps float64) {
	if g.time <= 0 || g.bytes == 0 {
		return
	}
	gsoMBps := g.bytes / g.time.Seconds() / 1e6
	b.ReportMetric(gsoMBps, "gsoUDP-MB/s")
	b.ReportMetric(mbps/gsoMBps, "gso-ratio")
	b.ReportMetric(float64(g.cpu.Microseconds())*benchMsg/g.bytes, "gsoUDP-cpu-µs/64KiB")
}
