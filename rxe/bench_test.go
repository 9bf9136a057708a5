package rxe

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/rawudp"
	"github.com/stretchr/testify/require"
)

// Stream parameters of the throughput benchmarks, after ib_write_bw and
// ib_read_bw: 64 KiB messages, up to benchDepth work requests posted and
// not yet completed (perftest's tx depth 128), one in benchSignal signaled
// (perftest's cq_mod).
const (
	benchMsg    = 64 << 10
	benchDepth  = 128
	benchSignal = 16
	// benchSlots is the number of distinct 64 KiB windows the stream
	// cycles through: the whole 8 MiB test buffers, so the payload is
	// mostly cold in the caches (perftest reuses one warm buffer).
	benchSlots = testBufSize / benchMsg
	// benchDatagram is the UDP payload of a full-MTU RoCE packet of the
	// stream (BTH 12 + 4096 payload + ICRC 4: a WRITE MIDDLE or a READ
	// RESPONSE MIDDLE), the datagram size of the raw-UDP baseline.
	benchDatagram = 12 + 4096 + 4
	// benchPackets is the number of full-MTU packets per 64 KiB message.
	benchPackets = benchMsg / 4096
	// benchRounds is the number of rounds a benchmark run is split into:
	// each round streams its share of the b.N operations, then measures
	// the raw-UDP baseline for as many datagrams as the round carried.
	// Alternating exposes both to the same machine state (other processes
	// on the cores, the host), so their ratio is steadier than either.
	benchRounds = 8
)

// benchNoInline sets Options.NoInlineSend on the benchmarks' devices (the
// transmit behaviour before inline sends): go test ... ./rxe/ -rxe.noinline
var benchNoInline = flag.Bool("rxe.noinline", false, "BenchmarkWrite64K and BenchmarkRead64K: devices with Options.NoInlineSend")

// benchAB adds an interleaved comparison to the throughput benchmarks:
// go test -run '^$' -bench 64K ./rxe/ -rxe.ab
var benchAB = flag.Bool("rxe.ab", false, "BenchmarkWrite64K and BenchmarkRead64K: also stream through a second pair of devices with Options.NoInlineSend, in alternate rounds, and report noinline-MB/s and noinline-ratio")

// streamer keeps a stream of one-sided operations (RDMA WRITE or READ)
// from a to b in flight: it posts chunks of signal work requests whose
// last one is signaled, so each send completion retires its chunk (RC
// completes in order), and never has more than depth outstanding. Nothing
// is allocated after newStreamer.
type streamer struct {
	a, b   *end
	op     WROpcode
	size   int
	depth  int
	signal int
	wrs    []SendWR
	sges   []SGE
	wcs    []WC
	posted uint64 // work requests posted
	done   uint64 // work requests completed
	slot   int
	slots  int // 64 KiB windows of a's buffer the stream cycles through
	ctx    context.Context
}

func newStreamer(ctx context.Context, a, b *end, op WROpcode, size, depth, signal int) *streamer {
	s := &streamer{a: a, b: b, op: op, size: size, depth: depth, signal: signal,
		wrs: make([]SendWR, signal), sges: make([]SGE, signal), wcs: make([]WC, 64), ctx: ctx,
		slots: max(1, len(a.buf)/benchMsg)}
	return s
}

// run posts n more work requests and waits for all of them to complete.
func (s *streamer) run(n int) error {
	target := s.posted + uint64(n)
	for s.done < target {
		for s.posted < target {
			room := s.depth - int(s.posted-s.done)
			k := min(s.signal, int(target-s.posted), room)
			if k <= 0 || k < s.signal && s.posted+uint64(k) < target {
				break // wait for a completion rather than post a short chunk
			}
			for i := range k {
				off := (s.slot % s.slots) * benchMsg
				s.slot++
				s.sges[i] = s.a.mr.SGE(off, s.size)
				s.wrs[i] = SendWR{Opcode: s.op, SGList: s.sges[i : i+1 : i+1],
					RemoteAddr: s.b.mr.Addr() + uint64(off), RKey: s.b.mr.RKey()}
			}
			// The chunk's signaled last WR carries the chunk's size.
			s.wrs[k-1].Flags = SendSignaled
			s.wrs[k-1].ID = uint64(k)
			if _, err := s.a.qp.PostSend(s.wrs[:k]...); err != nil {
				return err
			}
			s.posted += uint64(k)
		}
		got, err := s.a.cq.Wait(s.ctx, s.wcs)
		if err != nil {
			return fmt.Errorf("waiting for completions (%d of %d done): %w", s.done, target, err)
		}
		for i := range got {
			wc := &s.wcs[i]
			if wc.Status != WCSuccess {
				return fmt.Errorf("completion after %d WRs: %v", s.done, wc.Status)
			}
			s.done += wc.ID
		}
	}
	return nil
}

