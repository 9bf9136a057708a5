package rxe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The workload of the SRQ benchmarks, shaped like NVMe-oF over
// RDMA: a client sends 4 KiB requests (SEND) on n RC QPs to a server; the
// server takes each into a 4 KiB receive buffer, posts the buffer again,
// and answers with a 0-byte SEND; a request is done when its answer
// arrives. The client keeps at most recvWindow requests outstanding per
// QP and at most recvBurst in all, spread round-robin over the QPs.
//
// A server buffer is taken when a request arrives and posted again before
// the answer leaves, so a receive queue is never short of buffers, and no
// request ever meets an RNR NAK, when it holds one buffer per request that
// can be outstanding on its QPs at once. Each mode is sized by that rule,
// so all three absorb the same burst without RNR:
//
//   - "rq": a receive queue per QP, recvWindow deep (any QP may have its
//     whole window outstanding);
//   - "srq": one SRQ of min(recvBurst, n*recvWindow);
//   - "srq-vec": an SRQSet, each vector's SRQ min(recvBurst,
//     ceil(n/vectors)*recvWindow) deep (all outstanding requests may be on
//     one vector's QPs).
const (
	recvMsg    = 4096
	recvWindow = 16
	recvBurst  = 256
	// recvVectors is the number of completion vectors of the benchmarks'
	// devices: the machine's two cores.
	recvVectors = 2
)

var recvModes = []string{"rq", "srq", "srq-vec"}

// recvSizing returns how many receive queues a mode has for n QPs and how
// many buffers each holds.
func recvSizing(mode string, n, vectors int) (queues, depth int) {
	switch mode {
	case "rq":
		return n, recvWindow
	case "srq":
		return 1, min(recvBurst, n*recvWindow)
	case "srq-vec":
		return vectors, min(recvBurst, (n+vectors-1)/vectors*recvWindow)
	}
	panic("unknown mode " + mode)
}

// recvQueueBufs is one receive queue of the server with its buffers.
type recvQueueBufs struct {
	qp  *QP  // for "rq"
	srq *SRQ // for the SRQ modes
	mr  *MR
	buf []byte
}

// post posts buffer slot of queue q again; rw is the caller's scratch.
func (r *recvQueueBufs) post(q, slot int, rw []RecvWR) error {
	rw[0].ID = uint64(q)<<32 | uint64(slot)
	rw[0].SGList[0] = r.mr.SGE(slot*recvMsg, recvMsg)
	if r.srq != nil {
		_, err := r.srq.PostRecv(rw...)
		return err
	}
	_, err := r.qp.PostRecv(rw...)
	return err
}

// recvServer is the receive side of n QPs on one device in one mode: the
// QPs (in INIT until connected), one CQ per vector, the receive queues and
// their registered buffers, every buffer posted.
type recvServer struct {
	mode   string
	pd     *PD
	cqs    []*CQ
	qps    []*QP
	set    *SRQSet
	queues []recvQueueBufs
	index  map[uint32]int // QPN -> index in qps (with connect only)
}

