package rxe

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// allStates are the states a Modify may name; SQE is not reachable by RC.
var allStates = []QPState{QPSReset, QPSInit, QPSRTR, QPSRTS, QPSSQD, QPSSQE, QPSErr}

// allMaskBits are the attribute mask bits Modify knows, STATE excepted.
var allMaskBits = []QPAttrMask{
	QPAttrCurState, QPAttrEnSQDAsyncNotify, QPAttrAccessFlags, QPAttrPKeyIndex, QPAttrPort, QPAttrQKey,
	QPAttrAV, QPAttrPathMTU, QPAttrTimeout, QPAttrRetryCnt, QPAttrRNRRetry, QPAttrRQPSN, QPAttrMaxQPRdAtomic,
	QPAttrAltPath, QPAttrMinRNRTimer, QPAttrSQPSN, QPAttrMaxDestRdAtomic, QPAttrPathMigState, QPAttrCap,
	QPAttrDestQPN, QPAttrRateLimit,
}

// wantTransitions is protocol.md §6.5's RC column, written out again here
// (not taken from rcTransitions) so that the test checks the table.
var wantTransitions = map[[2]QPState]transition{
	{QPSReset, QPSInit}: {req: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
	{QPSInit, QPSInit}:  {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
	{QPSInit, QPSRTR}: {req: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer,
		opt: QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex},
	{QPSRTR, QPSRTS}: {req: QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrPathMigState},
	{QPSRTS, QPSRTS}: {opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer},
	{QPSRTS, QPSSQD}: {opt: QPAttrEnSQDAsyncNotify},
	{QPSSQD, QPSRTS}: {opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer},
	{QPSSQD, QPSSQD}: {opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAV | QPAttrAccessFlags | QPAttrTimeout | QPAttrRetryCnt |
		QPAttrRNRRetry | QPAttrMaxQPRdAtomic | QPAttrMaxDestRdAtomic | QPAttrAltPath | QPAttrMinRNRTimer | QPAttrPathMigState},
}

// modifyRig makes QPs in any state on one device, aimed at a peer device.
type modifyRig struct {
	t    *testing.T
	dev  *Device
	peer *Device
	pd   *PD
	cq   *CQ
}

func newModifyRig(t *testing.T) *modifyRig {
	da, db := newDevices(t, "pipe")
	pd, err := da.AllocPD()
	require.NoError(t, err)
	cq, err := da.CreateCQ(1024, -1)
	require.NoError(t, err)
	return &modifyRig{t: t, dev: da, peer: db, pd: pd, cq: cq}
}

// attr returns valid values for every attribute, for a QP in cur.
func (r *modifyRig) attr(cur QPState) QPAttr {
	return QPAttr{
		CurState: cur, AccessFlags: AccessLocalWrite | AccessRemoteRead, Port: 1,
		AH: AH{DGID: r.peer.GID(), UDPPort: r.peer.Addr().Port()}, PathMTU: MTU1024,
		Timeout: 10, RetryCnt: 3, RNRRetry: 7, MinRNRTimer: 1, RQPSN: 0x123456, SQPSN: 0xABCDEF,
		MaxRdAtomic: 4, MaxDestRdAtomic: 4, DestQPN: 0x42, SQDrainNotify: false,
	}
}

// qpIn returns a new QP driven to state s along the table.
func (r *modifyRig) qpIn(s QPState) *QP {
	t := r.t
	t.Helper()
	qp, err := r.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: r.cq, RecvCQ: r.cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	require.NoError(t, err)
	path := map[QPState][]QPState{
		QPSReset: nil, QPSInit: {QPSInit}, QPSRTR: {QPSInit, QPSRTR}, QPSRTS: {QPSInit, QPSRTR, QPSRTS},
		QPSSQD: {QPSInit, QPSRTR, QPSRTS, QPSSQD}, QPSErr: {QPSInit, QPSErr},
	}[s]
	for _, next := range path {
		cur := qp.State()
		a := r.attr(cur)
		a.State = next
		mask := QPAttrState
		if tr, ok := wantTransitions[[2]QPState{cur, next}]; ok {
			mask |= tr.req
		}
		require.NoError(t, qp.Modify(&a, mask), "%v to %v", cur, next)
	}
	require.Equal(t, s, qp.State())
	return qp
}

// TestModifyTransitions walks every (from, to) pair of RC states (IBA
// 10.3.1, protocol.md §6.5).
func TestModifyTransitions(t *testing.T) {
	r := newModifyRig(t)
	from := []QPState{QPSReset, QPSInit, QPSRTR, QPSRTS, QPSSQD, QPSErr}
	for _, cur := range from {
		for _, next := range allStates {
			t.Run(fmt.Sprintf("%v-to-%v", cur, next), func(t *testing.T) {
				r.t = t
				tr, legal := wantTransitions[[2]QPState{cur, next}]
				if next == QPSReset || next == QPSErr && cur != QPSReset {
					legal = true // ib_modify_qp_is_ok: RESET does not go to ERR
				}
				qp := r.qpIn(cur)
				a := r.attr(cur)
				a.State = next
				if !legal {
					err := qp.Modify(&a, QPAttrState)
					require.ErrorIs(t, err, ErrInvalidState)
					// Even with every attribute of a legal transition.
					for _, tr := range wantTransitions {
						require.ErrorIs(t, qp.Modify(&a, QPAttrState|tr.req), ErrInvalidState)
					}
					require.Equal(t, cur, qp.State(), "a refused Modify changes nothing")
					return
				}
				// Each missing required attribute is named.
				for _, bit := range allMaskBits {
					if tr.req&bit == 0 {
						continue
					}
					err := qp.Modify(&a, QPAttrState|tr.req&^bit)
					require.ErrorIs(t, err, ErrInvalidArgument, "without %v", bit)
					require.Contains(t, err.Error(), "needs "+bit.String())
				}
				// Each attribute neither required nor optional is refused
				// (→RESET and →ERR take none: ib_modify_qp_is_ok).
				for _, bit := range allMaskBits {
					if (tr.req|tr.opt)&bit != 0 {
						continue
					}
					err := qp.Modify(&a, QPAttrState|tr.req|bit)
					require.ErrorIs(t, err, ErrInvalidArgument, "with %v", bit)
					require.Contains(t, err.Error(), "does not take "+bit.String())
				}
				require.Equal(t, cur, qp.State(), "a refused Modify changes nothing")
				// The required attributes plus all optional ones.
				require.NoError(t, qp.Modify(&a, QPAttrState|tr.req|tr.opt))
				require.Equal(t, next, qp.State())
				// And each optional one alone, on a fresh QP.
				for _, bit := range allMaskBits {
					if tr.opt&bit == 0 {
						continue
					}
					q := r.qpIn(cur)
					require.NoError(t, q.Modify(&a, QPAttrState|tr.req|bit), "with %v", bit)
					require.Equal(t, next, q.State())
				}
			})
		}
	}
}

// TestModifyWithoutStateBit: a mask without STATE keeps the state and
// applies the attributes the self-transition allows.
func TestModifyWithoutStateBit(t *testing.T) {
	r := newModifyRig(t)
	r.t = t
	qp := r.qpIn(QPSRTS)
	a := r.attr(QPSRTS)
	a.MinRNRTimer, a.AccessFlags = 20, AccessLocalWrite|AccessRemoteWrite
	require.NoError(t, qp.Modify(&a, QPAttrMinRNRTimer|QPAttrAccessFlags))
	q := qp.Query()
	require.Equal(t, QPSRTS, q.State)
	require.Equal(t, uint8(20), q.MinRNRTimer)
	require.Equal(t, AccessLocalWrite|AccessRemoteWrite, q.AccessFlags)
	require.ErrorIs(t, qp.Modify(&a, QPAttrTimeout), ErrInvalidArgument, "RTS to RTS does not take TIMEOUT")
}

// TestModifyBadValues: values the device cannot take are refused whatever
// the transition, and leave the QP as it was.
func TestModifyBadValues(t *testing.T) {
	// A 1500-byte link: the active MTU is 1024.
	ca, cb := netdev.NewPipe()
	d, err := Open(ca, Options{LinkMTU: 1500, OwnConn: true})
	require.NoError(t, err)
	peer, err := Open(cb, Options{LinkMTU: 1500, OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close(); peer.Close() })
	require.Equal(t, MTU1024, d.ActiveMTU())
	r := &modifyRig{t: t, dev: d, peer: peer}
	r.pd, err = d.AllocPD()
	require.NoError(t, err)
	r.cq, err = d.CreateCQ(64, -1)
	require.NoError(t, err)

	cases := []struct {
		name string
		from QPState
		set  func(a *QPAttr)
		mask QPAttrMask // added to the transition's required ones
		want string
	}{
		{"port-2", QPSReset, func(a *QPAttr) { a.Port = 2 }, 0, "port 2"},
		{"port-0", QPSReset, func(a *QPAttr) { a.Port = 0 }, 0, "port 0"},
		{"pkey-index-1", QPSReset, func(a *QPAttr) { a.PKeyIndex = 1 }, 0, "P_Key index 1"},
		{"unknown-access-flag", QPSReset, func(a *QPAttr) { a.AccessFlags |= AccessZeroBased }, 0, "access flags"},
		{"path-mtu-above-active", QPSInit, func(a *QPAttr) { a.PathMTU = MTU2048 }, 0, "path MTU 2048"},
		{"path-mtu-invalid", QPSInit, func(a *QPAttr) { a.PathMTU = 0 }, 0, "path MTU"},
		{"path-mtu-enum-6", QPSInit, func(a *QPAttr) { a.PathMTU = 6 }, 0, "path MTU"},
		{"dgid-ipv6-on-ipv4-device", QPSInit, func(a *QPAttr) { a.AH.DGID = netip.MustParseAddr("fd00::1") }, 0, "destination GID"},
		{"dgid-unspecified", QPSInit, func(a *QPAttr) { a.AH.DGID = netip.IPv4Unspecified() }, 0, "destination GID"},
		{"dgid-zero", QPSInit, func(a *QPAttr) { a.AH.DGID = netip.Addr{} }, 0, "destination GID"},
		{"sgid-index-2", QPSInit, func(a *QPAttr) { a.AH.SGIDIndex = 2 }, 0, "source GID index"},
		{"dest-qpn-0", QPSInit, func(a *QPAttr) { a.DestQPN = 0 }, 0, "destination QPN"},
		{"dest-qpn-25-bits", QPSInit, func(a *QPAttr) { a.DestQPN = 1 << 24 }, 0, "destination QPN"},
		{"min-rnr-timer-32", QPSInit, func(a *QPAttr) { a.MinRNRTimer = 32 }, 0, "min_rnr_timer"},
		{"max-dest-rd-atomic-129", QPSInit, func(a *QPAttr) { a.MaxDestRdAtomic = 129 }, 0, "max_dest_rd_atomic"},
		{"max-dest-rd-atomic-negative", QPSInit, func(a *QPAttr) { a.MaxDestRdAtomic = -1 }, 0, "max_dest_rd_atomic"},
		{"retry-cnt-8", QPSRTR, func(a *QPAttr) { a.RetryCnt = 8 }, 0, "retry_cnt 8"},
		{"rnr-retry-8", QPSRTR, func(a *QPAttr) { a.RNRRetry = 8 }, 0, "rnr_retry 8"},
		{"timeout-32", QPSRTR, func(a *QPAttr) { a.Timeout = 32 }, 0, "timeout 32"},
		{"max-rd-atomic-129", QPSRTR, func(a *QPAttr) { a.MaxRdAtomic = 129 }, 0, "max_rd_atomic"},
		{"cur-state-mismatch", QPSRTR, func(a *QPAttr) { a.CurState = QPSInit }, QPAttrCurState, "CUR_STATE"},
		{"state-7", QPSRTR, func(a *QPAttr) { a.State = 7 }, 0, "state"},
		{"bad-value-on-move-to-err", QPSRTS, func(a *QPAttr) { a.State = QPSErr; a.Port = 2 }, 0, "port 2"},
	}
	next := map[QPState]QPState{QPSReset: QPSInit, QPSInit: QPSRTR, QPSRTR: QPSRTS, QPSRTS: QPSErr}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.t = t
			qp := r.qpIn(c.from)
			before := qp.Query()
			a := r.attr(c.from)
			a.State = next[c.from]
			mask := QPAttrState | wantTransitions[[2]QPState{c.from, a.State}].req | c.mask
			require.NoError(t, func() error { b := a; return r.qpIn(c.from).Modify(&b, mask) }(), "the values before the change are good")
			c.set(&a)
			if c.name == "bad-value-on-move-to-err" {
				mask |= QPAttrPort
			}
			err := qp.Modify(&a, mask)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, before, qp.Query(), "a refused Modify changes nothing")
		})
	}
}

