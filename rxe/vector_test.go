package rxe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/rawudp"
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

// TestVectorsSpreadQPs checks the vectors' placement: CQs created without a
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
	}, testutil.Bound(), time.Millisecond, "vectors pinned in order to %v: %+v", cpus, da.Vectors())
	require.Zero(t, da.Counters().PinErrors)
}

func TestOpenConnsErrors(t *testing.T) {
	pipeA, pipeB := netdev.NewPipe()
	defer pipeA.Close()
	defer pipeB.Close()
	_, err := OpenConns(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Open(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument, "a nil netdev")
	_, err = OpenConns([]netdev.Conn{pipeA, nil}, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument, "a nil netdev among others")
	_, err = OpenConns([]netdev.Conn{pipeA, pipeB}, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument, "two different addresses")
	group, err := netdev.ListenUDPGroup(netip.MustParseAddrPort("127.0.0.1:0"), 2, netdev.Options{})
	require.NoError(t, err)
	defer group[0].Close()
	defer group[1].Close()
	_, err = OpenConns([]netdev.Conn{group[0], group[1]}, Options{CompVectors: 3})
	require.ErrorIs(t, err, ErrInvalidArgument, "vectors must match the sockets")
	_, err = Open(pipeA, Options{Addr: netip.MustParseAddr("fd00::1")})
	require.ErrorIs(t, err, ErrInvalidArgument, "an IPv6 device address on an IPv4 netdev")
	p6a, p6b := netdev.NewPipeWith(netdev.PipeOptions{AddrA: netip.MustParseAddrPort("[fd00::1]:4791"), AddrB: netip.MustParseAddrPort("[fd00::2]:4791")})
	defer p6a.Close()
	defer p6b.Close()
	_, err = Open(p6a, Options{Addr: netip.MustParseAddr("127.0.0.1")})
	require.ErrorIs(t, err, ErrInvalidArgument, "an IPv4 device address on an IPv6 netdev")
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
	_, err = d.CreateCQ(16, -2)
	require.ErrorIs(t, err, ErrInvalidArgument, "-1 is the only negative vector (the least-used one)")
	require.Zero(t, d.Vectors()[0].CQs, "a refused CQ counts on no vector")
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

// TestListenRefusesVectorCount: Listen refuses a completion vector count
// OpenConns would refuse with ErrInvalidArgument before it opens a socket,
// instead of failing in netdev (a group of more than 1024 sockets) with
// another error, or opening one socket per vector only to close them.
func TestListenRefusesVectorCount(t *testing.T) {
	for _, n := range []int{-1, maxCompVectors + 1, 1 << 20, math.MaxInt} {
		for _, single := range []bool{false, true} {
			_, err := Listen(netip.MustParseAddrPort("127.0.0.5:0"), Options{CompVectors: n, SingleSocket: single})
			require.ErrorIs(t, err, ErrInvalidArgument, "%d vectors, single socket %v", n, single)
			require.ErrorContains(t, err, "completion vectors")
		}
	}
}

// Vector benchmark parameters: perftest's defaults (tx depth 128, one in
// 16 signaled), MTU 4096, and the number of alternating rounds.
const (
	vecDepth  = 128
	vecSignal = 16
	vecRounds = 8
)

// BenchmarkVectors measures the vectors' scaling: Q RC QPs streaming at
// once from device A to device B over loopback UDP (127.0.0.1 to
// 127.0.0.2), each QP with its own CQ, through a pair of devices with one
// completion vector, through a pair with GOMAXPROCS vectors (one
// socket, receive and transmit goroutine per vector; CQs on the
// least-used vector, so the QPs spread evenly) and through a pair with
// GOMAXPROCS vectors sharing one socket and receive goroutine
// (Options.SingleSocket: the receive work is not spread), for RDMA WRITE
// and SEND of 4 to 64 KiB. Each b.N is split into rounds that alternate
// between the three pairs and a raw-UDP baseline (rawudp.Measure, full-MTU
// datagrams, one flow), so all three see the same machine state. It
// reports, for each pair, MB/s (payload, 10^6 bytes), msgs/s, the ratio to
// raw UDP and CPU µs per message (whole process), the speedup of N vectors
// over one (and of N vectors on one socket over one), and RNR NAKs (SEND: the receiver reposts each buffer as soon
// as its completion is polled).
//
//	go test -run '^$' -bench Vectors -benchtime 16000x ./rxe/
func BenchmarkVectors(b *testing.B) {
	nvec := runtime.GOMAXPROCS(0)
	for _, op := range []WROpcode{WRRDMAWrite, WRSend} {
		for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
			for _, qps := range []int{1, 2, 4, 8} {
				name := fmt.Sprintf("%s/%dK/qps=%d", opName(op), size>>10, qps)
				b.Run(name, func(b *testing.B) { benchVectors(b, op, size, qps, nvec) })
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

// vecStreams is Q streams between two devices (BenchmarkVectors).
type vecStreams struct {
	ss      []*streamer
	recvErr chan error
	stop    func()
	rnr0    uint64
	time    time.Duration
	cpu     time.Duration
	msgs    int
}

func newVecStreams(ctx context.Context, b *testing.B, op WROpcode, size, qps, vecs int, single bool, hostA, hostB string) *vecStreams {
	da := groupDevice(b, hostA+":0", vecs, single, false)
	db := groupDevice(b, hostB+":0", vecs, single, false)
	vs := &vecStreams{recvErr: make(chan error, qps)}
	recvCtx, stopRecv := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	vs.stop = func() {
		stopRecv()
		rwg.Wait()
	}
	b.Cleanup(vs.stop)
	for range qps {
		a, z := newEnd(b, da, testBufSize), newEnd(b, db, testBufSize)
		connect(b, a, z, MTU4096)
		vs.ss = append(vs.ss, newStreamer(ctx, a, z, op, size, vecDepth, vecSignal))
		if op != WRSend {
			continue
		}
		// SEND: a goroutine per receiving QP keeps its receive queue full.
		post := func(slot int) error {
			off := (slot % benchSlots) * benchMsg
			_, err := z.qp.PostRecv(RecvWR{ID: uint64(slot), SGList: []SGE{z.mr.SGE(off, size)}})
			return err
		}
		for i := range z.qp.Cap().MaxRecvWR {
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
						vs.recvErr <- err
					}
					return
				}
				for _, wc := range wcs[:n] {
					if wc.Status != WCSuccess {
						vs.recvErr <- fmt.Errorf("receive completion: %v", wc.Status)
						return
					}
					if err := post(int(wc.ID)); err != nil {
						vs.recvErr <- err
						return
					}
				}
			}
		}()
	}
	require.NoError(b, vs.run(2*vecDepth)) // warm up
	vs.rnr0, vs.time, vs.cpu, vs.msgs = vs.rnr(), 0, 0, 0
	return vs
}

// run moves n messages on every QP at once.
func (vs *vecStreams) run(n int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(vs.ss))
	t0, c0 := time.Now(), benchCPUTime()
	for i, s := range vs.ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.run(n)
		}()
	}
	wg.Wait()
	vs.time += time.Since(t0)
	vs.cpu += benchCPUTime() - c0
	vs.msgs += n * len(vs.ss)
	select {
	case err := <-vs.recvErr:
		return err
	default:
	}
	return errors.Join(errs...)
}

