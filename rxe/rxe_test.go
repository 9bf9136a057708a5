package rxe

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// end is one side of a test connection.
type end struct {
	dev *Device
	pd  *PD
	cq  *CQ
	qp  *QP
	mr  *MR
	buf []byte
}

const testBufSize = 8<<20 + 4096

// connPair returns two netdevs joined by kind: "pipe" (netdev.NewPipeWith,
// 4096 datagrams deep) or "udp" (sockets on 127.0.0.1 and 127.0.0.2,
// ephemeral ports, blocking writes).
func connPair(t testing.TB, kind string) (netdev.Conn, netdev.Conn) {
	t.Helper()
	switch kind {
	case "pipe":
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
		return a, b
	case "udp":
		a, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), SocketOptions(Options{}))
		require.NoError(t, err)
		b, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.2:0"), SocketOptions(Options{}))
		require.NoError(t, err)
		return a, b
	}
	t.Fatalf("unknown kind %q", kind)
	return nil, nil
}

// newDevices returns two devices joined by kind: "pipe" (netdev.NewPipe)
// or "udp" (real sockets on 127.0.0.1 and 127.0.0.2, ephemeral ports).
func newDevices(t testing.TB, kind string) (*Device, *Device) {
	t.Helper()
	checkGoroutines(t)
	ca, cb := connPair(t, kind)
	return openPair(t, ca, cb)
}

// openPair opens devices rxe-a on ca and rxe-b on cb (they own them),
// closed at the end of the test.
func openPair(t testing.TB, ca, cb netdev.Conn) (*Device, *Device) {
	t.Helper()
	return openPairWith(t, ca, cb, Options{LinkMTU: 9000}, "rxe-a", "rxe-b")
}

// openPairWith opens a device named na on ca and one named nb on cb, both
// with opts and owning their netdevs (Options.OwnConn), closed at the end
// of the test.
func openPairWith(t testing.TB, ca, cb netdev.Conn, opts Options, na, nb string) (*Device, *Device) {
	t.Helper()
	opts.OwnConn = true
	oa, ob := opts, opts
	oa.Name, ob.Name = na, nb
	da, err := Open(ca, oa)
	require.NoError(t, err)
	db, err := Open(cb, ob)
	if err != nil {
		da.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		da.Close()
		db.Close()
	})
	return da, db
}

func newEnd(t testing.TB, d *Device, bufSize int) *end {
	t.Helper()
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(4096, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256}})
	require.NoError(t, err)
	buf := make([]byte, bufSize)
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	require.NoError(t, err)
	return &end{dev: d, pd: pd, cq: cq, qp: qp, mr: mr, buf: buf}
}

// connect connects a and b with path MTU mtu and the tests' Local ACK
// Timeout (testutil.QPTimeout, about 1 s a try) instead of perftest's 67
// ms: no test that connects with it is about the retry budget, and under
// -race on a loaded host one end's receive goroutine went unscheduled
// long enough (its datagrams waiting in its socket, the other end's
// timer firing) for 8 tries of 67 ms to end a loss-free transfer in
// RETRY_EXC_ERR.
func connect(t testing.TB, a, b *end, mtu MTU) {
	t.Helper()
	ia, ib := a.qp.Info(rand.Uint32()), b.qp.Info(rand.Uint32())
	o := ConnectOptions{MTU: mtu, Timeout: testutil.QPTimeout}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))
}

func newPair(t testing.TB, kind string, mtu MTU) (*end, *end) {
	da, db := newDevices(t, kind)
	a, b := newEnd(t, da, testBufSize), newEnd(t, db, testBufSize)
	connect(t, a, b, mtu)
	return a, b
}

// syncMem orders the test goroutine with both devices' goroutines: they touch
// registered memory only while holding their QP's mutex, which Query takes.
// Between the two devices the only link is the network, which the race
// detector cannot see through: a peer's RDMA WRITE lands in memory with no
// Go-visible synchronisation, exactly as on a NIC.
func syncMem(a, b *end) {
	a.qp.Query()
	b.qp.Query()
}

// waitWC waits for one completion on cq, for at most testutil.Bound (the
// wait only stops a hung test). If none comes, the failure shows what the
// ends given report (pairState), so that a stall says whether the
// transport was losing, backing off or waiting.
func waitWC(t testing.TB, cq *CQ, ends ...*end) WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer cancel()
	wc := make([]WC, 1)
	if _, err := cq.Wait(ctx, wc); err != nil {
		require.NoError(t, err, "waiting for a completion%s", pairState(ends...))
	}
	return wc[0]
}