// newRecvServer builds the receive side. QP k's receive CQ is on vector
// k % vectors. connect, if not nil, connects QP k (from RESET to RTS)
// before its buffers are posted; otherwise the QPs are moved to INIT.
func newRecvServer(tb testing.TB, d *Device, mode string, n int, connect func(k int, qp *QP)) *recvServer {
	tb.Helper()
	vectors := d.Attr().NumCompVectors
	pd, err := d.AllocPD()
	require.NoError(tb, err)
	s := &recvServer{mode: mode, pd: pd}
	if connect != nil {
		// Only the throughput rig needs it; BenchmarkSRQMemory must not
		// count it.
		s.index = make(map[uint32]int, n)
	}
	for v := range vectors {
		cq, err := d.CreateCQ(4*recvBurst, v)
		require.NoError(tb, err)
		s.cqs = append(s.cqs, cq)
	}
	nq, depth := recvSizing(mode, n, vectors)
	s.queues = make([]recvQueueBufs, nq)
	switch mode {
	case "srq":
		s.queues[0].srq, err = pd.CreateSRQ(SRQAttr{MaxWR: depth, MaxSGE: 1})
		require.NoError(tb, err)
	case "srq-vec":
		s.set, err = pd.CreateSRQSet(SRQAttr{MaxWR: depth, MaxSGE: 1})
		require.NoError(tb, err)
		for v := range nq {
			s.queues[v].srq, err = s.set.SRQ(v)
			require.NoError(tb, err)
		}
	}
	for k := range n {
		cq := s.cqs[k%vectors]
		attr := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: QPCap{MaxSendWR: recvWindow, MaxRecvWR: recvWindow, MaxSendSGE: 1, MaxRecvSGE: 1}}
		switch mode {
		case "srq":
			attr.SRQ = s.queues[0].srq
		case "srq-vec":
			attr.SRQ, err = s.set.For(cq)
			require.NoError(tb, err)
		}
		qp, err := pd.CreateQP(attr)
		require.NoError(tb, err)
		if connect != nil {
			connect(k, qp)
		} else {
			require.NoError(tb, qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessLocalWrite},
				QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		}
		s.qps = append(s.qps, qp)
		if s.index != nil {
			s.index[qp.QPN()] = k
		}
		if mode == "rq" {
			s.queues[k].qp = qp
		}
	}
	rw := []RecvWR{{SGList: make([]SGE, 1)}}
	for q := range s.queues {
		r := &s.queues[q]
		r.buf = make([]byte, depth*recvMsg)
		r.mr, err = pd.RegMR(r.buf, AccessLocalWrite)
		require.NoError(tb, err)
		for slot := range depth {
			require.NoError(tb, r.post(q, slot, rw))
		}
	}
	return s
}

// close destroys everything newRecvServer made.
func (s *recvServer) close(tb testing.TB) {
	tb.Helper()
	for _, qp := range s.qps {
		require.NoError(tb, qp.Destroy())
	}
	if s.set != nil {
		require.NoError(tb, s.set.Destroy())
	} else if s.mode == "srq" {
		require.NoError(tb, s.queues[0].srq.Destroy())
	}
	for _, r := range s.queues {
		require.NoError(tb, r.mr.Dereg())
	}
	for _, cq := range s.cqs {
		require.NoError(tb, cq.Destroy())
	}
	require.NoError(tb, s.pd.Dealloc())
}

// heapAfterGC returns the bytes of live heap objects after a full
// collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSRQMemory measures, from the runtime's heap statistics after a
// collection, the memory a server's receive side holds for 8 to 1024 QPs
// in each mode (see recvSizing): the registered receive buffers and the
// receive queues' bookkeeping. From the live heap after building the
// receive side (QPs in INIT, queues, buffers registered and posted) it
// subtracts the live heap after building the same QPs on a one-entry SRQ
// with no buffers, so the QPs' own memory (send ring, state) is not
// counted. Metrics: recv-MiB, the measured receive memory; buffers, the
// receive WQEs posted; overhead-B/buf, what the receive memory holds per
// buffer beyond its 4 KiB; bare-B/qp, the QPs, CQs and PD without any
// receive buffer, per QP. Run with -benchtime 1x.
func BenchmarkSRQMemory(b *testing.B) {
	for _, n := range []int{8, 64, 256, 1024} {
		for _, mode := range recvModes {
			b.Run(fmt.Sprintf("qps=%d/%s", n, mode), func(b *testing.B) {
				da, _ := recvDevices(b, "pipe")
				var recv, bare float64
				for range b.N {
					r, q := recvMemory(b, da, mode, n)
					recv += float64(r)
					bare += float64(q)
				}
				recv /= float64(b.N)
				bare /= float64(b.N)
				nq, depth := recvSizing(mode, n, recvVectors)
				bufs := float64(nq * depth)
				b.ReportMetric(recv/(1<<20), "recv-MiB")
				b.ReportMetric(bufs, "buffers")
				b.ReportMetric((recv-bufs*recvMsg)/bufs, "overhead-B/buf")
				b.ReportMetric(bare/float64(n), "bare-B/qp")
			})
		}
	}
}

