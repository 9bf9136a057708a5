package rxe

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// remoteMRs are the responder's regions of the remote error tests: one per
// combination of rights, each filled with a pattern that must survive.
type remoteMRs struct {
	full, ro, wo, noAtomic, odd *MR
}

const remoteLen = 4096

func regRemoteMRs(t *testing.T, b *end) remoteMRs {
	t.Helper()
	reg := func(buf []byte, attr MRAttr) *MR {
		mr, err := b.pd.RegMRWith(buf, attr)
		require.NoError(t, err)
		fill(buf, uint64(len(buf))^uint64(attr.Access))
		return mr
	}
	all := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	// odd's first byte is not 8-byte aligned in host memory while its IOVA
	// is: an atomic there is misaligned for the responder (rxe
	// ERR_MISALIGNED_ATOMIC) though the requester sees an aligned VA.
	oddBuf := make([]byte, remoteLen+1)[1:]
	iova := uint64(0x10000)
	return remoteMRs{
		full:     reg(make([]byte, remoteLen), MRAttr{Access: all}),
		ro:       reg(make([]byte, remoteLen), MRAttr{Access: AccessLocalWrite | AccessRemoteRead}),
		wo:       reg(make([]byte, remoteLen), MRAttr{Access: AccessLocalWrite | AccessRemoteWrite}),
		noAtomic: reg(make([]byte, remoteLen), MRAttr{Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite}),
		odd:      reg(oddBuf, MRAttr{Access: all, IOVA: &iova}),
	}
}

func (m remoteMRs) snapshot() [][]byte {
	var out [][]byte
	for _, mr := range []*MR{m.full, m.ro, m.wo, m.noAtomic, m.odd} {
		out = append(out, bytes.Clone(mr.Bytes()))
	}
	return out
}

// remoteCase is one request the responder must reject.
type remoteCase struct {
	name string
	// respAccess, if set, are the responder QP's access flags.
	respAccess AccessFlags
	wr         func(a *end, m remoteMRs) SendWR
	// sendLen is the size of a SEND's data (the receive buffers hold 64).
	want      WCStatus       // the requester's completion of the request
	event     AsyncEventType // raised on the responder QP
	firstRecv WCStatus       // the responder's first receive completion
}

func write(off, n int, rkey func(m remoteMRs) (uint64, uint32)) func(a *end, m remoteMRs) SendWR {
	return func(a *end, m remoteMRs) SendWR {
		va, rk := rkey(m)
		return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(off, n)}, RemoteAddr: va, RKey: rk}
	}
}

func read(n int, rkey func(m remoteMRs) (uint64, uint32)) func(a *end, m remoteMRs) SendWR {
	return func(a *end, m remoteMRs) SendWR {
		va, rk := rkey(m)
		return SendWR{Opcode: WRRDMARead, SGList: []SGE{a.mr.SGE(0, n)}, RemoteAddr: va, RKey: rk}
	}
}

func fadd(rkey func(m remoteMRs) (uint64, uint32)) func(a *end, m remoteMRs) SendWR {
	return func(a *end, m remoteMRs) SendWR {
		va, rk := rkey(m)
		return SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.mr.SGE(8192, 8)}, RemoteAddr: va, RKey: rk, CompareAdd: 1}
	}
}

func at(mr func(m remoteMRs) *MR, off int64) func(m remoteMRs) (uint64, uint32) {
	return func(m remoteMRs) (uint64, uint32) {
		r := mr(m)
		return uint64(int64(r.Addr()) + off), r.RKey()
	}
}

func full(m remoteMRs) *MR     { return m.full }
func ro(m remoteMRs) *MR       { return m.ro }
func wo(m remoteMRs) *MR       { return m.wo }
func noAtomic(m remoteMRs) *MR { return m.noAtomic }
func odd(m remoteMRs) *MR      { return m.odd }

// badKey is the full region's rkey with another key byte (same index).
func badKey(m remoteMRs) (uint64, uint32) { return m.full.Addr(), m.full.RKey() ^ 0x5A }

// noIndex is an rkey whose index names no region.
func noIndex(m remoteMRs) (uint64, uint32) { return m.full.Addr(), 0xFFFF00 | m.full.RKey()&0xFF }

