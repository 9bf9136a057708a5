package rxe

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// This file is the harness of the error-path, state-machine, MR, CQ, SRQ
// and counter tests: small QPs with explicit attributes (any timeout,
// retry count or access a test names), event and completion
// helpers that fail fast.

// pipeDevices returns two devices on an in-memory pipe and the pipe's ends,
// so that a test can inject raw datagrams (PipeConn.WriteBatch is safe
// beside the device's own writer).
func pipeDevices(t testing.TB) (*Device, *Device, *netdev.PipeConn, *netdev.PipeConn) {
	t.Helper()
	checkGoroutines(t)
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	da, db := openPair(t, ca, cb)
	return da, db, ca, cb
}

// qpOpts are the attributes of one side of a test connection.
type qpOpts struct {
	access      AccessFlags // QP access flags; default all remote rights
	timeout     uint8       // default 14 (67 ms): ample for a loaded machine
	retryCnt    uint8       // default 3
	rnrRetry    uint8       // default 7 (infinite)
	noRNRRetry  bool        // rnr_retry 0
	minRNRTimer uint8       // default 1 (10 µs)
	mtu         MTU         // default 1024
	cqe         int         // default 256
	sendWR      int         // default 32
	recvWR      int         // default 32
	srq         *SRQ
	cq          *CQ    // shared CQ (default: a new one)
	typ         QPType // smallEnd's QP type (default RC)
}

func (o qpOpts) withDefaults() qpOpts {
	if o.access == 0 {
		o.access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if o.timeout == 0 {
		o.timeout = 14
	}
	if o.retryCnt == 0 {
		o.retryCnt = 3
	}
	if o.rnrRetry == 0 && !o.noRNRRetry {
		o.rnrRetry = 7
	}
	if o.noRNRRetry {
		o.rnrRetry = 0
	}
	if o.minRNRTimer == 0 {
		o.minRNRTimer = 1
	}
	if o.mtu == 0 {
		o.mtu = MTU1024
	}
	if o.typ == 0 {
		o.typ = QPTypeRC
	}
	if o.cqe == 0 {
		o.cqe = 256
	}
	if o.sendWR == 0 {
		o.sendWR = 32
	}
	if o.recvWR == 0 {
		o.recvWR = 32
	}
	return o
}

const smallBuf = 64 << 10

// smallEnd makes a PD (pd, or a new one), a CQ and an RC QP in RESET on d,
// and registers a 64 KiB buffer with every right.
func smallEnd(t testing.TB, d *Device, pd *PD, o qpOpts) *end {
	t.Helper()
	o = o.withDefaults()
	var err error
	if pd == nil {
		pd, err = d.AllocPD()
		require.NoError(t, err)
	}
	cq := o.cq
	if cq == nil {
		cq, err = d.CreateCQ(o.cqe, -1)
		require.NoError(t, err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: o.typ, SendCQ: cq, RecvCQ: cq, SRQ: o.srq,
		Cap: QPCap{MaxSendWR: o.sendWR, MaxRecvWR: o.recvWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	require.NoError(t, err)
	buf := make([]byte, smallBuf)
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	require.NoError(t, err)
	return &end{dev: d, pd: pd, cq: cq, qp: qp, mr: mr, buf: buf}
}

// initQP returns the QP of a smallEnd on d, moved to INIT with local
// write access, for a test that builds, steps and holds its datagrams by
// hand.
func initQP(t testing.TB, d *Device) *QP {
	t.Helper()
	e := smallEnd(t, d, nil, qpOpts{})
	require.NoError(t, e.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessLocalWrite},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	return e.qp
}

// rtr moves qp from RESET to RTR towards the peer (QPN, PSN, address).
func rtr(t testing.TB, qp *QP, peer *QP, peerPSN uint32, o qpOpts) {
	t.Helper()
	o = o.withDefaults()
	require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: o.access},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	pa := peer.dev.Addr()
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: netip.AddrFrom16(pa.Addr().As16()), UDPPort: pa.Port()},
		PathMTU: o.mtu, DestQPN: peer.QPN(), RQPSN: peerPSN, MaxDestRdAtomic: 16, MinRNRTimer: o.minRNRTimer},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
}

// rts moves qp from RTR to RTS, sending from psn.
func rts(t testing.TB, qp *QP, psn uint32, o qpOpts) {
	t.Helper()
	o = o.withDefaults()
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTS, SQPSN: psn, Timeout: o.timeout, RetryCnt: o.retryCnt,
		RNRRetry: o.rnrRetry, MaxRdAtomic: 16},
		QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
}