// recvMemory returns the live heap held by the receive side of n QPs in
// mode on d, and by the n QPs alone.
func recvMemory(tb testing.TB, d *Device, mode string, n int) (recv, qps int64) {
	tb.Helper()
	// The QPs alone: on a one-entry SRQ with nothing posted.
	h0 := heapAfterGC()
	pd, err := d.AllocPD()
	require.NoError(tb, err)
	cqs := make([]*CQ, recvVectors)
	for v := range cqs {
		cqs[v], err = d.CreateCQ(4*recvBurst, v)
		require.NoError(tb, err)
	}
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 1, MaxSGE: 1})
	require.NoError(tb, err)
	bare := make([]*QP, n)
	for k := range bare {
		cq := cqs[k%recvVectors]
		bare[k], err = pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Cap: QPCap{MaxSendWR: recvWindow, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(tb, err)
		require.NoError(tb, bare[k].Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessLocalWrite},
			QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	}
	h1 := heapAfterGC()
	for _, qp := range bare {
		require.NoError(tb, qp.Destroy())
	}
	require.NoError(tb, srq.Destroy())
	for _, cq := range cqs {
		require.NoError(tb, cq.Destroy())
	}
	require.NoError(tb, pd.Dealloc())

	// The receive side.
	h2 := heapAfterGC()
	s := newRecvServer(tb, d, mode, n, nil)
	h3 := heapAfterGC()
	s.close(tb)
	return int64(h3-h2) - int64(h1-h0), int64(h1 - h0)
}

// recvDevices returns a client and a server device with recvVectors
// completion vectors each, joined by kind: "pipe" or "udp" (127.0.0.1 and
// 127.0.0.2, as benchPair).
func recvDevices(tb testing.TB, kind string) (*Device, *Device) {
	tb.Helper()
	ca, cb := connPair(tb, kind)
	return openPairWith(tb, ca, cb, Options{LinkMTU: 9000, CompVectors: recvVectors}, "", "")
}

// recvRig is a client and a server in one mode, connected, with the
// server's goroutines answering requests.
type recvRig struct {
	srv    *recvServer
	cqps   []*QP
	ccq    *CQ
	cmr    *MR
	cindex map[uint32]int
	per    []int // outstanding requests per client QP
	out    int   // outstanding requests in all
	next   int   // round-robin cursor
	wcs    []WC
	req    []SendWR
	resp   []RecvWR
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error // the first error of a server goroutine
}

// newRecvRig connects n client QPs on one device to n server QPs of
// mode on another, with o on both ends.
func newRecvRig(tb testing.TB, kind, mode string, n int, o ConnectOptions) *recvRig {
	tb.Helper()
	da, db := recvDevices(tb, kind)
	r := &recvRig{cindex: make(map[uint32]int, n), per: make([]int, n), wcs: make([]WC, 256), resp: []RecvWR{{}}}
	pd, err := da.AllocPD()
	require.NoError(tb, err)
	r.ccq, err = da.CreateCQ(4*recvBurst, -1)
	require.NoError(tb, err)
	buf := make([]byte, recvMsg)
	r.cmr, err = pd.RegMR(buf, AccessLocalWrite)
	require.NoError(tb, err)
	r.req = []SendWR{{Opcode: WRSend, SGList: []SGE{r.cmr.SGE(0, recvMsg)}}}
	r.cqps = make([]*QP, n)
	r.srv = newRecvServer(tb, db, mode, n, func(k int, sqp *QP) {
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: r.ccq, RecvCQ: r.ccq,
			Cap: QPCap{MaxSendWR: recvWindow, MaxRecvWR: recvWindow, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(tb, err)
		ic, is := qp.Info(rand.Uint32()), sqp.Info(rand.Uint32())
		require.NoError(tb, qp.Connect(ic, is, o))
		require.NoError(tb, sqp.Connect(is, ic, o))
		for range recvWindow {
			_, err := qp.PostRecv(RecvWR{})
			require.NoError(tb, err)
		}
		r.cqps[k] = qp
		r.cindex[qp.QPN()] = k
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, cq := range r.srv.cqs {
		r.wg.Go(func() { r.serve(ctx, cq) })
	}
	tb.Cleanup(r.stop)
	return r
}

// stop ends the server goroutines.
func (r *recvRig) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *recvRig) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// serve is a server goroutine of one vector: it posts each consumed
// buffer again and answers its request.
func (r *recvRig) serve(ctx context.Context, cq *CQ) {
	wcs := make([]WC, 64)
	rw := []RecvWR{{SGList: make([]SGE, 1)}}
	ans := []SendWR{{Opcode: WRSend}}
	for {
		n, err := cq.Wait(ctx, wcs)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(err)
			}
			return
		}
		for i := range n {
			wc := &wcs[i]
			if wc.Status != WCSuccess || wc.Opcode != WCRecv {
				r.fail(fmt.Errorf("server completion %v %v on QP %#x", wc.Opcode, wc.Status, wc.QPNum))
				return
			}
			q, slot := int(wc.ID>>32), int(wc.ID&0xFFFFFFFF)
			if err := r.srv.queues[q].post(q, slot, rw); err != nil {
				r.fail(err)
				return
			}
			if _, err := r.srv.qps[r.srv.index[wc.QPNum]].PostSend(ans...); err != nil {
				r.fail(err)
				return
			}
		}
	}
}