var remoteCases = []remoteCase{
	{name: "write/bad-rkey", wr: write(0, 16, badKey), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/unknown-index", wr: write(0, 16, noIndex), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "read/bad-rkey", wr: read(16, badKey), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "atomic/bad-rkey", wr: fadd(badKey), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/before-mr", wr: write(0, 16, at(full, -8)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/after-mr", wr: write(0, 16, at(full, remoteLen)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/straddles-end", wr: write(0, 16, at(full, remoteLen-8)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/multi-packet-straddles-end", wr: write(0, 3000, at(full, remoteLen-2999)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "read/before-mr", wr: read(16, at(full, -16)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "read/straddles-end", wr: read(3000, at(full, remoteLen-2999)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "atomic/after-mr", wr: fadd(at(full, remoteLen)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "write/mr-remote-read-only", wr: write(0, 16, at(ro, 0)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "read/mr-remote-write-only", wr: read(16, at(wo, 0)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "atomic/mr-without-remote-atomic", wr: fadd(at(noAtomic, 0)), want: WCRemAccessErr, event: EventQPAccessErr},
	{name: "atomic/misaligned-host-address", wr: fadd(at(odd, 8)), want: WCRemInvReqErr, event: EventQPReqErr},
	// The responder QP's access flags forbid the operation: rxe answers
	// Invalid Request (check_op_valid), not Remote Access.
	{name: "write/qp-without-remote-write", respAccess: AccessLocalWrite | AccessRemoteRead | AccessRemoteAtomic,
		wr: write(0, 16, at(full, 0)), want: WCRemInvReqErr, event: EventQPReqErr},
	{name: "read/qp-without-remote-read", respAccess: AccessLocalWrite | AccessRemoteWrite | AccessRemoteAtomic,
		wr: read(16, at(full, 0)), want: WCRemInvReqErr, event: EventQPReqErr},
	{name: "atomic/qp-without-remote-atomic", respAccess: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead,
		wr: fadd(at(full, 0)), want: WCRemInvReqErr, event: EventQPReqErr},
	// A WRITE WITH IMMEDIATE takes its receive WQE before the R_Key check
	// (rxe check_resource, then check_rkey): that WQE completes with the
	// error, the others flush.
	{name: "write-imm/bad-rkey", wr: func(a *end, m remoteMRs) SendWR {
		wr := write(0, 16, badKey)(a, m)
		wr.Opcode, wr.Imm = WRRDMAWriteWithImm, 0x1234
		return wr
	}, want: WCRemAccessErr, event: EventQPAccessErr, firstRecv: WCRemAccessErr},
	// A SEND larger than the receive buffer: Invalid Request NAK, and the
	// receive completes with LOC_LEN_ERR (ibv_poll_cq(3); rxe reports
	// REM_INV_REQ_ERR there).
	{name: "send/larger-than-receive-buffer", wr: func(a *end, m remoteMRs) SendWR {
		return SendWR{Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 65)}}
	}, want: WCRemInvReqErr, event: EventQPReqErr, firstRecv: WCLocLenErr},
	{name: "send/multi-packet-larger-than-receive-buffer", wr: func(a *end, m remoteMRs) SendWR {
		return SendWR{Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 2500)}}
	}, want: WCRemInvReqErr, event: EventQPReqErr, firstRecv: WCLocLenErr},
}

// TestRemoteErrors posts requests the responder must reject and checks
// both sides (IBA 9.7.5.2, rxe class C errors, protocol.md §3.4): the
// request completes with the NAK's status and the requester QP enters ERR,
// flushing the WRs behind it in order; the responder QP enters ERR, raises
// its affiliated event and flushes its receives; no memory is touched.
func TestRemoteErrors(t *testing.T) {
	udp := map[string]bool{"write/bad-rkey": true, "read/straddles-end": true, "atomic/qp-without-remote-atomic": true,
		"send/larger-than-receive-buffer": true}
	for _, kind := range []string{"pipe", "udp"} {
		for _, c := range remoteCases {
			if kind == "udp" && !udp[c.name] {
				continue
			}
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				remoteErrorCase(t, kind, c)
			})
		}
	}
}