// TestQuery: Query returns what Modify set, and the live PSNs.
func TestQuery(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	q := a.qp.Query()
	require.Equal(t, QPAttr{Cap: a.qp.Cap()}, q, "RESET: nothing set")
	require.Equal(t, QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}, q.Cap)

	oa := qpOpts{access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite, timeout: 12, retryCnt: 5, rnrRetry: 6, minRNRTimer: 14, mtu: MTU2048}
	ob := qpOpts{mtu: MTU2048}            // both sides use one path MTU
	const psnA, psnB = 0xFFFFFE, 0x000100 // a's SQ PSN wraps
	rtr(t, a.qp, b.qp, psnB, oa)
	rtr(t, b.qp, a.qp, psnA, ob)
	q = a.qp.Query()
	require.Equal(t, QPSRTR, q.State)
	require.Equal(t, uint32(psnB), q.RQPSN)
	rts(t, a.qp, psnA, oa)
	rts(t, b.qp, psnB, ob)

	q = a.qp.Query()
	require.Equal(t, QPSRTS, q.State)
	require.Equal(t, QPSRTS, q.CurState)
	require.Equal(t, oa.access, q.AccessFlags)
	require.Equal(t, uint8(1), q.Port)
	require.Equal(t, MTU2048, q.PathMTU)
	require.Equal(t, uint8(12), q.Timeout)
	require.Equal(t, uint8(5), q.RetryCnt)
	require.Equal(t, uint8(6), q.RNRRetry)
	require.Equal(t, uint8(14), q.MinRNRTimer)
	require.Equal(t, 16, q.MaxRdAtomic)
	require.Equal(t, 16, q.MaxDestRdAtomic)
	require.Equal(t, b.qp.QPN(), q.DestQPN)
	require.Equal(t, db.GID(), q.AH.DGID)
	require.Equal(t, db.Addr().Port(), q.AH.UDPPort)
	require.Equal(t, uint32(psnA), q.SQPSN)
	require.Equal(t, uint32(psnB), q.RQPSN)

	// Three one-packet SENDs and a three-packet READ (2048-byte MTU):
	// a's SQ PSN moves by 3 + 3 and wraps; b's RQ PSN follows.
	for i := range 3 {
		_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(0, 64)}})
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 64)}})
		require.NoError(t, err)
	}
	_, err := a.qp.PostSend(SendWR{ID: 9, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 5000)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{9, WCSuccess, WCRDMARead}}, briefs(waitWCs(t, a.cq, 1)))
	require.Equal(t, uint32(0x000004), a.qp.Query().SQPSN)
	require.Equal(t, uint32(0x000004), b.qp.Query().RQPSN)
	require.Equal(t, uint32(psnB), b.qp.Query().SQPSN, "b sent no request")
	require.Equal(t, uint32(psnB), a.qp.Query().RQPSN)
	waitWCs(t, b.cq, 3)
}

