package rxe

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// soakRules is a fault mix in both directions.
type soakCase struct {
	name  string
	rules []string
}

var soakCases = []soakCase{
	{"loss1", []string{"drop=1%"}},
	{"loss5", []string{"drop=5%"}},
	{"dup1", []string{"dup=1%"}},
	{"reorder", []string{"reorder=2%,by=3"}},
	{"corrupt", []string{"corrupt=1%"}},
	{"mix", []string{"drop=1%", "dup=1%", "reorder=1%,by=2", "corrupt=1%"}},
}

// faultyPair connects two devices through a pipe whose a-side is wrapped
// in a fault injector; everything runs on synctest's virtual clock. Both
// ends offer selective repeat, so it is on.
func faultyPair(t *testing.T, seed uint64, rules []string) (*end, *end, *faults.Conn) {
	return faultyPairSR(t, seed, rules, true)
}

// faultyPairSR is faultyPair with selective repeat on (both ends offer
// it) or off (b offers nothing, as a kernel-rxe peer).
func faultyPairSR(t *testing.T, seed uint64, rules []string, sr bool) (*end, *end, *faults.Conn) {
	da, db, fa := faultyDevices(t, seed, rules)
	a, b := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
	ia, ib := a.qp.Info(0xFFFF00), b.qp.Info(0xFFFFF0) // both wrap early
	ib.SelectiveRepeat = sr
	o := ConnectOptions{MTU: MTU1024, Timeout: 10, RetryCnt: 7, RNRRetry: 7}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))
	require.Equal(t, sr, a.qp.Query().SelectiveRepeat)
	require.Equal(t, sr, b.qp.Query().SelectiveRepeat)
	return a, b, fa
}

// faultyDevices opens two devices joined by an in-memory pipe whose a
// side applies the fault rules (faults.ParseRule syntax) with seed; they
// are closed at the end of the test.
func faultyDevices(t *testing.T, seed uint64, rules []string) (*Device, *Device, *faults.Conn) {
	pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	fa := faults.Wrap(pa, faults.Config{Seed: seed, Rules: parseRules(t, rules...)})
	da, db := openPairWith(t, fa, pb, Options{LinkMTU: 9000}, "soak-a", "soak-b")
	return da, db, fa
}

// parseRules parses rules (faults.ParseRule syntax), requiring that each
// parses.
func parseRules(t testing.TB, rules ...string) []faults.Rule {
	t.Helper()
	var rs []faults.Rule
	for _, s := range rules {
		r, err := faults.ParseRule(s)
		require.NoError(t, err, s)
		rs = append(rs, r)
	}
	return rs
}

// waitVirtual waits for one completion; the deadline is virtual time.
func waitVirtual(t *testing.T, cq *CQ) WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc := make([]WC, 1)
	_, err := cq.Wait(ctx, wc)
	require.NoError(t, err, "no completion within a virtual minute")
	return wc[0]
}

// TestSoak runs every operation through lossy, duplicating, reordering and
// corrupting links in both directions, on virtual time, with selective
// repeat negotiated (sr) and without (gbn: the peer offers nothing, as
// kernel rxe), and checks every byte and that each atomic executed
// exactly once. synctest.Test also checks for leaks: it fails if any
// goroutine of the devices or of the fault injector is still blocked when
// the test ends.
func TestSoak(t *testing.T) {
	for _, mode := range []struct {
		name string
		sr   bool
	}{{"sr", true}, {"gbn", false}} {
		for _, sc := range soakCases {
			for _, seed := range []uint64{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/seed%d", mode.name, sc.name, seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { soak(t, seed, sc.rules, mode.sr) })
				})
			}
		}
	}
}