// BenchmarkWrite64K measures 64 KiB RDMA WRITE throughput (PMTU 4096)
// over the in-memory pipe and over loopback UDP (127.0.0.1 to 127.0.0.2),
// beside a raw-UDP baseline measured in the same run; see benchStream.
func BenchmarkWrite64K(b *testing.B) { benchStream(b, WRRDMAWrite) }

// BenchmarkRead64K is BenchmarkWrite64K for RDMA READ.
func BenchmarkRead64K(b *testing.B) { benchStream(b, WRRDMARead) }

// BenchmarkSend64K is BenchmarkWrite64K for SEND: the receiving device's
// receive queue is kept full by a goroutine that reposts each 64 KiB
// receive as it completes (recvReposter), as ib_send_bw's server does.
func BenchmarkSend64K(b *testing.B) { benchStream(b, WRSend) }

// recvReposter keeps e's receive queue full of 64 KiB receives, cycling
// through e's buffer, until ctx is done: it waits on e's CQ and posts one
// receive per receive completion. A failed completion or post ends it
// with the error on the returned channel.
func recvReposter(ctx context.Context, e *end) <-chan error {
	const posted = 256 // newEnd's MaxRecvWR
	slots := max(1, len(e.buf)/benchMsg)
	slot := 0
	post := func() error {
		off := (slot % slots) * benchMsg
		slot++
		_, err := e.qp.PostRecv(RecvWR{SGList: []SGE{e.mr.SGE(off, benchMsg)}})
		return err
	}
	errc := make(chan error, 1)
	for range posted {
		if err := post(); err != nil {
			errc <- err
			return errc
		}
	}
	go func() {
		wcs := make([]WC, 64)
		for {
			n, err := e.cq.Wait(ctx, wcs)
			if err != nil {
				errc <- nil // ctx done or device closed: the benchmark is over
				return
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					errc <- fmt.Errorf("receive completed with %v", wc.Status)
					return
				}
				if err := post(); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	return errc
}

// benchStream streams 64 KiB operations and reports, besides ns/op and
// allocs/op (allocations of the whole process during the timed rounds,
// that is of both devices' goroutines too, per 64 KiB operation):
//
//   - MB/s: RDMA payload bytes per second (10^6 bytes);
//   - rawUDP-MB/s: UDP payload bytes per second of rawudp.Measure,
//     run in the same process between the timed rounds with datagrams of
//     benchDatagram bytes (the full-MTU RoCE packets of the stream), sent
//     and received with the same batching as a device (sendmmsg and
//     recvmmsg through netdev.UDPConn, netdev.DefaultBatchSize, blocking
//     writes, the same socket buffer sizes), 16 datagrams per operation;
//   - ratio: MB/s divided by rawUDP-MB/s (payload over datagram bytes: the
//     0.4% of RoCE headers count against gorxe);
//   - gsoUDP-MB/s, gso-ratio, gsoUDP-cpu-µs/64KiB: the same for a raw
//     round with UDP GSO on send and GRO on receive (rawudp.Config.GSO),
//     the fastest raw method, run right after each sendmmsg round;
//   - cpu-µs/op and rawUDP-cpu-µs/64KiB: CPU time (user and system, all
//     threads) per 64 KiB moved, of the RoCE rounds and of the raw rounds;
//   - retx/op: request packets retransmitted per operation (should be 0);
//   - syscalls/op: ReadBatch and WriteBatch calls (recvmmsg, sendmmsg) of
//     both devices per operation; pkts/sendmmsg: datagrams per WriteBatch
//     of the device that sends the data (the requester's for WRITE, the
//     responder's for READ).
//
// It runs past 80 lines because the timed rounds, the untimed baseline
// rounds between them and the metrics they report share one set of
// counters and clocks; split, each part would take most of them as
// arguments.
func benchStream(b *testing.B, op WROpcode) {
	for _, kind := range []string{"pipe", "udp"} {
		b.Run(kind, func(b *testing.B) {
			a, z := benchPair(b, kind, *benchNoInline)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			s := warmStream(ctx, b, a, z, op)
			var ab *streamer // the -rxe.ab comparison, untimed
			var abTime time.Duration
			if *benchAB {
				a2, z2 := benchPair(b, kind, true)
				ab = warmStream(ctx, b, a2, z2, op)
			}
			retx0 := a.qp.Counters().Requester.Retransmits
			ca0, cz0 := benchSnap(a.dev), benchSnap(z.dev)
			b.SetBytes(benchMsg)
			b.ReportAllocs()
			b.ResetTimer()
			var rawBytes float64
			var rawTime, cpu, rawCPU time.Duration
			var gso gsoBaseline
			round := (b.N + benchRounds - 1) / benchRounds
			for done := 0; done < b.N; {
				n := min(round, b.N-done)
				c0 := benchCPUTime()
				b.StartTimer()
				if err := s.run(n); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				c1 := benchCPUTime()
				cpu += c1 - c0
				done += n
				var raw rawudp.Result
				var err error
				// Labelled so that CPU profiles can leave it out
				// (go tool pprof -tagignore phase=rawUDP).
				pprof.Do(ctx, pprof.Labels("phase", "rawUDP"), func(ctx context.Context) {
					raw, err = rawudp.Measure(ctx, rawudp.Config{
						Size: benchDatagram, Count: max(n*benchPackets, 1024)})
				})
				if errors.Is(err, errors.ErrUnsupported) {
					b.Skip(err)
				}
				require.NoError(b, err)
				c2 := benchCPUTime()
				rawCPU += c2 - c1
				rawBytes += float64(raw.Received) * float64(raw.Size)
				rawTime += raw.Elapsed
				g := benchGSORound(ctx, b, n)
				gso.add(g, benchCPUTime()-c2)
				if ab != nil {
					t0 := time.Now()
					require.NoError(b, ab.run(n))
					abTime += time.Since(t0)
				}
			}
			elapsed := b.Elapsed()
			retx := a.qp.Counters().Requester.Retransmits - retx0
			ca, cz := benchSnap(a.dev).sub(ca0), benchSnap(z.dev).sub(cz0)
			data := ca // the data flows a→z for WRITE, z→a for READ
			if op == WRRDMARead {
				data = cz
			}
			mbps := float64(b.N) * benchMsg / elapsed.Seconds() / 1e6
			rawMBps := rawBytes / rawTime.Seconds() / 1e6
			b.ReportMetric(mbps, "MB/s")
			b.ReportMetric(rawMBps, "rawUDP-MB/s")
			b.ReportMetric(mbps/rawMBps, "ratio")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(rawCPU.Microseconds())*benchMsg/rawBytes, "rawUDP-cpu-µs/64KiB")
			gso.report(b, mbps)
			b.ReportMetric(float64(retx)/float64(b.N), "retx/op")
			b.ReportMetric(float64(ca.calls()+cz.calls())/float64(b.N), "syscalls/op")
			b.ReportMetric(float64(data.sent)/float64(max(data.writes, 1)), "pkts/sendmmsg")
			if ab != nil {
				abMBps := float64(b.N) * benchMsg / abTime.Seconds() / 1e6
				b.ReportMetric(abMBps, "noinline-MB/s")
				b.ReportMetric(abMBps/rawMBps, "noinline-ratio")
			}
		})
	}
}

// warmStream returns a streamer of op from a to z under ctx, warmed up
// with 2×benchDepth operations (timers, lazily grown buffers, the
// scheduler). For SEND a recvReposter keeps z's receive queue full; its
// error is checked when the benchmark's cleanups run, after the caller's
// deferred cancel of ctx has ended it and before the devices close.
func warmStream(ctx context.Context, b *testing.B, a, z *end, op WROpcode) *streamer {
	if op == WRSend {
		errc := recvReposter(ctx, z)
		b.Cleanup(func() { require.NoError(b, <-errc) })
	}
	s := newStreamer(ctx, a, z, op, benchMsg, benchDepth, benchSignal)
	require.NoError(b, s.run(2*benchDepth))
	return s
}

// benchPair is newPair (MTU 4096) with Options.NoInlineSend set to
// noInline.
func benchPair(b *testing.B, kind string, noInline bool) (*end, *end) {
	ca, cb := connPair(b, kind)
	return benchPairOn(b, ca, cb, noInline)
}

// benchPairOn is benchPair on the connections ca and cb.
func benchPairOn(b *testing.B, ca, cb netdev.Conn, noInline bool) (*end, *end) {
	da, db := openPairWith(b, ca, cb, Options{LinkMTU: 9000, NoInlineSend: noInline}, "", "")
	a, z := newEnd(b, da, testBufSize), newEnd(b, db, testBufSize)
	connect(b, a, z, MTU4096)
	return a, z
}

// TestDataPathAllocs requires that a 64 KiB RDMA WRITE and READ over the
// in-memory pipe, posted, carried (both devices' receive and transmit
// goroutines) and completed, allocate nothing once warmed up. Over UDP the
// figure is logged, not required: the receive path inherits two
// allocations per datagram from golang.org/x/net (see package netdev).
func TestDataPathAllocs(t *testing.T) {
	if benchRaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, kind := range []string{"pipe", "udp"} {
		for _, op := range []WROpcode{WRRDMAWrite, WRRDMARead} {
			t.Run(fmt.Sprintf("%s/%v", kind, op), func(t *testing.T) {
				a, z := newPair(t, kind, MTU4096)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				// Warm up with a deep stream, then measure single operations.
				require.NoError(t, newStreamer(ctx, a, z, op, benchMsg, benchDepth, benchSignal).run(4*benchDepth))
				one := newStreamer(ctx, a, z, op, benchMsg, 1, 1)
				var err error
				allocs := testing.AllocsPerRun(200, func() {
					if e := one.run(1); e != nil && err == nil {
						err = e
					}
				})
				require.NoError(t, err)
				t.Logf("%s %v 64 KiB: %.1f allocations per operation", kind, op, allocs)
				if kind == "pipe" {
					require.Zero(t, allocs, "allocations per 64 KiB %v over the pipe", op)
				}
			})
		}
	}
}

// benchRaceEnabled reports whether the test binary was built with -race:
// allocation counts are not meaningful under the race detector.
var benchRaceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}()