// run completes n more requests.
func (r *recvRig) run(ctx context.Context, n int) error {
	posted, done := 0, 0
	for done < n {
		for posted < n && r.out < recvBurst {
			k := -1
			for range r.cqps {
				c := r.next
				r.next++
				if r.next == len(r.cqps) {
					r.next = 0
				}
				if r.per[c] < recvWindow {
					k = c
					break
				}
			}
			if k < 0 {
				break
			}
			if _, err := r.cqps[k].PostSend(r.req...); err != nil {
				return err
			}
			r.per[k]++
			r.out++
			posted++
		}
		got, err := r.ccq.Wait(ctx, r.wcs)
		if err != nil {
			r.errMu.Lock()
			defer r.errMu.Unlock()
			return errors.Join(fmt.Errorf("waiting for answers (%d of %d): %w\n%s", done, n, err, r.stalled()), r.err)
		}
		for i := range got {
			wc := &r.wcs[i]
			if wc.Status != WCSuccess || wc.Opcode != WCRecv {
				return fmt.Errorf("client completion %v %v on QP %#x", wc.Opcode, wc.Status, wc.QPNum)
			}
			k := r.cindex[wc.QPNum]
			if _, err := r.cqps[k].PostRecv(r.resp...); err != nil {
				return err
			}
			r.per[k]--
			r.out--
			done++
		}
	}
	return nil
}

// stalled describes the QPs with requests outstanding, for a run that
// stopped making progress.
func (r *recvRig) stalled() string {
	var b strings.Builder
	for k, n := range r.per {
		if n == 0 {
			continue
		}
		c, s := r.cqps[k].Counters(), r.srv.qps[k].Counters()
		fmt.Fprintf(&b, "QP %d: %d outstanding; client %v %+v; server %v %+v\n", k, n,
			r.cqps[k].State(), c.Requester, r.srv.qps[k].State(), s.Responder)
	}
	for q := range r.srv.queues {
		if srq := r.srv.queues[q].srq; srq != nil {
			fmt.Fprintf(&b, "SRQ %d: %d WQEs\n", q, srq.Len())
		}
	}
	return b.String()
}

// rnrNAKs returns the RNR NAKs the server sent and the client received.
func (r *recvRig) rnrNAKs() (sent, rcvd uint64) {
	for k := range r.cqps {
		sent += r.srv.qps[k].Counters().Responder.SendRNRErr
		rcvd += r.cqps[k].Counters().Requester.RcvdRNRErr
	}
	return sent, rcvd
}

