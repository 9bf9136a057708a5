package rxe

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev/rawudp"
)

// BenchmarkPingPong measures the half round trip of a 2-byte SEND between
// two QPs over the pipe and loopback UDP, as ib_send_lat -e does: each
// side waits on its CQ (CQ.Wait) for the peer's message and answers at
// once; one
// operation is one message one way (ns/op is the half round trip). Send
// completions are unsignaled, so each side's CQ holds only receives.
func BenchmarkPingPong(b *testing.B) {
	for _, kind := range []string{"pipe", "udp"} {
		b.Run(kind, func(b *testing.B) {
			a, z := benchPair(b, kind, false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			post := func(e *end) {
				_, err := e.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{e.mr.SGE(0, 64)}})
				require.NoError(b, err)
			}
			for range 16 {
				post(a)
				post(z)
			}
			send := func(e *end) error {
				_, err := e.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendInline, InlineData: e.buf[:2]})
				return err
			}
			// wait waits on e's CQ for one receive and reposts it.
			wait := func(e *end, wcs []WC) error {
				if _, err := e.cq.Wait(ctx, wcs); err != nil {
					return err
				}
				if wcs[0].Status != WCSuccess {
					return fmt.Errorf("receive completed with %v", wcs[0].Status)
				}
				_, err := e.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{e.mr.SGE(0, 64)}})
				return err
			}
			rounds := max(b.N/2, 1)
			echo := make(chan error, 1)
			go func() {
				wcs := make([]WC, 1)
				for range rounds + 100 {
					if err := wait(z, wcs); err != nil {
						echo <- err
						return
					}
					if err := send(z); err != nil {
						echo <- err
						return
					}
				}
				echo <- nil
			}()
			wcs := make([]WC, 1)
			pingPong := func() {
				require.NoError(b, send(a))
				require.NoError(b, wait(a, wcs))
			}
			for range 100 { // warm up
				pingPong()
			}
			b.ResetTimer()
			for range rounds {
				pingPong()
			}
			b.StopTimer()
			require.NoError(b, <-echo)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*rounds), "ns/half-rtt")
		})
	}
}

// BenchmarkLat2B measures 2-byte SEND and RDMA WRITE ping-pongs between
// two devices on loopback UDP sockets (Listen's options), one message
// outstanding, as rxectl send-lat and write-lat do, with each side either
// sleeping in CQ.Wait ("wait"; a WRITE's arrival is watched as rxectl
// does, QP.Query with yields, then 20 µs sleeps) or busy-polling
// (CQ.BusyPoll: the poller reads the socket and sends inline), beside
// rawudp.PingPong in the same run. half-rtt-µs is the median half round
// trip (t_typical), avg-µs the mean (t_avg); ratio and avg-ratio divide
// them by the raw ping-pong's median and mean. Each op is one round trip.
func BenchmarkLat2B(b *testing.B) {
	for _, verb := range []string{"send", "write"} {
		for _, mode := range []string{"wait", "busy"} {
			b.Run(verb+"/"+mode, func(b *testing.B) {
				a, z, _ := udpPair(b, Options{})
				l := &latBench{busy: mode == "busy", write: verb == "write", b: b}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				l.ctx = ctx
				l.run(a, z)
				var raw rawudp.PingPongResult
				var err error
				pprof.Do(ctx, pprof.Labels("phase", "rawUDP"), func(ctx context.Context) {
					raw, err = rawudp.PingPong(ctx, 2, 100, max(b.N, 1000))
				})
				require.NoError(b, err)
				slices.Sort(l.rtts)
				var sum time.Duration
				for _, d := range l.rtts {
					sum += d
				}
				half, avg := l.rtts[len(l.rtts)/2]/2, sum/time.Duration(2*len(l.rtts))
				b.ReportMetric(float64(half.Nanoseconds())/1e3, "half-rtt-µs")
				b.ReportMetric(float64(avg.Nanoseconds())/1e3, "avg-µs")
				b.ReportMetric(float64(raw.Median.Nanoseconds())/1e3, "raw-half-rtt-µs")
				b.ReportMetric(float64(raw.Avg.Nanoseconds())/1e3, "raw-avg-µs")
				b.ReportMetric(float64(half)/float64(raw.Median), "ratio")
				b.ReportMetric(float64(l.rtts[len(l.rtts)*99/100].Nanoseconds())/2e3, "p99-µs")
				b.ReportMetric(float64(l.rtts[len(l.rtts)-1].Nanoseconds())/2e3, "max-µs")
				b.ReportMetric(float64(avg)/float64(raw.Avg), "avg-ratio")
			})
		}
	}
}

