package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev/rawudp"
)

// BenchmarkHopOneGoroutine is a 2-byte SEND ping-pong between two devices
// on loopback UDP sockets driven by one goroutine: it posts a's SEND,
// busy-polls z's CQ for the receive, posts z's answer and busy-polls a's
// CQ for it, so each op is one round trip with no goroutine hand-off, no
// wake-up and no wait for a datagram (a loopback send has queued it at
// the receiving socket when it returns). Beside it the same exchange of
// one 2-byte datagram each way over two UDP sockets on one goroutine
// (raw-hop-ns, rawudp.HopOneGoroutine). A hop's cost (hop-ns, half a round trip) is
// then the processor time of the device's send and receive paths and of
// the kernel's, and hop-ratio says how much of it is gorxe's: the profile
// of this benchmark shows where a latency test's fixed cost per hop goes;
// the benchmark itself allocates nothing, so allocs/op is the path's own.
// A hop carries two RoCE packets, the SEND and the ACK of the peer's
// last one: "gso" sends them as one GSO buffer (the default), "nogso" as
// two datagrams (Options.NoGSO). reads-per-hop and writes-per-hop count
// the system calls that found datagrams or sent them (recvmmsg, sendmmsg),
// warm-up included.
func BenchmarkHopOneGoroutine(b *testing.B) {
	for _, noGSO := range []bool{false, true} {
		name := "gso"
		if noGSO {
			name = "nogso"
		}
		b.Run(name, func(b *testing.B) { benchHop(b, noGSO) })
	}
}

func benchHop(b *testing.B, noGSO bool) {
	a, z, _ := udpPair(b, Options{NoGSO: noGSO})
	sges := map[*end][]SGE{a: {a.mr.SGE(0, 2)}, z: {z.mr.SGE(0, 2)}} // allocated once
	sge := func(e *end) []SGE { return sges[e] }
	post := func(e *end) {
		if _, err := e.qp.PostRecv(RecvWR{SGList: sge(e)}); err != nil {
			b.Fatal(err)
		}
	}
	wcs := make([]WC, 4)
	// await busy-polls e's CQ until a receive completes.
	await := func(e *end) {
		deadline := time.Now().Add(testutil.Bound())
		for i := 0; ; i++ {
			n := e.cq.BusyPoll(wcs)
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					b.Fatalf("completion %v", wc.Status)
				}
				if wc.Opcode == WCRecv {
					return
				}
			}
			if i%1024 == 1023 && time.Now().After(deadline) {
				b.Fatal("no receive completion within 10 s")
			}
		}
	}
	send := func(e *end, flags SendFlags) {
		if _, err := e.qp.PostSend(SendWR{Opcode: WRSend, Flags: flags, SGList: sge(e)}); err != nil {
			b.Fatal(err)
		}
	}
	post(a)
	post(z)
	round := func() {
		send(a, SendSignaled)
		await(z)
		post(z)
		send(z, 0)
		await(a)
		post(a)
	}
	for range 1000 {
		round()
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		round()
	}
	hop := time.Since(start) / time.Duration(2*b.N)
	b.StopTimer()
	var reads, writes uint64
	for _, e := range []*end{a, z} {
		reads += e.dev.counters.readBatches.Load()
		writes += e.dev.counters.writeBatches.Load()
	}
	raw, err := rawudp.HopOneGoroutine(2, 1000, max(b.N, 20000))
	require.NoError(b, err)
	b.ReportMetric(float64(hop.Nanoseconds()), "hop-ns")
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-hop-ns")
	b.ReportMetric(float64(hop)/float64(raw), "hop-ratio")
	hops := float64(2 * (b.N + 1000))
	b.ReportMetric(float64(reads)/hops, "reads-per-hop")
	b.ReportMetric(float64(writes)/hops, "writes-per-hop")
}
