package requester

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/responder"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// engineResponder is the responder engine as the far end of an srLink: the
// two engines of a gorxe QP pair with selective repeat negotiated, without
// rxe in between. Its memory is the fake memory (R_Keys and L_Keys alike),
// its receive queue an endless supply of WQEs of size bytes each.
type engineResponder struct {
	h    *harness
	r    *responder.Responder
	mem  fakeMem
	rq   *endlessRQ
	cq   *fakeCQ
	buf  []byte
	size uint32
}

// endlessRQ hands out receive WQEs, the i-th one at recvBase + i × size.
type endlessRQ struct {
	next uint64
	size uint32
	wr   verbs.RecvWR
	sge  [1]verbs.SGE
}

const (
	recvKey  = 0x300
	recvBase = 0x4000000
)

func (q *endlessRQ) Peek() (*verbs.RecvWR, bool) {
	q.sge[0] = verbs.SGE{Addr: recvBase + q.next*uint64(q.size), Length: q.size, LKey: recvKey}
	q.wr = verbs.RecvWR{ID: q.next, SGList: q.sge[:]}
	return &q.wr, true
}
func (q *endlessRQ) Pop()     { q.next++ }
func (q *endlessRQ) Len() int { return 1 << 20 }

// engineMem adapts fakeMem to responder.Memory.
type engineMem struct{ fakeMem }

func (m engineMem) Remote(rkey uint32, va uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	return m.Local(rkey, va, length, need)
}
func (m engineMem) RemoteRegion(rkey uint32, need verbs.AccessFlags) bool {
	rg := m.fakeMem[rkey]
	return rg != nil && need&^rg.access == 0
}
func (m engineMem) Invalidate(uint32) bool { return false }

func newEngineResponder(h *harness, pmtu int, epsn packet.PSN, size uint32, n int) *engineResponder {
	e := &engineResponder{h: h, mem: fakeMem{}, rq: &endlessRQ{size: size}, cq: &fakeCQ{}, buf: make([]byte, pmtu+maxHeaders), size: size}
	e.mem.add(recvKey, recvBase, int(size)*n, verbs.AccessLocalWrite, 0)
	e.r = responder.New(&responder.Config{
		QPN: peerQPN, DestQPN: testQPN, PMTU: pmtu, RQPSN: epsn, MaxDestRdAtomic: 16,
		Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
		PKey:   testPKey, Pseudo: respPseudo, SelectiveRepeat: true,
	}, responder.Env{Mem: engineMem{e.mem}, RQ: e.rq, CQ: e.cq})
	return e
}

func (e *engineResponder) handle(b []byte) {
	p, err := packet.Parse(b)
	require.NoError(e.h.t, err)
	e.r.Receive(e.h.now, p)
}

func (e *engineResponder) pending() bool { return e.r.Pending() }

func (e *engineResponder) next() []byte {
	n := e.r.NextPacket(e.h.now, e.buf)
	if n == 0 {
		return nil
	}
	return append([]byte(nil), e.buf[:n]...)
}

// TestSREngines runs the requester against the responder engine, both with
// selective repeat, over a timed link losing packets at random both ways:
// 64 KiB WRITEs, SENDs and READs complete byte-exact, in order, with no
// go-back-N, no IB timeout at up to 2% loss, and data packets sent again
// within twice the packets lost.
func TestSREngines(t *testing.T) {
	const pmtu, size, n = 1024, 64 << 10, 24
	for _, tc := range []struct {
		op   verbs.WROpcode
		loss float64
		seed uint64
	}{
		{verbs.WRRDMAWrite, 0.01, 1}, {verbs.WRRDMAWrite, 0.05, 2},
		{verbs.WRSend, 0.01, 3}, {verbs.WRSend, 0.05, 4},
		{verbs.WRRDMARead, 0.01, 5}, {verbs.WRRDMARead, 0.02, 6}, {verbs.WRRDMARead, 0.05, 7},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.op, tc.loss), func(t *testing.T) {
			cfg := baseConfig(pmtu, 0x10)
			cfg.SelectiveRepeat = true
			cfg.MaxWR = n
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, n*size, verbs.AccessLocalWrite, 1)
			e := newEngineResponder(h, pmtu, 0x10, size, n)
			remote := e.mem.add(rkey, rbase, n*size, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 7)
			src := append([]byte(nil), remote.buf...)
			l := newSRLink(h, e)
			lost, took := l.lossyBatch(t, tc.op, n, size, tc.loss, rand.New(rand.NewPCG(tc.seed, 17)))
			_, rfailed := e.r.Failed()
			require.False(t, rfailed, "responder failed")
			switch tc.op {
			case verbs.WRRDMARead:
				require.True(t, bytes.Equal(src, h.mem[lkeyA].buf), "READ data")
			case verbs.WRSend:
				require.Len(t, e.cq.wcs, n)
				require.True(t, bytes.Equal(h.mem[lkeyA].buf, e.mem[recvKey].buf), "SEND data")
			default:
				require.True(t, bytes.Equal(h.mem[lkeyA].buf, remote.buf), "WRITE data")
			}
			c, rc := h.r.Counters(), e.r.Counters()
			data := n * size / pmtu
			extra := len(l.sent) - data
			if tc.op == verbs.WRRDMARead {
				extra = l.respSent() - data
			}
			t.Logf("%v virtual; %d lost, %d data packets sent again (%.2f per lost); requester: holes %d, resent %d, "+
				"re-reads %d, probes %d, ib timeouts %d; responder: holes %d, hole PSNs %d, ooo peak %d, dropped %d",
				took, lost, extra, float64(extra)/float64(max(lost, 1)), c.SRHolesReceived, c.SRPacketsResent,
				c.ReadHoleRereads, c.Recovery.TailProbes, c.Timeouts, rc.SRHolesReported, rc.SRHolePSNs, rc.OOOPeak, rc.OOODropped)
			require.Zero(t, c.CompleterRetryErr, "go-back-N")
			if tc.loss <= 0.02 {
				require.Zero(t, c.Timeouts, "IB timeouts")
			}
			require.LessOrEqual(t, extra, 2*lost+int(c.Recovery.TailProbes), "data packets sent again")
		})
	}
}
