package rxe

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// groupDevice opens a device with one socket per vector (as Listen does,
// but on an ephemeral port), or a single shared socket.
func groupDevice(t testing.TB, addr string, vectors int, single bool, pin bool) *Device {
	t.Helper()
	n := vectors
	if single {
		n = 1
	}
	group, err := netdev.ListenUDPGroup(netip.MustParseAddrPort(addr), n, netdev.Options{BlockingWrite: true})
	require.NoError(t, err)
	conns := make([]netdev.Conn, len(group))
	for i, c := range group {
		conns[i] = c
	}
	d, err := OpenConns(conns, Options{LinkMTU: 9000, OwnConn: true, CompVectors: vectors, PinVectors: pin})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// TestVectorsSpreadQPs checks seed 001's placement: CQs created without a
// vector go to the least-used one, each QP runs on its receive CQ's
// vector, its QPN selects that vector's socket, and the traffic of each
// QP is received and sent by its own vector only.
func TestVectorsSpreadQPs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vectors int
		single  bool
	}{
		{"2-vectors-own-sockets", 2, false},
		{"3-vectors-own-sockets", 3, false},
		{"3-vectors-one-socket", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da := groupDevice(t, "127.0.0.1:0", tc.vectors, tc.single, false)
			db := groupDevice(t, "127.0.0.2:0", tc.vectors, tc.single, false)
			const pairs = 6
			var as, bs []*end
			for range pairs {
				a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
				connect(t, a, b, MTU1024)
				as, bs = append(as, a), append(bs, b)
			}
			for i, e := range as {
				require.Equal(t, i%tc.vectors, e.cq.Vector(), "least-used vector, round robin")
				require.Equal(t, e.cq.Vector(), int(e.qp.QPN())%tc.vectors, "the QPN selects the vector")
			}
			for i, vi := range da.Vectors() {
				require.Equal(t, i, vi.ID)
				require.Equal(t, pairs/tc.vectors, vi.CQs)
				require.Equal(t, !tc.single, vi.OwnSocket)
				require.Equal(t, -1, vi.CPU)
			}
			// Traffic on the QPs of vector 1 only: 1 KiB WRITEs, 5 packets each.
			for i := range pairs {
				if as[i].cq.Vector() != 1 {
					continue
				}
				fill(as[i].buf[:5000], uint64(i))
				_, err := as[i].qp.PostSend(SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGList: []SGE{as[i].mr.SGE(0, 5000)}, RemoteAddr: bs[i].mr.Addr(), RKey: bs[i].mr.RKey()})
				require.NoError(t, err)
				require.Equal(t, WCSuccess, waitWC(t, as[i].cq).Status)
				syncMem(as[i], bs[i])
				require.Equal(t, as[i].buf[:5000], bs[i].buf[:5000])
			}
			for _, d := range []*Device{da, db} {
				vs := d.Vectors()
				for _, vi := range vs {
					if vi.ID == 1 {
						require.NotZero(t, vi.RcvdPkts, "vector 1 received its QPs' packets")
						require.NotZero(t, vi.SentPkts, "vector 1 sent its QPs' packets")
					} else {
						require.Zero(t, vi.RcvdPkts, "vector %d has no traffic", vi.ID)
						require.Zero(t, vi.SentPkts, "vector %d has no traffic", vi.ID)
					}
				}
			}
		})
	}
}

