package responder

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// loop is a steady-state driver: one prebuilt request whose PSN is
// rewritten to the expected PSN before each Receive, then every response is
// pulled. No tracing, no per-iteration allocation in the fakes.
type loop struct {
	h    *harness
	req  []byte
	out  []byte
	sges []verbs.SGE
	wr   verbs.RecvWR
}

func newLoop(tb testing.TB, mtu int, op packet.Opcode, payload []byte, mods ...reqMod) *loop {
	return newLoopWith(tb, nil, mtu, op, payload, mods...)
}

// newLoopWith is newLoop with configuration changes.
func newLoopWith(tb testing.TB, cfg []cfgMod, mtu int, op packet.Opcode, payload []byte, mods ...reqMod) *loop {
	h := newHarness(tb, append([]cfgMod{withPMTU(mtu)}, cfg...)...)
	h.r = New(&h.cfg, Env{Mem: h.mem, RQ: h.rq, CQ: h.cq}) // no Trace
	l := &loop{h: h, req: make([]byte, 8192), out: make([]byte, mtu+64)}
	p := build(tb, l.req, op, 100, payload, mods...)
	l.req = l.req[:p.Len()]
	l.sges = []verbs.SGE{{Addr: lva, Length: 8192, LKey: lkey}}
	l.wr = verbs.RecvWR{ID: 1, SGList: l.sges}
	return l
}

// step runs one request through Receive and NextPacket and returns the
// number of response packets.
func (l *loop) step(tb testing.TB) int {
	h := l.h
	if h.rq.Len() == 0 {
		h.rq.post(l.wr)
	}
	h.cq.wcs = h.cq.wcs[:0]
	packet.BTH(l.req).SetPSN(h.r.EPSN())
	p, err := packet.Parse(l.req)
	if err != nil {
		tb.Fatal(err)
	}
	h.r.Receive(t0, p)
	n := 0
	for h.r.NextPacket(t0, l.out) > 0 {
		n++
	}
	return n
}

func TestNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      packet.Opcode
		payload []byte
		mods    []reqMod
		pkts    int
	}{
		{"send_ack", packet.RCSendOnly, pattern(64, 0), []reqMod{ackReq}, 1},
		{"write", packet.RCRDMAWriteOnly, pattern(1024, 0), []reqMod{reth(rva, rkey, 1024), ackReq}, 1},
		{"read", packet.RCRDMAReadRequest, nil, []reqMod{reth(rva, rkey, 4096)}, 4},
		{"fetch_add", packet.RCFetchAdd, nil, []reqMod{atomicETH(rva, rkey, 1, 0)}, 1},
	} {
		for _, sr := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sr=%v", tc.name, sr), func(t *testing.T) {
				var cfg []cfgMod
				if sr {
					cfg = append(cfg, withSR(0))
				}
				l := newLoopWith(t, cfg, 1024, tc.op, tc.payload, tc.mods...)
				require.Equal(t, tc.pkts, l.step(t))
				allocs := testing.AllocsPerRun(200, func() { l.step(t) })
				require.Zero(t, allocs)
				_, failed := l.h.r.Failed()
				require.False(t, failed)
			})
		}
	}
}

// TestHeldCompletionNoAllocs: a SEND that arrives behind a READ's queued
// train, its completion held until the train has gone (hold), allocates
// nothing in steady state either.
func TestHeldCompletionNoAllocs(t *testing.T) {
	l := newLoop(t, 1024, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 4096))
	h := l.h
	send := make([]byte, 2048)
	send = send[:build(t, send, packet.RCSendOnly, 100, pattern(64, 0), ackReq).Len()]
	step := func() int {
		if h.rq.Len() == 0 {
			h.rq.post(l.wr)
		}
		h.cq.wcs = h.cq.wcs[:0]
		for _, req := range [][]byte{l.req, send} {
			packet.BTH(req).SetPSN(h.r.EPSN())
			p, err := packet.Parse(req)
			if err != nil {
				t.Fatal(err)
			}
			h.r.Receive(t0, p)
		}
		if len(h.cq.wcs) != 0 {
			t.Fatal("the SEND completed before the READ's train was sent")
		}
		n := 0
		for h.r.NextPacket(t0, l.out) > 0 {
			n++
		}
		if len(h.cq.wcs) != 1 || h.cq.wcs[0].Status != verbs.WCSuccess {
			t.Fatalf("completions %v", h.cq.wcs)
		}
		return n
	}
	require.Equal(t, 5, step(), "4 READ responses, 1 ACK")
	require.Zero(t, testing.AllocsPerRun(200, func() { step() }))
}