// pairState formats the QP and device counters of ends for a failure
// message.
func pairState(ends ...*end) string {
	var b strings.Builder
	for _, e := range ends {
		fmt.Fprintf(&b, "\n%s QP %d: %+v\n%s: %+v", e.dev.Name(), e.qp.QPN(), e.qp.Counters(), e.dev.Name(), e.dev.Counters())
	}
	return b.String()
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// TestOperations moves every operation and size across the pipe and
// loopback UDP, with byte-exact verification.
func TestOperations(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		for _, mtu := range []MTU{MTU1024, MTU4096} {
			t.Run(fmt.Sprintf("%s/mtu%d", kind, mtu.Bytes()), func(t *testing.T) {
				a, b := newPair(t, kind, mtu)
				m := mtu.Bytes()
				sizes := []int{0, 1, m - 1, m, m + 1, 1 << 20, 8 << 20}
				if testing.Short() {
					sizes = sizes[:5]
				}
				seed := uint64(0)
				for _, op := range []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead} {
					for _, n := range sizes {
						seed++
						// A failed transfer leaves the pair broken (a QP in
						// ERR, a responder maybe still writing the buffer
						// the next one fills): the rest is not run.
						if !t.Run(fmt.Sprintf("%v/%d", op, n), func(t *testing.T) {
							transfer(t, a, b, op, n, seed)
						}) {
							return
						}
					}
				}
				t.Run("atomics", func(t *testing.T) { atomics(t, a, b) })
			})
		}
	}
}

// transfer runs one operation of n bytes from a to b and checks data and
// completions on both sides.
func transfer(t *testing.T, a, b *end, op WROpcode, n int, seed uint64) {
	src, dst := a, b
	if op == WRRDMARead {
		src, dst = b, a
	}
	const off = 64 // not at the start of the region
	fill(src.buf[off:off+n], seed)
	clear(dst.buf[off : off+n+64])
	syncMem(a, b)
	imm := uint32(seed) * 0x01010101
	recvs := op == WRSend || op == WRSendWithImm || op == WRRDMAWriteWithImm
	if recvs {
		_, err := b.qp.PostRecv(RecvWR{ID: 1000 + seed, SGList: []SGE{b.mr.SGE(off, n+64)}})
		require.NoError(t, err)
	}
	wr := SendWR{ID: seed, Opcode: op, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(off, n)}, Imm: imm,
		RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey()}
	_, err := a.qp.PostSend(wr)
	require.NoError(t, err)

	wc := waitWC(t, a.cq, a, b)
	require.Equal(t, WCSuccess, wc.Status, "sender: %v%s", wc.Status, pairState(a, b))
	require.Equal(t, seed, wc.ID)
	require.Equal(t, verbsWCOpcode(op), wc.Opcode)
	require.Equal(t, a.qp.QPN(), wc.QPNum)
	if recvs {
		rwc := waitWC(t, b.cq, a, b)
		require.Equal(t, WCSuccess, rwc.Status, "receiver: %v%s", rwc.Status, pairState(a, b))
		require.Equal(t, 1000+seed, rwc.ID)
		require.Equal(t, uint32(n), rwc.ByteLen)
		require.Equal(t, b.qp.QPN(), rwc.QPNum)
		if op == WRRDMAWriteWithImm {
			require.Equal(t, WCRecvRDMAWithImm, rwc.Opcode)
		} else {
			require.Equal(t, WCRecv, rwc.Opcode)
		}
		if op != WRSend {
			require.NotZero(t, rwc.Flags&WCFlagWithImm)
			require.Equal(t, imm, rwc.Imm)
		}
	}
	syncMem(a, b)
	if !bytes.Equal(src.buf[off:off+n], dst.buf[off:off+n]) {
		i := 0
		for i < n && src.buf[off+i] == dst.buf[off+i] {
			i++
		}
		t.Fatalf("data differs at byte %d of %d", i, n)
	}
	require.Equal(t, make([]byte, 64), dst.buf[off+n:off+n+64], "nothing written past the message")
}

func verbsWCOpcode(op WROpcode) WCOpcode {
	switch op {
	case WRSend, WRSendWithImm, WRSendWithInv:
		return WCSend
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	}
	return WCFetchAdd
}

func atomics(t *testing.T, a, b *end) {
	const at, res = 4096, 8192 // remote word, local result
	binary.NativeEndian.PutUint64(b.buf[at:], 100)
	syncMem(a, b)
	post := func(op WROpcode, cmp, swap uint64) uint64 {
		syncMem(a, b)
		_, err := a.qp.PostSend(SendWR{ID: 7, Opcode: op, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(res, 8)},
			RemoteAddr: b.mr.Addr() + at, RKey: b.mr.RKey(), CompareAdd: cmp, Swap: swap})
		require.NoError(t, err)
		wc := waitWC(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status)
		require.Equal(t, verbsWCOpcode(op), wc.Opcode)
		syncMem(a, b)
		return binary.NativeEndian.Uint64(a.buf[res:])
	}
	require.Equal(t, uint64(100), post(WRAtomicFetchAndAdd, 5, 0))
	require.Equal(t, uint64(105), binary.NativeEndian.Uint64(b.buf[at:]))
	require.Equal(t, uint64(105), post(WRAtomicCmpAndSwp, 105, 7))
	require.Equal(t, uint64(7), binary.NativeEndian.Uint64(b.buf[at:]))
	require.Equal(t, uint64(7), post(WRAtomicCmpAndSwp, 99, 1), "compare fails: no swap")
	require.Equal(t, uint64(7), binary.NativeEndian.Uint64(b.buf[at:]))
}