// BenchmarkSRQSend measures request throughput of the SRQ workload
// (see recvSizing) over loopback UDP for each mode and 8 to 1024 QPs. The
// three modes of one QP count stream in alternate rounds of the same run,
// each through its own pair of devices, so their ratios see the same
// machine state. Metrics, per mode: msg/s (requests, 4 KiB each), MB/s,
// allocs/msg (the whole process: both devices and both sides), rnr-naks
// (sent by the server; must be 0 for a correctly sized mode), and the
// msg/s ratio to "rq".
func BenchmarkSRQSend(b *testing.B) {
	for _, n := range []int{8, 64, 256, 1024} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			rigs := make([]*recvRig, len(recvModes))
			for i, mode := range recvModes {
				rigs[i] = newRecvRig(b, "udp", mode, n, ConnectOptions{})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			// Warm up: every QP and every buffer used at least once.
			for _, r := range rigs {
				require.NoError(b, r.run(ctx, max(2*recvBurst, 2*n)))
			}
			const rounds = 6
			elapsed := make([]time.Duration, len(rigs))
			mallocs := make([]uint64, len(rigs))
			msgs := make([]int, len(rigs))
			rnr0 := make([]uint64, len(rigs))
			for i, r := range rigs {
				rnr0[i], _ = r.rnrNAKs()
			}
			var ms runtime.MemStats
			b.ResetTimer()
			for round := range rounds {
				share := b.N/rounds + min(1, b.N%rounds/(round+1))
				if share == 0 {
					continue
				}
				for i, r := range rigs {
					runtime.ReadMemStats(&ms)
					m0, t0 := ms.Mallocs, time.Now()
					require.NoError(b, r.run(ctx, share))
					elapsed[i] += time.Since(t0)
					runtime.ReadMemStats(&ms)
					mallocs[i] += ms.Mallocs - m0
					msgs[i] += share
				}
			}
			b.StopTimer()
			base := float64(msgs[0]) / elapsed[0].Seconds()
			for i, mode := range recvModes {
				rate := float64(msgs[i]) / elapsed[i].Seconds()
				sent, _ := rigs[i].rnrNAKs()
				b.ReportMetric(rate, mode+"-msg/s")
				b.ReportMetric(rate*recvMsg/1e6, mode+"-MB/s")
				b.ReportMetric(float64(mallocs[i])/float64(msgs[i]), mode+"-allocs/msg")
				b.ReportMetric(float64(sent-rnr0[i]), mode+"-rnr-naks")
				if i > 0 {
					b.ReportMetric(rate/base, mode+"-ratio")
				}
			}
		})
	}
}

// TestSRQWorkload runs the benchmarks' workload briefly in each mode and
// checks that it completes without an RNR NAK, as the sizing promises,
// and that an SRQ sized below the burst does draw them.
//
// The pipe loses nothing, but it is one FIFO: every probe a timeout sends
// waits behind the other QPs' requests (24 QPs × 16, 4 KiB each). Under
// the race detector on a loaded host (GOMAXPROCS 1) the server took more
// than the default 8 × 67 ms to work through them, and the client's QPs
// failed with RETRY_EXC_ERR; with 4.2 s timeouts (Timeout 20) the retries
// outlast such a backlog within the test's minute.
func TestSRQWorkload(t *testing.T) {
	slow := ConnectOptions{Timeout: 20}
	for _, mode := range recvModes {
		t.Run(mode, func(t *testing.T) {
			r := newRecvRig(t, "pipe", mode, 24, slow)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, r.run(ctx, 2000))
			sent, rcvd := r.rnrNAKs()
			require.Zero(t, sent)
			require.Zero(t, rcvd)
		})
	}
	t.Run("undersized", func(t *testing.T) {
		r := newRecvRig(t, "pipe", "srq", 24, slow)
		// Leave 16 of the 256 buffers: the client's burst cannot fit.
		for q := range r.srv.queues {
			p := newSRQPort(r.srv.queues[q].srq.q)
			for range 240 {
				_, ok := p.Peek()
				require.True(t, ok)
				p.Pop()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, r.run(ctx, 500))
		sent, rcvd := r.rnrNAKs()
		require.Positive(t, sent)
		require.Equal(t, sent, rcvd)
	})
}

// TestSRQDataPathAllocs requires that a request of the SRQ workload
// over the in-memory pipe (the SEND into an SRQ or a QP's own receive
// queue, the buffer posted again, the answer, both completions) allocates
// nothing once warmed up, in every mode.
func TestSRQDataPathAllocs(t *testing.T) {
	if benchRaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, mode := range recvModes {
		t.Run(mode, func(t *testing.T) {
			r := newRecvRig(t, "pipe", mode, 4, ConnectOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, r.run(ctx, 2*recvBurst))
			var err error
			allocs := testing.AllocsPerRun(200, func() {
				if e := r.run(ctx, 1); e != nil && err == nil {
					err = e
				}
			})
			require.NoError(t, err)
			require.Zero(t, allocs, "allocations per request in mode %s", mode)
		})
	}
}