// stepSwapped delivers two requests in swapped order, ePSN+1 then ePSN,
// from the same buffer (the responder must have copied the first), and
// pulls every response: one ACK, the hole report withdrawn (the hole
// filled before it was sent), or with pull also the hole report, pulled
// between the two.
func (l *loop) stepSwapped(tb testing.TB, pull bool) int {
	h := l.h
	e := h.r.EPSN()
	n := 0
	for _, psn := range []packet.PSN{e.Next(), e} {
		packet.BTH(l.req).SetPSN(psn)
		p, err := packet.Parse(l.req)
		if err != nil {
			tb.Fatal(err)
		}
		h.r.Receive(t0, p)
		for pull && h.r.NextPacket(t0, l.out) > 0 {
			n++
		}
	}
	for h.r.NextPacket(t0, l.out) > 0 {
		n++
	}
	if h.r.EPSN() != e.Add(2) {
		tb.Fatalf("ePSN %v, want %v", h.r.EPSN(), e.Add(2))
	}
	return n
}

// Under a steady loss rate the out-of-order path allocates nothing once
// its slots exist.
func TestSROutOfOrderNoAllocs(t *testing.T) {
	for _, pull := range []bool{false, true} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			l := newLoopWith(t, []cfgMod{withSR(0)}, 1024, packet.RCRDMAWriteOnly, pattern(1024, 0), reth(rva, rkey, 1024))
			want := 1
			if pull {
				want = 2
			}
			require.Equal(t, want, l.stepSwapped(t, pull))
			allocs := testing.AllocsPerRun(200, func() { l.stepSwapped(t, pull) })
			require.Zero(t, allocs)
			c := l.h.r.Counters()
			require.Equal(t, uint64(1), c.OOOPeak)
			if pull {
				require.Equal(t, c.SRHolesReported, c.AcksSent)
			} else {
				require.Equal(t, c.SRHolesFilled, c.AcksSent)
				require.Zero(t, c.SRHolesReported)
			}
			require.Equal(t, 1024+oooOverhead, l.h.r.ooo.allocated())
		})
	}
}

// BenchmarkWrite4KSwapped: two 4 KiB RDMA WRITE ONLY packets per op, the
// second PSN first (held, hole report sent), then the first (both execute,
// one ACK), under selective repeat.
func BenchmarkWrite4KSwapped(b *testing.B) {
	l := newLoopWith(b, []cfgMod{withSR(0)}, 4096, packet.RCRDMAWriteOnly, pattern(4096, 0), reth(rva, rkey, 4096))
	b.SetBytes(2 * 4096)
	b.ReportAllocs()
	for b.Loop() {
		l.stepSwapped(b, true)
	}
}

// BenchmarkWrite4K: one 4 KiB RDMA WRITE ONLY packet with AckReq in, one
// ACK out, per op.
func BenchmarkWrite4K(b *testing.B) {
	l := newLoop(b, 4096, packet.RCRDMAWriteOnly, pattern(4096, 0), reth(rva, rkey, 4096), ackReq)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		l.step(b)
	}
}

// BenchmarkRead64K: one 64 KiB RDMA READ request in, 16 × 4 KiB responses
// out, per op.
func BenchmarkRead64K(b *testing.B) {
	l := newLoop(b, 4096, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 64<<10))
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	for b.Loop() {
		if l.step(b) != 16 {
			b.Fatal("want 16 responses")
		}
	}
}

// BenchmarkSendAck: a 64-byte SEND ONLY with AckReq, one completion and
// one ACK per op.
func BenchmarkSendAck(b *testing.B) {
	l := newLoop(b, 4096, packet.RCSendOnly, pattern(64, 0), ackReq)
	b.ReportAllocs()
	for b.Loop() {
		l.step(b)
	}
}

// BenchmarkSRInOrder: requests in order with selective repeat off and on
// (the in-order path must not pay for it): a 4 KiB WRITE ONLY with
// AckReq, a 64-byte SEND ONLY with AckReq, a 64 KiB READ.
func BenchmarkSRInOrder(b *testing.B) {
	for _, tc := range []struct {
		name    string
		op      packet.Opcode
		payload []byte
		mods    []reqMod
		bytes   int64
	}{
		{"write4k", packet.RCRDMAWriteOnly, pattern(4096, 0), []reqMod{reth(rva, rkey, 4096), ackReq}, 4096},
		{"send64", packet.RCSendOnly, pattern(64, 0), []reqMod{ackReq}, 64},
		{"read64k", packet.RCRDMAReadRequest, nil, []reqMod{reth(rva, rkey, 64<<10)}, 64 << 10},
	} {
		for _, sr := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/sr=%v", tc.name, sr), func(b *testing.B) {
				var cfg []cfgMod
				if sr {
					cfg = append(cfg, withSR(0))
				}
				l := newLoopWith(b, cfg, 4096, tc.op, tc.payload, tc.mods...)
				b.SetBytes(tc.bytes)
				b.ReportAllocs()
				for b.Loop() {
					l.step(b)
				}
			})
		}
	}
}