func soak(t *testing.T, seed uint64, rules []string, sr bool) {
	a, b, fa := faultyPairSR(t, seed, rules, sr)
	const counter = 1 << 19 // the atomic counter's offset in b's region
	binary.NativeEndian.PutUint64(b.buf[counter:], 0)
	syncMem(a, b)
	sizes := []int{0, 1, 1023, 1024, 1025, 5000, 65536}
	adds := 0
	for round := range 3 {
		for _, n := range sizes {
			for _, op := range []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead} {
				id := uint64(round*1000 + n)
				soakOne(t, a, b, op, n, id)
			}
			// An atomic: the original values must come back 0, 1, 2, ...
			// whatever gets lost or duplicated on the way.
			syncMem(a, b)
			_, err := a.qp.PostSend(SendWR{ID: 9, Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled,
				SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + counter, RKey: b.mr.RKey(), CompareAdd: 1})
			require.NoError(t, err)
			wc := waitVirtual(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status)
			syncMem(a, b)
			require.Equal(t, uint64(adds), binary.NativeEndian.Uint64(a.buf[0:]), "fetch-add returned a replayed or re-executed value")
			adds++
		}
	}
	syncMem(a, b)
	require.Equal(t, uint64(adds), binary.NativeEndian.Uint64(b.buf[counter:]), "each atomic executed exactly once")
	st := fa.Stats()
	la, lb := a.dev.Counters().Loss, b.dev.Counters().Loss
	t.Logf("faults: send %+v recv %+v; loss a %+v b %+v", st.Send, st.Recv, la, lb)
	srWork := la.SRHolesReceived + la.ReadHoleRereads + la.SRHolesReported + lb.SRHolesReported + lb.SRHolesReceived + lb.ReadHoleRereads
	if !sr {
		// Go-back-N re-reads READ holes too (requester readahead.go), but
		// no hole report is ever sent or taken.
		require.Zero(t, la.SRHolesReceived+la.SRHolesReported+lb.SRHolesReported+lb.SRHolesReceived, "go-back-N: no hole report")
		require.Zero(t, lb.OOOPeak, "go-back-N: nothing buffered out of order")
		return
	}
	if st.Send.Dropped+st.Recv.Dropped > 20 {
		require.Positive(t, srWork, "selective repeat recovered at least one of %d losses", st.Send.Dropped+st.Recv.Dropped)
	}
}

func soakOne(t *testing.T, a, b *end, op WROpcode, n int, id uint64) {
	src, dst := a, b
	if op == WRRDMARead {
		src, dst = b, a
	}
	const off = 4096
	fill(src.buf[off:off+n], id)
	clear(dst.buf[off : off+n+16])
	syncMem(a, b)
	recv := op == WRSend || op == WRSendWithImm || op == WRRDMAWriteWithImm
	if recv {
		_, err := b.qp.PostRecv(RecvWR{ID: id, SGList: []SGE{b.mr.SGE(off, n+16)}})
		require.NoError(t, err)
	}
	_, err := a.qp.PostSend(SendWR{ID: id, Opcode: op, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(off, n)},
		RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey(), Imm: uint32(id)})
	require.NoError(t, err)
	wc := waitVirtual(t, a.cq)
	require.Equal(t, WCSuccess, wc.Status, "%v %d bytes", op, n)
	if recv {
		rwc := waitVirtual(t, b.cq)
		require.Equal(t, WCSuccess, rwc.Status)
		require.Equal(t, id, rwc.ID)
		require.Equal(t, uint32(n), rwc.ByteLen)
	}
	syncMem(a, b)
	require.True(t, bytes.Equal(src.buf[off:off+n], dst.buf[off:off+n]), "%v %d bytes: data differs", op, n)
	require.Equal(t, make([]byte, 16), dst.buf[off+n:off+n+16])
}

// TestPeerVanishesVirtual: a peer that stops answering yields RETRY_EXC_ERR within
// the retry budget (retry_cnt+1 timeouts), on virtual time, and the device
// leaves no goroutine or timer behind.
func TestPeerVanishesVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := faultyPair(t, 1, []string{"drop=RC_ACKNOWLEDGE#1-1000000"})
		_ = b
		start := time.Now()
		_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 100)},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		wc := waitVirtual(t, a.cq)
		require.Equal(t, WCRetryExcErr, wc.Status)
		// timeout 10 = 4.19 ms; 7 retries then failure: 8 timeouts.
		el := time.Since(start)
		require.GreaterOrEqual(t, el, 8*4096*(1<<10)*time.Nanosecond)
		require.Less(t, el, 20*4096*(1<<10)*time.Nanosecond)
		require.Equal(t, QPSErr, a.qp.State())
	})
}