func remoteErrorCase(t *testing.T, kind string, c remoteCase) {
	a, b := smallPair(t, kind, qpOpts{}, qpOpts{access: c.respAccess})
	m := regRemoteMRs(t, b)
	fill(a.buf, 77)
	aBefore, bBefore := bytes.Clone(a.buf), m.snapshot()
	bOwn := bytes.Clone(b.buf)
	syncMem(a, b)

	_, err := b.qp.PostRecv(RecvWR{ID: 901, SGList: []SGE{b.mr.SGE(0, 64)}},
		RecvWR{ID: 902, SGList: []SGE{b.mr.SGE(64, 64)}})
	require.NoError(t, err)

	bad := c.wr(a, m)
	bad.ID, bad.Flags = 1, bad.Flags|SendSignaled
	good := SendWR{ID: 2, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: m.full.Addr(), RKey: m.full.RKey()}
	send := SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}}
	_, err = a.qp.PostSend(bad, good, send)
	require.NoError(t, err)

	// Requester: the request fails with the NAK's status, the WRs behind
	// it flush in order, signaled or not (IBA 10.7.3.1).
	wcs := waitWCs(t, a.cq, 3)
	op := verbsWCOpcode(bad.Opcode)
	require.Equal(t, []wcBrief{{1, c.want, op}, {2, WCWRFlushErr, WCRDMAWrite}, {3, WCWRFlushErr, WCSend}}, briefs(wcs))
	for _, wc := range wcs {
		require.Equal(t, a.qp.QPN(), wc.QPNum)
	}
	require.Equal(t, QPSErr, a.qp.State())

	// Responder: ERR, its affiliated event, receives complete.
	waitState(t, b.qp, QPSErr)
	ev, others := waitEvent(t, b.dev, c.event)
	require.Same(t, b.qp, ev.QP)
	require.Empty(t, others)
	first := c.firstRecv
	if first == 0 {
		first = WCWRFlushErr
	}
	rwcs := waitWCs(t, b.cq, 2)
	require.Equal(t, uint64(901), rwcs[0].ID)
	require.Equal(t, first, rwcs[0].Status, "first receive")
	require.Equal(t, uint64(902), rwcs[1].ID)
	require.Equal(t, WCWRFlushErr, rwcs[1].Status, "second receive")
	require.Equal(t, b.qp.QPN(), rwcs[1].QPNum)

	// Later work flushes on both sides.
	_, err = a.qp.PostSend(SendWR{ID: 4, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{4, WCWRFlushErr, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	_, err = b.qp.PostRecv(RecvWR{ID: 903, SGList: []SGE{b.mr.SGE(0, 64)}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{903, WCWRFlushErr, WCRecv}}, briefs(waitWCs(t, b.cq, 1)))

	// The requester side raised nothing: its error is in its completion.
	require.Empty(t, drainEvents(a.dev, 10*time.Millisecond))
	require.Empty(t, drainEvents(b.dev, 0))
	noWC(t, a.cq, 10*time.Millisecond)
	noWC(t, b.cq, 0)

	// Nothing was written anywhere: not the rejected request, not the
	// WRITE behind it, not a READ's destination.
	syncMem(a, b)
	require.True(t, bytes.Equal(aBefore, a.buf), "requester memory changed")
	require.True(t, bytes.Equal(bOwn, b.buf), "responder receive memory changed")
	for i, s := range m.snapshot() {
		require.True(t, bytes.Equal(bBefore[i], s), "responder region %d changed", i)
	}
	require.Equal(t, uint64(1), a.dev.Counters().QPErrors)
	require.Equal(t, uint64(1), b.dev.Counters().QPErrors)
}

// TestPostSendRejectsBadWR checks the post-time checks of ibv_post_send
// (rxe validate_send_wr): they fail the call, not the QP.
func TestPostSendRejectsBadWR(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	cases := []struct {
		name string
		wr   SendWR
	}{
		{"misaligned-atomic", SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr() + 4, RKey: b.mr.RKey()}},
		{"atomic-not-8-bytes", SendWR{Opcode: WRAtomicCmpAndSwp, SGList: []SGE{a.mr.SGE(0, 4)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}},
		{"too-many-sges", SendWR{Opcode: WRSend, SGList: make([]SGE, 5)}},
		{"inline-too-long", SendWR{Opcode: WRSend, Flags: SendInline, InlineData: make([]byte, 65)}},
		{"inline-read", SendWR{Opcode: WRRDMARead, Flags: SendInline, InlineData: make([]byte, 8)}},
		{"unsupported-opcode", SendWR{Opcode: 42}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok := SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 1)}}
			n, err := a.qp.PostSend(ok, c.wr)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Equal(t, 1, n, "the WR before the bad one is posted")
			require.Equal(t, QPSRTS, a.qp.State())
		})
	}
	// The QP still works: the 6 good SENDs (unsignaled) need receives.
	for i := range 7 {
		_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(0, 64)}})
		require.NoError(t, err)
	}
	_, err := a.qp.PostSend(SendWR{ID: 99, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{99, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	require.Len(t, waitWCs(t, b.cq, 7), 7)
}

// TestPostRecvRejectsBadWR checks the post-time checks of ibv_post_recv
// and ibv_post_srq_recv (rxe_post_one_recv): more SGEs than the queue
// takes, or SGEs whose lengths add up to more than the largest message
// (2^31 bytes, DeviceAttr.MaxMsgSize), fail the call with
// ErrInvalidArgument at the refused WR, for a QP's receive queue and an
// SRQ alike.
func TestPostRecvRejectsBadWR(t *testing.T) {
	a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	srq, err := a.pd.CreateSRQ(SRQAttr{MaxWR: 8, MaxSGE: 4})
	require.NoError(t, err)
	half := SGE{Addr: a.mr.Addr(), Length: 1 << 30, LKey: a.mr.LKey()}
	cases := []struct {
		name string
		wr   RecvWR
	}{
		{"too-many-sges", RecvWR{SGList: make([]SGE, 5)}},
		{"longer-than-2^31", RecvWR{SGList: []SGE{half, half, {Addr: a.mr.Addr(), Length: 1, LKey: a.mr.LKey()}}}},
		{"sum-wraps-32-bits", RecvWR{SGList: []SGE{{Length: 0xFFFFFFFF}, {Length: 0xFFFFFFFF}, {Length: 2}}}},
	}
	post := map[string]func(...RecvWR) (int, error){"qp": a.qp.PostRecv, "srq": srq.PostRecv}
	for _, c := range cases {
		for where, f := range post {
			t.Run(c.name+"/"+where, func(t *testing.T) {
				ok := RecvWR{ID: 1, SGList: []SGE{a.mr.SGE(0, 64)}}
				n, err := f(ok, c.wr)
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.Equal(t, 1, n, "the WR before the bad one is posted")
			})
		}
	}
	n, err := srq.PostRecv(RecvWR{SGList: []SGE{half, half}})
	require.NoError(t, err, "exactly 2^31 bytes is the largest message")
	require.Equal(t, 1, n)
}

// localMRs are requester regions an SGE must not use.
type localMRs struct {
	ro      *MR // no local write
	otherPD *MR // of another PD
}

// TestLocalErrors checks the requester's own SGEs (rxe copy_data/
// lookup_mr failures: LOC_PROT_ERR) and a responder receive WQE with a bad
// SGE (rxe class A, malformed WQE: LOC_QP_OP_ERR there, REM_OP_ERR here).
// It is a table test; the table is most of its length.
func TestLocalErrors(t *testing.T) {
	type local struct {
		name string
		wr   func(a, b *end, x localMRs) SendWR
		// atResponse: the error is found when the response arrives (rxe
		// completer copy_data), so the responder has executed the request
		// and the SEND behind it.
		atResponse bool
	}
	cases := []local{
		{"send/bad-lkey", func(a, b *end, _ localMRs) SendWR {
			return SendWR{Opcode: WRSend, SGList: []SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey() ^ 0x33}}}
		}, false},
		{"write/sge-outside-mr", func(a, b *end, _ localMRs) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(smallBuf-4, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, false},
		{"write/second-sge-bad", func(a, b *end, _ localMRs) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8), {Addr: 1, Length: 8, LKey: 0}},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, false},
		{"read/destination-without-local-write", func(a, b *end, x localMRs) SendWR {
			return SendWR{Opcode: WRRDMARead, SGList: []SGE{x.ro.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, true},
		{"atomic/result-without-local-write", func(a, b *end, x localMRs) SendWR {
			return SendWR{Opcode: WRAtomicFetchAndAdd, SGList: []SGE{x.ro.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, true},
		{"read/sge-of-another-pd", func(a, b *end, x localMRs) SendWR {
			return SendWR{Opcode: WRRDMARead, SGList: []SGE{x.otherPD.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
			roBuf := make([]byte, 64)
			ro, err := a.pd.RegMR(roBuf, AccessRemoteRead)
			require.NoError(t, err)
			pd2, err := a.dev.AllocPD()
			require.NoError(t, err)
			otherBuf := make([]byte, 64)
			other, err := pd2.RegMR(otherBuf, AccessLocalWrite)
			require.NoError(t, err)
			fill(b.buf, 5)
			bBefore := bytes.Clone(b.buf)
			syncMem(a, b)
			_, err = b.qp.PostRecv(RecvWR{ID: 901, SGList: []SGE{b.mr.SGE(0, 64)}})
			require.NoError(t, err)
			wr := c.wr(a, b, localMRs{ro: ro, otherPD: other})
			wr.ID = 1
			_, err = a.qp.PostSend(wr, SendWR{ID: 2, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCLocProtErr, verbsWCOpcode(wr.Opcode)}, {2, WCWRFlushErr, WCSend}},
				briefs(waitWCs(t, a.cq, 2)))
			require.Equal(t, QPSErr, a.qp.State())
			// The responder is still up; a request that never left did
			// not touch it.
			syncMem(a, b)
			require.Equal(t, QPSRTS, b.qp.State())
			if c.atResponse {
				require.Equal(t, []wcBrief{{901, WCSuccess, WCRecv}}, briefs(waitWCs(t, b.cq, 1)))
			} else {
				require.True(t, bytes.Equal(bBefore, b.buf))
				noWC(t, b.cq, 20*time.Millisecond)
			}
			require.Equal(t, make([]byte, 64), roBuf)
			require.Equal(t, make([]byte, 64), otherBuf)
			require.Empty(t, drainEvents(a.dev, 0))
		})
	}

	t.Run("responder/recv-bad-lkey", func(t *testing.T) {
		a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
		_, err := b.qp.PostRecv(RecvWR{ID: 901, SGList: []SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey() ^ 0x11}}},
			RecvWR{ID: 902, SGList: []SGE{b.mr.SGE(0, 64)}})
		require.NoError(t, err)
		_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}},
			SendWR{ID: 2, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{1, WCRemOpErr, WCSend}, {2, WCWRFlushErr, WCSend}}, briefs(waitWCs(t, a.cq, 2)))
		rw := waitWCs(t, b.cq, 2)
		require.Equal(t, []wcBrief{{901, WCLocQPOpErr, WCRecv}, {902, WCWRFlushErr, WCRecv}}, briefs(rw))
		waitState(t, b.qp, QPSErr)
		ev, others := waitEvent(t, b.dev, EventQPFatal)
		require.Same(t, b.qp, ev.QP)
		require.Empty(t, others)
		require.Empty(t, drainEvents(a.dev, 10*time.Millisecond))
	})

	t.Run("responder/recv-sge-without-local-write", func(t *testing.T) {
		a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
		roBuf := make([]byte, 64)
		ro, err := b.pd.RegMR(roBuf, AccessRemoteRead)
		require.NoError(t, err)
		_, err = b.qp.PostRecv(RecvWR{ID: 901, SGList: []SGE{ro.SGE(0, 64)}})
		require.NoError(t, err)
		_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		require.Equal(t, []wcBrief{{1, WCRemOpErr, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
		require.Equal(t, []wcBrief{{901, WCLocQPOpErr, WCRecv}}, briefs(waitWCs(t, b.cq, 1)))
		syncMem(a, b)
		require.Equal(t, make([]byte, 64), roBuf)
	})
}

// TestBadVerbsArguments: verbs calls with nil or stale arguments return
// ErrInvalidArgument or ErrClosed and leave the objects usable; before,
// a nil address handle in PostSend and nil attributes in QP.Modify
// panicked with the QP's lock held, and CreateQP took a destroyed CQ.
func TestBadVerbsArguments(t *testing.T) {
	a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	n, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 1)}, AH: (*AddrHandle)(nil)})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "nil address handle")
	require.Zero(t, n)
	require.ErrorIs(t, a.qp.Modify(nil, QPAttrState), ErrInvalidArgument)
	require.Equal(t, QPSRTS, a.qp.State(), "the QP's lock is free")

	srq, err := a.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	require.ErrorIs(t, srq.Modify(nil, SRQAttrLimit), ErrInvalidArgument)
	require.NoError(t, srq.Destroy())
	_, err = a.pd.CreateAHFromWC(nil, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)

	cq, err := a.dev.CreateCQ(8, 0)
	require.NoError(t, err)
	require.NoError(t, cq.Destroy())
	_, err = a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: a.cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	require.ErrorIs(t, err, ErrClosed)
	_, err = a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: a.cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	require.ErrorIs(t, err, ErrClosed)
	// The refused CreateQPs let go of a.cq: only a.qp holds it, as its
	// send and receive CQ.
	err = a.cq.Destroy()
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "the send or receive CQ of QPs still there (2 uses: a QP's send and receive queues count one each)")
}

