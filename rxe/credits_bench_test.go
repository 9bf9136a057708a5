package rxe

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The slow-receiver scenario (a receiver that reposts its
// receive WQEs in batches, after a delay, and many small SENDs); see
// BenchmarkCreditsSlowReceiver.
var (
	creditsBatch = flag.Int("rxe.credits.batch", 32, "BenchmarkCreditsSlowReceiver: receive WQEs reposted at a time")
	creditsRQ    = flag.Int("rxe.credits.rq", 64, "BenchmarkCreditsSlowReceiver: receive queue depth (WQEs posted at start)")
	creditsDelay = flag.Duration("rxe.credits.delay", 100*time.Microsecond, "BenchmarkCreditsSlowReceiver: the receiver's delay before each repost")
	creditsSize  = flag.Int("rxe.credits.size", 64, "BenchmarkCreditsSlowReceiver: SEND size in bytes")
	creditsBusy  = flag.Bool("rxe.credits.busy", false, "BenchmarkCreditsSlowReceiver: the receiver spends its delay computing (a busy wait) instead of sleeping")
)

const (
	creditsSendDepth = 128 // SENDs outstanding (perftest's tx depth)
	creditsSignal    = 16  // one SEND in 16 signaled
)

// slowPair is a sender a and a slow receiver z: a goroutine that takes z's
// receive completions and, for every creditsBatch of them, sleeps
// creditsDelay and then reposts that many receive WQEs.
type slowPair struct {
	a, z    *end
	sender  *streamer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errMu   sync.Mutex
	recvErr error
	elapsed time.Duration // time spent in run
	cpu     time.Duration // process CPU time spent in run
	msgs    uint64
	// The receiver's delays as they happened (owned by the receiver
	// goroutine until stop).
	delayed time.Duration
	delays  int
}

// newSlowPair connects two devices over loopback UDP (127.0.0.1 and
// 127.0.0.2) with Options.Credits = credits, one completion vector each,
// RC QPs with rnr_retry 7 (infinite) and the given min_rnr_timer code, and
// starts the slow receiver.
func newSlowPair(b *testing.B, credits bool, rnrTimer uint8) *slowPair {
	da, dz, _ := creditDevices(b, "udp", credits, credits)
	o := qpOpts{minRNRTimer: rnrTimer, rnrRetry: 7, sendWR: creditsSendDepth, recvWR: *creditsRQ,
		cqe: 2 * max(*creditsRQ, creditsSendDepth)}
	a := smallEnd(b, da, nil, o)
	z := smallEnd(b, dz, nil, o)
	link(b, a, z, o, o)
	ctx, cancel := context.WithCancel(context.Background())
	p := &slowPair{a: a, z: z, cancel: cancel}
	p.sender = newStreamer(ctx, a, z, WRSend, *creditsSize, creditsSendDepth, creditsSignal)
	b.Cleanup(p.stop)

	recv := make([]RecvWR, max(*creditsRQ, *creditsBatch))
	sges := make([]SGE, len(recv))
	for i := range recv {
		sges[i] = z.mr.SGE((i%256)*256, 256)
		recv[i] = RecvWR{ID: uint64(i), SGList: sges[i : i+1 : i+1]}
	}
	_, err := z.qp.PostRecv(recv[:*creditsRQ]...)
	require.NoError(b, err)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.setErr(p.receive(ctx, recv[:*creditsBatch]))
	}()
	return p
}

// receive is the slow receiver's loop; it returns nil when ctx ends.
func (p *slowPair) receive(ctx context.Context, batch []RecvWR) error {
	wcs := make([]WC, 64)
	used := 0
	for {
		n, err := p.z.cq.Wait(ctx, wcs)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for i := range n {
			if wcs[i].Status != WCSuccess {
				return fmt.Errorf("receive completion: %v", wcs[i].Status)
			}
		}
		used += n
		for used >= len(batch) {
			t0 := time.Now()
			if *creditsBusy {
				// A receiver busy with its work: it holds a core.
				for time.Since(t0) < *creditsDelay {
				}
			} else {
				time.Sleep(*creditsDelay)
			}
			p.delayed += time.Since(t0)
			p.delays++
			if _, err := p.z.qp.PostRecv(batch...); err != nil {
				return err
			}
			used -= len(batch)
		}
	}
}

func (p *slowPair) setErr(err error) {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	if p.recvErr == nil {
		p.recvErr = err
	}
}

func (p *slowPair) err() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.recvErr
}

func (p *slowPair) stop() {
	p.cancel()
	p.wg.Wait()
}

// run sends n SENDs and adds their time to elapsed.
func (p *slowPair) run(n int) error {
	t0, c0 := time.Now(), benchCPUTime()
	err := p.sender.run(n)
	p.elapsed += time.Since(t0)
	p.cpu += benchCPUTime() - c0
	p.msgs += uint64(n)
	if err == nil {
		err = p.err()
	}
	return err
}