// TestResetAndReconnect: RESET forgets queues and PSNs without
// completions; the QP then connects again and moves data.
func TestResetAndReconnect(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{}, qpOpts{})
			_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 64)}}, RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(0, 64)}})
			require.NoError(t, err)
			// One message through, one receive left over.
			_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			require.Equal(t, []wcBrief{{1, WCSuccess, WCRecv}}, briefs(waitWCs(t, b.cq, 1)))

			for _, e := range []*end{a, b} {
				require.NoError(t, e.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
				require.Equal(t, QPAttr{Cap: e.qp.Cap()}, e.qp.Query())
			}
			noWC(t, b.cq, 10*time.Millisecond) // receive 2 is discarded, not flushed
			_, err = a.qp.PostSend(SendWR{ID: 2, Opcode: WRSend})
			require.ErrorIs(t, err, ErrInvalidState)

			link(t, a, b, qpOpts{}, qpOpts{})
			fill(a.buf[:3000], 3)
			syncMem(a, b)
			_, err = b.qp.PostRecv(RecvWR{ID: 3, SGList: []SGE{b.mr.SGE(4096, 4096)}})
			require.NoError(t, err)
			_, err = a.qp.PostSend(SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 3000)}},
				SendWR{ID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 3000)},
					RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{3, WCSuccess, WCSend}, {4, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 2)))
			rw := waitWCs(t, b.cq, 1)
			require.Equal(t, []wcBrief{{3, WCSuccess, WCRecv}}, briefs(rw), "receive 2 was discarded by RESET")
			require.Equal(t, uint32(3000), rw[0].ByteLen)
			syncMem(a, b)
			require.Equal(t, a.buf[:3000], b.buf[4096:7096])
			require.Equal(t, a.buf[:3000], b.buf[8192:11192])
		})
	}
}