// TestDeviceLimits: DeviceAttr's MaxPD, MaxCQ and MaxSRQ are enforced
// (ErrNoResources), and a destroyed object frees its place.
func TestDeviceLimits(t *testing.T) {
	a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	d := a.dev
	d.attr.MaxCQ, d.attr.MaxPD, d.attr.MaxSRQ = int(d.nCQ.Load())+1, int(d.nPD.Load())+1, int(d.nSRQ.Load())+1
	cq, err := d.CreateCQ(4, 0)
	require.NoError(t, err)
	_, err = d.CreateCQ(4, 0)
	require.ErrorIs(t, err, ErrNoResources)
	require.NoError(t, cq.Destroy())
	cq, err = d.CreateCQ(4, 0)
	require.NoError(t, err, "a destroyed CQ frees its place")
	require.NoError(t, cq.Destroy())

	pd, err := d.AllocPD()
	require.NoError(t, err)
	_, err = d.AllocPD()
	require.ErrorIs(t, err, ErrNoResources)
	srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	_, err = pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.ErrorIs(t, err, ErrNoResources)
	require.NoError(t, srq.Destroy())
	require.NoError(t, pd.Dealloc())
	pd, err = d.AllocPD()
	require.NoError(t, err, "a deallocated PD frees its place")
	require.NoError(t, pd.Dealloc())
	require.Equal(t, maxMRs-1, d.Attr().MaxMR, "MR index 0 is never used")
}

