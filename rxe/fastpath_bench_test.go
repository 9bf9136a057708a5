package rxe

import (
	"context"
	"runtime/pprof"
	"slices"
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

// BenchmarkSendLat2B is a 2-byte SEND ping-pong between two devices on
// loopback UDP sockets (Listen's options), one message outstanding, each
// side waiting on its CQ (cq.Wait, as rxectl send-lat without -e polls in
// a loop that parks when empty), beside rawudp.PingPong in the same run:
// half-rtt-µs and raw-half-rtt-µs are medians of half round trips, ratio
// their quotient. Each op is one round trip.
func BenchmarkSendLat2B(b *testing.B) {
	a, z, _ := udpPair(b, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sge := func(e *end) []SGE { return []SGE{e.mr.SGE(0, 2)} }
	post := func(e *end) {
		if _, err := e.qp.PostRecv(RecvWR{SGList: sge(e)}); err != nil {
			b.Fatal(err)
		}
	}
	// wait takes completions until it has seen a receive.
	wait := func(e *end, wcs []WC) {
		for {
			n, err := e.cq.Wait(ctx, wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					b.Fatalf("completion %v", wc.Status)
				}
				if wc.Opcode == WCRecv {
					return
				}
			}
		}
	}
	post(a)
	post(z)
	done := make(chan struct{})
	go func() { // z echoes every message
		defer close(done)
		wcs := make([]WC, 4)
		for range b.N + 100 {
			wait(z, wcs)
			post(z)
			if _, err := z.qp.PostSend(SendWR{Opcode: WRSend, SGList: sge(z)}); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	wcs := make([]WC, 4)
	rtts := make([]time.Duration, 0, b.N)
	for i := range b.N + 100 {
		t0 := time.Now()
		if _, err := a.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: sge(a)}); err != nil {
			b.Fatal(err)
		}
		wait(a, wcs)
		post(a)
		if i >= 100 {
			rtts = append(rtts, time.Since(t0))
		}
	}
	<-done
	b.StopTimer()
	slices.Sort(rtts)
	half := rtts[len(rtts)/2] / 2
	var raw rawudp.PingPongResult
	var err error
	pprof.Do(ctx, pprof.Labels("phase", "rawUDP"), func(ctx context.Context) {
		raw, err = rawudp.PingPong(ctx, 2, 100, max(b.N, 1000))
	})
	require.NoError(b, err)
	b.ReportMetric(float64(half.Nanoseconds())/1e3, "half-rtt-µs")
	b.ReportMetric(float64(raw.Median.Nanoseconds())/1e3, "raw-half-rtt-µs")
	b.ReportMetric(float64(half)/float64(raw.Median), "ratio")
}