// TestVectorsPinned checks Options.PinVectors: every vector reports a CPU
// the process may use, the CPUs are assigned in order, and data moves.
func TestVectorsPinned(t *testing.T) {
	cpus, err := allowedCPUs()
	require.NoError(t, err)
	da := groupDevice(t, "127.0.0.1:0", 2, false, true)
	db := groupDevice(t, "127.0.0.2:0", 2, false, true)
	a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
	connect(t, a, b, MTU1024)
	_, err = a.qp.PostSend(SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled,
		SGList: []SGE{a.mr.SGE(0, 3000)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	require.Eventually(t, func() bool {
		for _, vi := range da.Vectors() {
			if vi.CPU != cpus[vi.ID%len(cpus)] {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "vectors pinned in order to %v: %+v", cpus, da.Vectors())
	require.Zero(t, da.Counters().PinErrors)
}

func TestOpenConnsErrors(t *testing.T) {
	pipeA, pipeB := netdev.NewPipe()
	defer pipeA.Close()
	defer pipeB.Close()
	_, err := OpenConns(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = OpenConns([]netdev.Conn{pipeA, pipeB}, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument, "two different addresses")
	group, err := netdev.ListenUDPGroup(netip.MustParseAddrPort("127.0.0.1:0"), 2, netdev.Options{})
	require.NoError(t, err)
	defer group[0].Close()
	defer group[1].Close()
	_, err = OpenConns([]netdev.Conn{group[0], group[1]}, Options{CompVectors: 3})
	require.ErrorIs(t, err, ErrInvalidArgument, "vectors must match the sockets")
	_, err = Open(pipeA, Options{CompVectors: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Open(pipeA, Options{CompVectors: maxCompVectors + 1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	d, err := Open(pipeA, Options{})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, runtime.GOMAXPROCS(0), d.Attr().NumCompVectors, "default: one vector per P")
	_, err = d.CreateCQ(16, d.Attr().NumCompVectors)
	require.ErrorIs(t, err, ErrInvalidArgument, "no such vector")
}

// TestListenVectors checks that Listen opens one socket per vector on the
// RoCE port and refuses a port in use.
func TestListenVectors(t *testing.T) {
	addr := netip.MustParseAddrPort("127.0.0.3:0") // Listen's port 0 is 4791
	d, err := Listen(addr, Options{CompVectors: 2})
	if err != nil {
		t.Skipf("cannot bind %v:4791 (in use by another test process?): %v", addr.Addr(), err)
	}
	defer d.Close()
	require.Equal(t, uint16(4791), d.Addr().Port())
	vs := d.Vectors()
	require.Len(t, vs, 2)
	require.True(t, vs[0].OwnSocket)
	_, err = Listen(addr, Options{CompVectors: 2})
	require.ErrorContains(t, err, "in use", "a second device must not join the first one's sockets")
	s, err := Listen(netip.MustParseAddrPort("127.0.0.4:0"), Options{CompVectors: 2, SingleSocket: true})
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.Vectors()[0].OwnSocket)
}

// Vector benchmark parameters: perftest's defaults (tx depth 128, one in
// 16 signaled), MTU 4096.
const (
	vecDepth  = 128
	vecSignal = 16
)

// BenchmarkVectors measures seed 001's scaling: Q RC QPs streaming at
// once from device A to device B over loopback UDP (127.0.0.1 to
// 127.0.0.2), each QP with its own CQ, on devices with one completion
// vector against devices with GOMAXPROCS vectors (one socket, receive and
// transmit goroutine per vector, QPs spread by the least-used rule),
// for RDMA WRITE and SEND of 4 to 64 KiB. It reports MB/s (payload,
// 10^6 bytes), msgs/s, the ratio to raw UDP (netdev.MeasureRawUDP with
// full-MTU datagrams, measured after the timed part of the same
// sub-benchmark), CPU µs per message and RNR NAKs (SEND: the receiver
// reposts each buffer as soon as its completion is polled).
//
//	go test -run '^$' -bench Vectors -benchtime 2000x ./rxe/
func BenchmarkVectors(b *testing.B) {
	nvec := runtime.GOMAXPROCS(0)
	for _, op := range []WROpcode{WRRDMAWrite, WRSend} {
		for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
			for _, qps := range []int{1, 2, 4, 8} {
				for _, vecs := range slices.Compact([]int{1, nvec}) {
					name := fmt.Sprintf("%s/%dK/qps=%d/vectors=%d", opName(op), size>>10, qps, vecs)
					b.Run(name, func(b *testing.B) { benchVectors(b, op, size, qps, vecs) })
				}
			}
		}
	}
}

func opName(op WROpcode) string {
	if op == WRSend {
		return "send"
	}
	return "write"
}

func benchVectors(b *testing.B, op WROpcode, size, qps, vecs int) {
	da := groupDevice(b, "127.0.0.1:0", vecs, false, false)
	db := groupDevice(b, "127.0.0.2:0", vecs, false, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type pair struct {
		a, z *end
		s    *streamer
	}
	ps := make([]pair, qps)
	for i := range ps {
		a, z := newEnd(b, da, testBufSize), newEnd(b, db, testBufSize)
		connect(b, a, z, MTU4096)
		ps[i] = pair{a: a, z: z, s: newStreamer(ctx, a, z, op, size, vecDepth, vecSignal)}
	}
	// SEND: one goroutine per receiving QP keeps its receive queue full.
	recvCtx, stopRecv := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	recvErr := make(chan error, qps)
	if op == WRSend {
		for _, p := range ps {
			z := p.z
			depth := z.qp.Cap().MaxRecvWR
			post := func(slot int) error {
				off := (slot % benchSlots) * benchMsg
				_, err := z.qp.PostRecv(RecvWR{ID: uint64(slot), SGList: []SGE{z.mr.SGE(off, size)}})
				return err
			}
			for i := range depth {
				require.NoError(b, post(i))
			}
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				wcs := make([]WC, 64)
				for {
					n, err := z.cq.Wait(recvCtx, wcs)
					if err != nil {
						if recvCtx.Err() == nil {
							recvErr <- err
						}
						return
					}
					for _, wc := range wcs[:n] {
						if wc.Status != WCSuccess {
							recvErr <- fmt.Errorf("receive completion: %v", wc.Status)
							return
						}
						if err := post(int(wc.ID)); err != nil {
							recvErr <- err
							return
						}
					}
				}
			}()
		}
	}
	defer func() {
		stopRecv()
		rwg.Wait()
	}()
	runAll := func(n int) error {
		var wg sync.WaitGroup
		errs := make([]error, len(ps))
		for i := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = ps[i].s.run(n)
			}()
		}
		wg.Wait()
		select {
		case err := <-recvErr:
			return err
		default:
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(b, runAll(2*vecDepth)) // warm up
	rnr0 := rnrNAKs(ps[0].a.qp)
	for _, p := range ps[1:] {
		rnr0 += rnrNAKs(p.a.qp)
	}
	perQP := max(b.N/qps, vecSignal)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	c0 := benchCPUTime()
	b.ResetTimer()
	require.NoError(b, runAll(perQP))
	b.StopTimer()
	cpu := benchCPUTime() - c0
	elapsed := b.Elapsed()
	msgs := float64(perQP * qps)
	rnr := -rnr0
	for _, p := range ps {
		rnr += rnrNAKs(p.a.qp)
	}
	pkts := max(int(msgs)*((size+4095)/4096), 4096)
	raw, err := netdev.MeasureRawUDP(ctx, netdev.RawUDPConfig{Size: benchDatagram, Count: min(pkts, 1<<16)})
	require.NoError(b, err)
	rawMBps := float64(raw.Received) * float64(raw.Size) / raw.Elapsed.Seconds() / 1e6
	mbps := msgs * float64(size) / elapsed.Seconds() / 1e6
	b.ReportMetric(mbps, "MB/s")
	b.ReportMetric(msgs/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(mbps/rawMBps, "ratio")
	b.ReportMetric(float64(cpu.Microseconds())/msgs, "cpu-µs/msg")
	b.ReportMetric(float64(rnr), "rnr-naks")
}

// rnrNAKs is the number of RNR NAKs qp's requester received.
func rnrNAKs(qp *QP) uint64 { return qp.Counters().Requester.RcvdRNRErr }