// TestRefusedCreateFreesPD: creations refused after the PD was taken
// (a destroyed CQ, the SRQ limit) give the PD back, so it deallocates.
// The PD is taken under its lock (PD.use) and Dealloc checks its users
// under the same lock, so a creation racing Dealloc either fails with
// ErrClosed or makes Dealloc fail with ErrInUse.
func TestRefusedCreateFreesPD(t *testing.T) {
	a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	d := a.dev
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(4, 0)
	require.NoError(t, err)
	require.NoError(t, cq.Destroy())
	for _, qa := range []QPInitAttr{{SendCQ: cq, RecvCQ: a.cq}, {SendCQ: a.cq, RecvCQ: cq}} {
		qa.Type, qa.Cap = QPTypeRC, QPCap{MaxSendWR: 4, MaxRecvWR: 4}
		_, err = pd.CreateQP(qa)
		require.ErrorIs(t, err, ErrClosed)
	}
	d.attr.MaxSRQ = int(d.nSRQ.Load())
	_, err = pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.ErrorIs(t, err, ErrNoResources)
	require.NoError(t, pd.Dealloc(), "a refused creation kept a reference to the PD")
	_, err = pd.RegMR(make([]byte, 64), AccessLocalWrite)
	require.ErrorIs(t, err, ErrClosed)
	_, err = pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.ErrorIs(t, err, ErrClosed)
}