// TestReconnectAfterError: a QP that failed comes back through RESET.
func TestReconnectAfterError(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 1})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemAccessErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	waitState(t, b.qp, QPSErr)
	for _, e := range []*end{a, b} {
		require.NoError(t, e.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
	}
	link(t, a, b, qpOpts{}, qpOpts{})
	fill(a.buf[:100], 4)
	syncMem(a, b)
	_, err = a.qp.PostSend(SendWR{ID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 100)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{2, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	syncMem(a, b)
	require.Equal(t, a.buf[:100], b.buf[:100])
}

// TestSQD: RTS→SQD stops new WQEs, raises SQ_DRAINED when asked once the
// started ones are done, and SQD→RTS resumes.
func TestSQD(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify))
	require.Equal(t, QPSSQD, a.qp.State())
	ev, others := waitEvent(t, a.dev, EventSQDrained)
	require.Same(t, a.qp, ev.QP)
	require.Empty(t, others)

	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err, "SQD accepts WRs")
	noWC(t, a.cq, 20*time.Millisecond)
	require.Zero(t, a.qp.Counters().Requester.PacketsSent, "SQD starts no WQE")

	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	require.Equal(t, []wcBrief{{1, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	require.Empty(t, drainEvents(a.dev, 0), "one SQ_DRAINED per drain")
}
