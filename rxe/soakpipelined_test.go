package rxe

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The seeds and length of TestSoakPipelined; a hunt for defects runs
// thousands (go test ./rxe -run TestSoakPipelined -pipeto 4000).
var (
	pipeFrom = flag.Uint64("pipefrom", 1, "first pipelined soak seed")
	pipeTo   = flag.Uint64("pipeto", 4, "last pipelined soak seed")
	pipeN    = flag.Int("pipen", 150, "WRs per pipelined soak seed")
)

// TestSoakPipelined keeps up to 64 mixed WRs outstanding on one RC QP
// (SEND with and without immediate data, WRITE with and without it, READ,
// fetch-and-add and compare-and-swap chained on one counter, some fenced)
// over an in-memory link whose seed picks drop, duplication, reordering
// and corruption rates, the path MTU, selective repeat or go-back-N, the
// initiator depth and whether receives are posted late (RNR). Every WR
// completes with SUCCESS in order, the data of every operation arrives,
// receives complete in order with their lengths, and each atomic runs
// exactly once (the counter and the originals returned).
func TestSoakPipelined(t *testing.T) {
	for seed := *pipeFrom; seed <= *pipeTo; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { pipeSoak(t, seed) })
		})
	}
}

func pipeSoak(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	pct := func(max int) int { return rng.IntN(max + 1) }
	var rules []string
	if n := pct(5); n > 0 {
		rules = append(rules, fmt.Sprintf("drop=%d%%", n))
	}
	if n := pct(3); n > 0 {
		rules = append(rules, fmt.Sprintf("dup=%d%%", n))
	}
	if n := pct(3); n > 0 {
		rules = append(rules, fmt.Sprintf("reorder=%d%%,by=%d", n, 1+rng.IntN(5)))
	}
	if n := pct(2); n > 0 {
		rules = append(rules, fmt.Sprintf("corrupt=%d%%", n))
	}
	sr := rng.IntN(2) == 0
	mtu := []MTU{MTU256, MTU512, MTU1024, MTU2048, MTU4096}[rng.IntN(5)]
	rdat := 1 + rng.IntN(16)
	fenceP := []float64{0, 0.1, 0.3}[rng.IntN(3)]
	recvLag := rng.IntN(3) // 0: receives posted up front; else lazily (RNR)
	t.Logf("rules %v sr %v mtu %v rdatomic %d fence %.1f recvLag %d", rules, sr, mtu, rdat, fenceP, recvLag)

	da, db, fa := faultyDevices(t, seed, rules)
	const bufSize = 16 << 20
	a, b := newEnd(t, da, bufSize), newEnd(t, db, bufSize)
	ia, ib := a.qp.Info(rng.Uint32()&0xFFFFFF), b.qp.Info(0xFFFFF0)
	ib.SelectiveRepeat = sr
	if !sr {
		ia.SelectiveRepeat = false
	}
	o := ConnectOptions{MTU: mtu, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: rdat, MinRNRTimer: 1}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))

	const counter = 7 << 20
	type exp struct {
		op      WROpcode
		off, n  int
		add     uint64
		recvIdx int
	}
	var exps []exp
	var recvs []int // lengths of SENDs/WRITE_IMM in order
	nWR := *pipeN
	slot := func(i int) int { return 64<<10 + i*(17<<10) } // up to 16 KiB per WR
	for i := range nWR {
		ops := []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead, WRAtomicFetchAndAdd, WRAtomicCmpAndSwp}
		op := ops[rng.IntN(len(ops))]
		n := []int{0, 1, int(mtu.Bytes()) - 1, int(mtu.Bytes()), int(mtu.Bytes()) + 1, rng.IntN(16 << 10)}[rng.IntN(6)]
		e := exp{op: op, off: slot(i), n: n, recvIdx: -1}
		switch op {
		case WRRDMARead:
			fill(b.buf[e.off:e.off+n], uint64(i)+seed<<20)
		case WRAtomicFetchAndAdd:
			e.add = uint64(1 + rng.IntN(100))
		case WRAtomicCmpAndSwp:
		default:
			fill(a.buf[e.off:e.off+n], uint64(i)+seed<<20)
		}
		if op == WRSend || op == WRSendWithImm || op == WRRDMAWriteWithImm {
			e.recvIdx = len(recvs)
			recvs = append(recvs, n)
		}
		exps = append(exps, e)
	}
	syncMem(a, b)
	posted := 0
	postRecv := func(k int) {
		for ; posted < len(recvs) && k > 0; k-- {
			// Receive buffers in a separate area of b.
			_, err := b.qp.PostRecv(RecvWR{ID: uint64(posted), SGList: []SGE{b.mr.SGE(8<<20+posted*(17<<10), 16<<10+16)}})
			require.NoError(t, err)
			posted++
		}
	}
	if recvLag == 0 {
		postRecv(len(recvs))
	} else {
		postRecv(3)
	}
	// Atomics: a single counter; the CAS compares with the value the
	// previous atomics leave (in order), so it always hits.
	var val uint64
	origs := make([]uint64, nWR)
	sentWR := 0
	outstanding := 0
	var wcs []WC
	for sentWR < nWR || outstanding > 0 {
		for sentWR < nWR && outstanding < 64 && rng.IntN(4) != 0 {
			i := sentWR
			e := exps[i]
			wr := SendWR{ID: uint64(i), Opcode: e.op, Flags: SendSignaled, Imm: uint32(i)}
			if rng.Float64() < fenceP {
				wr.Flags |= SendFence
			}
			switch e.op {
			case WRAtomicFetchAndAdd:
				wr.SGList = []SGE{a.mr.SGE(e.off, 8)}
				wr.RemoteAddr, wr.RKey, wr.CompareAdd = b.mr.Addr()+counter, b.mr.RKey(), e.add
				origs[i] = val
				val += e.add
			case WRAtomicCmpAndSwp:
				wr.SGList = []SGE{a.mr.SGE(e.off, 8)}
				nv := rng.Uint64() >> 8
				wr.RemoteAddr, wr.RKey, wr.CompareAdd, wr.Swap = b.mr.Addr()+counter, b.mr.RKey(), val, nv
				origs[i] = val
				val = nv
			default:
				wr.SGList = []SGE{a.mr.SGE(e.off, e.n)}
				wr.RemoteAddr, wr.RKey = b.mr.Addr()+uint64(e.off), b.mr.RKey()
			}
			_, err := a.qp.PostSend(wr)
			require.NoError(t, err)
			sentWR++
			outstanding++
		}
		if recvLag > 0 && rng.IntN(recvLag*2) == 0 {
			postRecv(1 + rng.IntN(4))
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		wc := make([]WC, 16)
		n := a.cq.Poll(wc)
		for _, c := range wc[:n] {
			if c.QPNum != a.qp.QPN() {
				continue
			}
			wcs = append(wcs, c)
			outstanding--
		}
		if n == 0 && sentWR == nWR {
			postRecv(len(recvs))
			c := waitVirtual(t, a.cq)
			wcs = append(wcs, c)
			outstanding--
		}
	}
	for i, c := range wcs {
		require.Equal(t, uint64(i), c.ID, "completion order")
		require.Equal(t, WCSuccess, c.Status, "WR %d %v", i, exps[i].op)
	}
	postRecv(len(recvs))
	syncMem(a, b)
	for i, e := range exps {
		switch e.op {
		case WRAtomicFetchAndAdd, WRAtomicCmpAndSwp:
			require.Equal(t, origs[i], binary.NativeEndian.Uint64(a.buf[e.off:]), "atomic %d original", i)
		case WRRDMARead:
			require.True(t, bytes.Equal(b.buf[e.off:e.off+e.n], a.buf[e.off:e.off+e.n]), "READ %d", i)
		case WRRDMAWrite, WRRDMAWriteWithImm:
			require.True(t, bytes.Equal(a.buf[e.off:e.off+e.n], b.buf[e.off:e.off+e.n]), "WRITE %d", i)
		}
	}
	require.Equal(t, val, binary.NativeEndian.Uint64(b.buf[counter:]), "atomics executed exactly once")
	// Receive side: SEND data in order.
	for k := range recvs {
		c := waitVirtual(t, b.cq)
		require.Equal(t, WCSuccess, c.Status)
		require.Equal(t, uint64(k), c.ID, "receive order")
		require.Equal(t, uint32(recvs[k]), c.ByteLen, "receive %d length", k)
	}
	for i, e := range exps {
		if (e.op == WRSend || e.op == WRSendWithImm) && e.n > 0 {
			off := 8<<20 + e.recvIdx*(17<<10)
			require.True(t, bytes.Equal(a.buf[e.off:e.off+e.n], b.buf[off:off+e.n]), "SEND %d", i)
		}
	}
	st := fa.Stats()
	t.Logf("faults: send %+v recv %+v", st.Send, st.Recv)
}