func (vs *vecStreams) rnr() uint64 {
	var n uint64
	for _, s := range vs.ss {
		n += s.a.qp.Counters().Requester.RcvdRNRErr
	}
	return n
}

func (vs *vecStreams) report(b *testing.B, suffix string, size int, rawMBps float64) float64 {
	mbps := float64(vs.msgs) * float64(size) / vs.time.Seconds() / 1e6
	b.ReportMetric(mbps, "MB/s-"+suffix)
	b.ReportMetric(float64(vs.msgs)/vs.time.Seconds(), "msgs/s-"+suffix)
	b.ReportMetric(mbps/rawMBps, "ratio-"+suffix)
	b.ReportMetric(float64(vs.cpu.Microseconds())/float64(vs.msgs), "cpu-µs/msg-"+suffix)
	b.ReportMetric(float64(vs.rnr()-vs.rnr0), "rnr-naks-"+suffix)
	return mbps
}

func benchVectors(b *testing.B, op WROpcode, size, qps, nvec int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	one := newVecStreams(ctx, b, op, size, qps, 1, false, "127.0.0.1", "127.0.0.2")
	many := newVecStreams(ctx, b, op, size, qps, nvec, false, "127.0.0.3", "127.0.0.4")
	shared := newVecStreams(ctx, b, op, size, qps, nvec, true, "127.0.0.5", "127.0.0.6")
	perRound := max((b.N+vecRounds*qps-1)/(vecRounds*qps), vecSignal)
	var rawBytes float64
	var rawTime time.Duration
	b.ResetTimer()
	for range vecRounds {
		require.NoError(b, one.run(perRound))
		require.NoError(b, many.run(perRound))
		require.NoError(b, shared.run(perRound))
		pkts := perRound * qps * ((size + 4095) / 4096)
		raw, err := rawudp.Measure(ctx, rawudp.Config{Size: benchDatagram, Count: max(pkts, 1024)})
		require.NoError(b, err)
		rawBytes += float64(raw.Received) * float64(raw.Size)
		rawTime += raw.Elapsed
	}
	b.StopTimer()
	rawMBps := rawBytes / rawTime.Seconds() / 1e6
	b.ReportMetric(rawMBps, "rawUDP-MB/s")
	m1 := one.report(b, "1vec", size, rawMBps)
	mn := many.report(b, fmt.Sprintf("%dvec", nvec), size, rawMBps)
	ms := shared.report(b, fmt.Sprintf("%dvec-1sock", nvec), size, rawMBps)
	b.ReportMetric(mn/m1, "speedup")
	b.ReportMetric(ms/m1, "speedup-1sock")
}