// latBench is one BenchmarkLat2B run: a (timing) and z (echoing) bounce
// one 2-byte message b.N times after 100 warm-up rounds.
type latBench struct {
	b           *testing.B
	ctx         context.Context
	busy, write bool
	rtts        []time.Duration
}

// busyYieldEvery is how many empty busy polls pass between two yields of
// the processor.
const busyYieldEvery = 16

// latSide is one end's state: its sends not yet completed and, for
// WRITEs, its responder's expected PSN before the first message.
type latSide struct {
	e, peer *end
	pending int
	base    uint32
	wcs     []WC
}

func (l *latBench) run(a, z *end) {
	b := l.b
	sa := &latSide{e: a, peer: z, base: a.qp.Query().RQPSN, wcs: make([]WC, 4)}
	sz := &latSide{e: z, peer: a, base: z.qp.Query().RQPSN, wcs: make([]WC, 4)}
	if !l.write {
		require.NoError(b, l.postRecv(a))
		require.NoError(b, l.postRecv(z))
	}
	done := make(chan error, 1)
	go func() { // z echoes every message
		for i := range b.N + 100 {
			if err := l.await(sz, i+1); err != nil {
				done <- err
				return
			}
			if err := l.post(sz); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	l.rtts = make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N + 100 {
		t0 := time.Now()
		require.NoError(b, l.post(sa))
		require.NoError(b, l.await(sa, i+1))
		if i >= 100 {
			l.rtts = append(l.rtts, time.Since(t0))
		}
	}
	b.StopTimer()
	require.NoError(b, <-done)
}

func (l *latBench) postRecv(e *end) error {
	_, err := e.qp.PostRecv(RecvWR{SGList: []SGE{e.mr.SGE(0, 2)}})
	return err
}

// post sends the side's next message, signaled: a SEND, or a WRITE of 2
// bytes into the peer's buffer at offset 64.
func (l *latBench) post(s *latSide) error {
	wr := SendWR{Opcode: WRSend, Flags: SendSignaled | SendInline, InlineData: s.e.buf[:2]}
	if l.write {
		wr = SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled | SendInline, InlineData: s.e.buf[:2],
			RemoteAddr: s.peer.mr.Addr() + 64, RKey: s.peer.mr.RKey()}
	}
	_, err := s.e.qp.PostSend(wr)
	if err == nil {
		s.pending++
	}
	return err
}

// await waits until the peer's n-th message has arrived and the side's
// own sends have completed: a SEND's receive completion (the receive is
// posted again), or a WRITE's landing, seen as rxectl write-lat sees it
// (the responder's expected PSN, from QP.Query).
func (l *latBench) await(s *latSide, n int) error {
	got := false
	for spins := 0; !got || s.pending > 0; spins++ {
		k := 0
		switch {
		case l.busy:
			if k = s.e.cq.BusyPoll(s.wcs); k == 0 && spins%busyYieldEvery == busyYieldEvery-1 {
				runtime.Gosched() // let goroutines the devices woke run
			}
		case !l.write || s.pending > 0:
			var err error
			if k, err = s.e.cq.Wait(l.ctx, s.wcs); err != nil {
				return err
			}
		case spins < 50:
			runtime.Gosched()
		default:
			time.Sleep(20 * time.Microsecond)
		}
		for _, wc := range s.wcs[:k] {
			if wc.Status != WCSuccess {
				return fmt.Errorf("completion %v of %v", wc.Status, wc.Opcode)
			}
			if wc.Opcode != WCRecv {
				s.pending--
				continue
			}
			got = true
			if err := l.postRecv(s.e); err != nil {
				return err
			}
		}
		if l.write && !got {
			got = (s.e.qp.Query().RQPSN-s.base)&0xFFFFFF >= uint32(n)
		}
		if spins%1024 == 1023 && l.ctx.Err() != nil {
			return l.ctx.Err()
		}
	}
	return nil
}