// link connects a and b with explicit attributes (oa for a, ob for b).
func link(t testing.TB, a, b *end, oa, ob qpOpts) {
	t.Helper()
	pa, pb := rand.Uint32()&0xFFFFFF, rand.Uint32()&0xFFFFFF
	rtr(t, a.qp, b.qp, pb, oa)
	rtr(t, b.qp, a.qp, pa, ob)
	rts(t, a.qp, pa, oa)
	rts(t, b.qp, pb, ob)
}

// smallPair returns two connected small ends over kind ("pipe" or "udp").
func smallPair(t testing.TB, kind string, oa, ob qpOpts) (*end, *end) {
	t.Helper()
	da, db := newDevices(t, kind)
	a := smallEnd(t, da, nil, oa)
	b := smallEnd(t, db, nil, ob)
	link(t, a, b, oa, ob)
	return a, b
}

// waitWCs waits for n completions on cq, for at most testutil.Bound()
// (the bound of a hung test: the tests that need completions sooner
// check the time themselves).
func waitWCs(t testing.TB, cq *CQ, n int) []WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer cancel()
	out := make([]WC, 0, n)
	wcs := make([]WC, n)
	for len(out) < n {
		k, err := cq.Wait(ctx, wcs[:n-len(out)])
		require.NoError(t, err, "waiting for completion %d of %d (got %v)", len(out)+1, n, out)
		out = append(out, wcs[:k]...)
	}
	return out
}

// noWC checks that cq stays empty for a short while.
func noWC(t testing.TB, cq *CQ, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	wcs := make([]WC, 4)
	n, err := cq.Wait(ctx, wcs)
	require.ErrorIs(t, err, context.DeadlineExceeded, "unexpected completions %v", wcs[:n])
}

// wcBrief is what the tests compare of a completion: the fields valid in
// an error completion (IBA 11.4.2.1), plus the opcode.
type wcBrief struct {
	ID     uint64
	Status WCStatus
	Opcode WCOpcode
}

func briefs(wcs []WC) []wcBrief {
	out := make([]wcBrief, len(wcs))
	for i, w := range wcs {
		out[i] = wcBrief{w.ID, w.Status, w.Opcode}
	}
	return out
}

// waitEvent waits up to 5 s for an async event of type typ on d; events of
// other types are collected and returned too.
func waitEvent(t testing.TB, d *Device, typ AsyncEventType) (AsyncEvent, []AsyncEvent) {
	t.Helper()
	var others []AsyncEvent
	deadline := time.After(testutil.Bound())
	for {
		select {
		case e, ok := <-d.Events():
			if !ok {
				t.Fatalf("Events closed without a %v event (got %v)", typ, others)
			}
			if e.Type == typ {
				return e, others
			}
			others = append(others, e)
		case <-deadline:
			t.Fatalf("no %v event (got %v)", typ, others)
		}
	}
}

// drainEvents returns the events d has pending, waiting briefly for late
// ones (not after Events is closed).
func drainEvents(d *Device, wait time.Duration) []AsyncEvent {
	var out []AsyncEvent
	deadline := time.After(wait)
	for {
		select {
		case e, ok := <-d.Events():
			if !ok {
				return out
			}
			out = append(out, e)
		case <-deadline:
			return out
		}
	}
}

func eventTypes(es []AsyncEvent) []AsyncEventType {
	out := make([]AsyncEventType, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// waitState waits up to 5 s for qp to reach state s.
func waitState(t testing.TB, qp *QP, s QPState) {
	t.Helper()
	require.Eventually(t, func() bool { return qp.State() == s }, testutil.Bound(), time.Millisecond,
		"QP %#x in %v, want %v", qp.QPN(), qp.State(), s)
}

// injectPacket builds the packet h (with payload) as ca's device would
// send it to cb's, ICRC included, and writes it on ca: a request no
// requester of this package would make.
func injectPacket(t testing.TB, ca, cb *netdev.PipeConn, h *packet.Headers, payload []byte) {
	t.Helper()
	ph := packet.PseudoHeader{Src: ca.LocalAddr().Addr(), Dst: cb.LocalAddr().Addr(),
		SrcPort: ca.LocalAddr().Port(), DstPort: cb.LocalAddr().Port(), IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, 256+len(payload))
	n, err := packet.Build(buf, h, payload, &ph)
	require.NoError(t, err)
	k, err := ca.WriteBatch([]netdev.Message{{Buf: buf[:n], N: n, Addr: cb.LocalAddr()}})
	require.NoError(t, err)
	require.Equal(t, 1, k)
}