// devSnap is a snapshot of the device counters the benchmarks report.
type devSnap struct{ sent, rcvd, writes, reads uint64 }

func benchSnap(d *Device) devSnap {
	c := &d.counters
	t := d.Counters()
	return devSnap{t.SentPkts, t.RcvdPkts, c.writeBatches.Load(), c.readBatches.Load()}
}

func (s devSnap) sub(o devSnap) devSnap {
	return devSnap{s.sent - o.sent, s.rcvd - o.rcvd, s.writes - o.writes, s.reads - o.reads}
}

func (s devSnap) calls() uint64 { return s.writes + s.reads }

// TestDataPathLocalDrops streams 64 KiB WRITEs and READs through a pipe
// too shallow for a batch (16 datagrams per direction, ENOBUFS when full):
// every refused datagram must be sent again after the back-off delay, by
// the transmit goroutine and by the receive goroutine's inline sends
// alike, in order and without transport retries, and the data must arrive
// intact.
func TestDataPathLocalDrops(t *testing.T) {
	for _, noInline := range []bool{false, true} {
		for _, op := range []WROpcode{WRRDMAWrite, WRRDMARead} {
			t.Run(fmt.Sprintf("NoInlineSend=%v/%v", noInline, op), func(t *testing.T) {
				ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 16})
				// The recovery timer's floor is raised above the ACK timeout
				// (below): the test asserts that local drops cause no
				// transport retry, and a loaded machine's scheduling delays
				// must not fire either timer (with a 1 s floor, a READ run
				// under -race and a load average of 20 had 2 retransmits).
				da, db := openPairWith(t, ca, cb, Options{LinkMTU: 9000, NoInlineSend: noInline,
					Recovery: RecoveryConfig{Floor: 5 * time.Second}}, "", "")
				a, z := newEnd(t, da, testBufSize), newEnd(t, db, testBufSize)
				// A 4.3 s ACK timeout (20): the test asserts that no transport
				// retry happened, which a 67 ms timer cannot promise on a
				// loaded machine.
				ia, iz := a.qp.Info(1), z.qp.Info(2)
				require.NoError(t, a.qp.Connect(ia, iz, ConnectOptions{MTU: MTU4096, Timeout: 20}))
				require.NoError(t, z.qp.Connect(iz, ia, ConnectOptions{MTU: MTU4096, Timeout: 20}))
				src, dst := a, z
				if op == WRRDMARead {
					src, dst = z, a
				}
				fill(src.buf, 42)
				syncMem(a, z)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, newStreamer(ctx, a, z, op, benchMsg, benchDepth, benchSignal).run(2*benchSlots))
				syncMem(a, z)
				require.True(t, bytes.Equal(src.buf[:benchSlots*benchMsg], dst.buf[:benchSlots*benchMsg]), "data differs")
				drops := da.Counters().LocalDrops + db.Counters().LocalDrops
				require.Positive(t, drops, "the pipe never refused a datagram: the test tests nothing")
				require.Zero(t, a.qp.Counters().Requester.Retransmits)
				t.Logf("%d local drops", drops)
			})
		}
	}
}