// BenchmarkCreditsSlowReceiver is the slow-receiver scenario over loopback UDP: a
// sender keeps up to 128 small SENDs in flight (-rxe.credits.size, 64 B)
// to a receiver whose receive queue holds -rxe.credits.rq WQEs (64) and
// which reposts them -rxe.credits.batch (32) at a time, each batch after
// -rxe.credits.delay (100 µs). Two pairs of devices run in alternate rounds
// of the same run: one with Options.Credits (end-to-end credits: the
// requester waits for credits, the responder's updates resume it) and one
// without (kernel rxe's behaviour: RNR NAKs, then go-back-N after the RNR
// timer; rnr_retry 7, infinite). Sub-benchmarks set min_rnr_timer: code 1
// (10 µs, the smallest) and 12 (640 µs, perftest's). An operation is one
// SEND of each pair. Reported:
//
//   - credits-msgs/s, rnr-msgs/s: SENDs completed per second by each pair,
//     and ratio, the first over the second;
//   - credits-cpu-µs/msg, rnr-cpu-µs/msg: CPU time of the whole process
//     (both devices, sender and receiver) per SEND while each pair ran;
//   - credits-delay-µs, rnr-delay-µs: the receiver's mean delay per batch
//     as it happened (warm-up included; a sleep overshoots);
//   - credits-rcvd_rnr_err/kmsg, rnr-rcvd_rnr_err/kmsg: RNR NAKs received
//     by the requester per 1000 SENDs (rxe's rcvd_rnr_err), and
//     rnr-send_rnr_err/kmsg those sent by the responder (send_rnr_err);
//   - credits-send_rnr_err/kmsg likewise for the credits pair;
//   - rnr-retx/msg: retransmitted request packets per SEND without credits;
//   - credit-updates/kmsg: unsolicited credit ACKs the responder queued,
//     and credit-probes/kmsg: probes the requester sent.
//
// allocs/op counts the whole process (both pairs, their goroutines and
// the receiver's) per operation.
func BenchmarkCreditsSlowReceiver(b *testing.B) {
	for _, rnrTimer := range []uint8{1, 12} {
		b.Run(fmt.Sprintf("min_rnr_timer=%d", rnrTimer), func(b *testing.B) {
			on := newSlowPair(b, true, rnrTimer)
			off := newSlowPair(b, false, rnrTimer)
			warm := 4 * creditsSendDepth
			require.NoError(b, on.run(warm))
			require.NoError(b, off.run(warm))
			on.elapsed, off.elapsed, on.msgs, off.msgs, on.cpu, off.cpu = 0, 0, 0, 0, 0, 0
			reqOn0, rspOn0 := on.a.qp.Counters().Requester, on.z.qp.Counters().Responder
			reqOff0, rspOff0 := off.a.qp.Counters().Requester, off.z.qp.Counters().Responder
			b.ReportAllocs()
			b.ResetTimer()
			round := (b.N + benchRounds - 1) / benchRounds
			for done := 0; done < b.N; {
				n := min(round, b.N-done)
				require.NoError(b, on.run(n))
				require.NoError(b, off.run(n))
				done += n
			}
			b.StopTimer()
			on.stop()
			off.stop()
			reqOn, rspOn := on.a.qp.Counters().Requester, on.z.qp.Counters().Responder
			reqOff, rspOff := off.a.qp.Counters().Requester, off.z.qp.Counters().Responder
			k := float64(b.N) / 1000
			onRate := float64(on.msgs) / on.elapsed.Seconds()
			offRate := float64(off.msgs) / off.elapsed.Seconds()
			b.ReportMetric(onRate, "credits-msgs/s")
			b.ReportMetric(offRate, "rnr-msgs/s")
			b.ReportMetric(onRate/offRate, "ratio")
			b.ReportMetric(float64(on.delayed.Microseconds())/float64(max(on.delays, 1)), "credits-delay-µs")
			b.ReportMetric(float64(off.delayed.Microseconds())/float64(max(off.delays, 1)), "rnr-delay-µs")
			b.ReportMetric(float64(on.cpu.Nanoseconds())/1e3/float64(on.msgs), "credits-cpu-µs/msg")
			b.ReportMetric(float64(off.cpu.Nanoseconds())/1e3/float64(off.msgs), "rnr-cpu-µs/msg")
			b.ReportMetric(float64(reqOn.RcvdRNRErr-reqOn0.RcvdRNRErr)/k, "credits-rcvd_rnr_err/kmsg")
			b.ReportMetric(float64(rspOn.SendRNRErr-rspOn0.SendRNRErr)/k, "credits-send_rnr_err/kmsg")
			b.ReportMetric(float64(reqOff.RcvdRNRErr-reqOff0.RcvdRNRErr)/k, "rnr-rcvd_rnr_err/kmsg")
			b.ReportMetric(float64(rspOff.SendRNRErr-rspOff0.SendRNRErr)/k, "rnr-send_rnr_err/kmsg")
			b.ReportMetric(float64(reqOff.Retransmits-reqOff0.Retransmits)/float64(b.N), "rnr-retx/msg")
			b.ReportMetric(float64(rspOn.CreditUpdates-rspOn0.CreditUpdates)/k, "credit-updates/kmsg")
			b.ReportMetric(float64(reqOn.CreditProbes-reqOn0.CreditProbes)/k, "credit-probes/kmsg")
		})
	}
}
