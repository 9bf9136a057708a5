package rxe

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/responder"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// QP is a queue pair. All methods are safe for concurrent use.
type QP struct {
	dev    *Device
	vec    *vector // the vector of recvCQ: runs the QP's transmit work (and receive, with a socket per vector)
	pd     *PD
	qpn    uint32
	typ    QPType
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	rq     *recvQueue // own RQ, or the SRQ's queue
	cap    QPCap
	sigAll bool
	// blockSelfMcast is QPInitAttr.BlockSelfMcastLoopback.
	blockSelfMcast bool

	respStates []string // the responder's states since the last trace (Options.Trace)

	// mu guards the rest: the QP's state is its own, and only the holder
	// of mu touches it. The holders are the QP's step (qpstep.go), run by
	// its vector's goroutines, and the verbs calls. See docs/threading.md.
	mu        sync.Mutex
	state     QPState
	attr      QPAttr // the attributes given so far
	dest      netip.AddrPort
	req       *requester.Requester
	resp      *responder.Responder
	ureq      *requester.Unreliable // UC and UD send side (req is nil; unreliable.go)
	uresp     *responder.Unreliable // UC and UD receive side (resp is nil)
	timerAt   time.Time             // the requester's deadline (timers.go)
	readFor   time.Time             // the deadline the socket was last read for (readBeforeTimeout)
	localDrop localDrop             // datagrams the local host refused, and the back-off
	// gen is the QP's incarnation: reset starts a new one. A transmit
	// pass tags each datagram with the incarnation that built it
	// (vector.txGens), so that a write that returns after a reset gives
	// the new connection neither the old one's datagrams (takeBack) nor
	// their count (vector.send).
	gen       uint32
	drainSent bool
	destroyed bool
	peerBuf   peerBuffer // the peer's announced receive buffer (recvbuf.go)
	counter   qpCounters
	// lossSeen is the engines' loss signals at the last look
	// (noteLossSignals).
	lossSeen uint64
	// windowBound: the requester's window is below rxe's 128 because of a
	// receive buffer (bufferLimits); counted in Device.spinQPs.
	windowBound bool
	// shareStale is set when the QP's share of a socket's receive buffer
	// changed because another QP joined or left (syncShare); the QP's
	// step then applies it (applyShare).
	shareStale atomic.Bool

	// slot is the QP's entry in its vector's timerQueue, guarded by the
	// queue's lock; queued marks it on its vector's run queue.
	slot   timerSlot
	queued atomic.Bool

	// cm is the connection the communication manager set the QP up for
	// (Dial, CMListener.Accept), nil for any other QP: Destroy closes it.
	cm atomic.Pointer[CMConn]
}

// qpCounters are per-QP counters kept by the device (the engines keep
// their own; QP.Counters merges them).
type qpCounters struct {
	// rcvdPkts and rcvdBytes are counted and read under the QP's mu (a
	// locked add per packet received cost more than the lock itself).
	rcvdPkts, rcvdBytes uint64
	sentPkts            atomic.Uint64
	badSrc              atomic.Uint64 // packets from an address other than the peer's
	badState            atomic.Uint64 // packets the QP's state does not accept
	localDrops          atomic.Uint64 // datagrams the local host refused
	dropRetries         atomic.Uint64 // held datagrams sent again after the back-off
	heldDropped         atomic.Uint64 // datagrams taken back after local drops, then forgotten (forgetHeld)
}

// Limits of gorxe devices (rxe_param.h values where rxe has them).
const (
	maxQPWR       = 0x4000
	maxSGE        = 32
	maxInlineData = 400
	maxMsgSize    = requester.MaxMessage // 2^31 bytes, IBA's largest message
)

// check reports a capability outside the device's limits (ibv_create_qp
// fails with EINVAL): a send queue of 0 to maxQPWR WRs, and a receive queue
// as large, at most maxSGE SGEs each way and maxInlineData inline bytes.
// With srq the receive capabilities are not checked, as rxe_qp_chk_cap
// skips them: the SRQ's WQEs are used instead. A queue of 0 WRs is
// allowed, as rxe_qp_chk_cap and rxe_queue_init allow it: a QP that only
// sends, or only initiates RDMA READ and WRITE, needs no receive queue.
func (c QPCap) check(srq bool) error {
	if c.MaxSendWR < 0 || c.MaxSendWR > maxQPWR {
		return fmt.Errorf("%w: max_send_wr %d not in [0, %d]", ErrInvalidArgument, c.MaxSendWR, maxQPWR)
	}
	if c.MaxSendSGE < 0 || c.MaxSendSGE > maxSGE {
		return fmt.Errorf("%w: max_send_sge %d (max %d)", ErrInvalidArgument, c.MaxSendSGE, maxSGE)
	}
	if !srq && (c.MaxRecvSGE < 0 || c.MaxRecvSGE > maxSGE) {
		return fmt.Errorf("%w: max_recv_sge %d (max %d)", ErrInvalidArgument, c.MaxRecvSGE, maxSGE)
	}
	if c.MaxInlineData < 0 || c.MaxInlineData > maxInlineData {
		return fmt.Errorf("%w: max_inline_data %d (max %d)", ErrInvalidArgument, c.MaxInlineData, maxInlineData)
	}
	if !srq && (c.MaxRecvWR < 0 || c.MaxRecvWR > maxQPWR) {
		return fmt.Errorf("%w: max_recv_wr %d not in [0, %d]", ErrInvalidArgument, c.MaxRecvWR, maxQPWR)
	}
	return nil
}

// sgeSize is the size of an SGE in a send WQE (struct ib_sge).
const sgeSize = 16

// sendWQECaps returns the SGEs and inline bytes a send WQE holds when it
// is sized for sge SGEs and inline bytes: rxe_init_sq makes the WQE room
// for the larger of the two and reports both capabilities it gives, so a
// QP asked for 4 SGEs takes 64 inline bytes, and one asked for 100 inline
// bytes takes 6 SGEs. Unlike rxe (whose max_inline_data can then exceed
// the device's), neither goes past the device's limit.
func sendWQECaps(sge, inline int) (int, int) {
	room := max(sge*sgeSize, inline)
	return min(room/sgeSize, maxSGE), min(room, maxInlineData)
}

// CreateQP creates an RC, UC or UD queue pair in RESET.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	d := pd.dev
	if d.closed.Load() || pd.closed.Load() {
		return nil, ErrClosed
	}
	if attr.Type != QPTypeRC && attr.Type != QPTypeUC && attr.Type != QPTypeUD {
		return nil, fmt.Errorf("%w: QP type %v is not supported (RC, UC and UD are)", ErrInvalidArgument, attr.Type)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("%w: a QP needs a send CQ and a receive CQ", ErrInvalidArgument)
	}
	if attr.SendCQ.dev != d || attr.RecvCQ.dev != d || attr.SRQ != nil && attr.SRQ.dev != d {
		return nil, fmt.Errorf("%w: CQ or SRQ of another device", ErrInvalidArgument)
	}
	if err := attr.Cap.check(attr.SRQ != nil); err != nil {
		return nil, err
	}
	if attr.Type == QPTypeUD {
		if err := d.reportIPFields(); err != nil {
			return nil, err
		}
	}
	c := attr.Cap
	// The send engines hold at least one WR and one SGE (requester.Config):
	// the capabilities reported are those, at least the ones asked for.
	c.MaxSendWR = max(c.MaxSendWR, 1)
	c.MaxSendSGE = max(c.MaxSendSGE, 1)
	c.MaxRecvSGE = max(c.MaxRecvSGE, 1)
	c.MaxSendSGE, c.MaxInlineData = sendWQECaps(c.MaxSendSGE, c.MaxInlineData)
	if err := pd.use(); err != nil {
		return nil, err
	}
	if err := attr.SendCQ.use(); err != nil {
		pd.users.Add(-1)
		return nil, fmt.Errorf("send CQ: %w", err)
	}
	if err := attr.RecvCQ.use(); err != nil {
		pd.users.Add(-1)
		attr.SendCQ.users.Add(-1)
		return nil, fmt.Errorf("receive CQ: %w", err)
	}
	release := func() {
		pd.users.Add(-1)
		attr.SendCQ.users.Add(-1)
		attr.RecvCQ.users.Add(-1)
	}
	qp := &QP{dev: d, pd: pd, typ: attr.Type, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ, sigAll: attr.SigAll,
		blockSelfMcast: attr.BlockSelfMcastLoopback}
	qp.slot.init()
	if attr.SRQ != nil {
		if err := attr.SRQ.attach(pd, attr.RecvCQ); err != nil {
			release()
			return nil, err
		}
		qp.rq = attr.SRQ.q
		// The receive capabilities asked for do not apply (check skips
		// them): the QP has no receive queue of its own, and reports
		// none, as ibv_query_qp reports none for a QP on an SRQ
		// (rxe_qp_to_init leaves them 0).
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	} else {
		qp.rq = newRecvQueue(d, c.MaxRecvWR, c.MaxRecvSGE)
	}
	qp.cap = c
	qp.vec = d.vecs[attr.RecvCQ.vector]
	qpn, err := d.qps.insert(qp, qp.vec.id, len(d.vecs))
	if err != nil {
		if qp.srq != nil {
			qp.srq.detach()
		}
		release()
		return nil, err
	}
	qp.qpn = qpn
	qp.sendCQ.addReader(qp.vec.reader)
	qp.recvCQ.addReader(qp.vec.reader)
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Type returns the QP's transport type.
func (qp *QP) Type() QPType { return qp.typ }

// Cap returns the QP's capacities.
func (qp *QP) Cap() QPCap { return qp.cap }

// State returns the current state.
func (qp *QP) State() QPState {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state
}

// Modify changes the QP's attributes and state (ibv_modify_qp): the mask
// must hold exactly the attributes IBA 10.3.1 requires for the transition
// and at most the optional ones. After Destroy or Device.Close it fails
// with ErrClosed.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	d := qp.dev
	qp.mu.Lock()
	if qp.dead() {
		qp.mu.Unlock()
		return ErrClosed
	}
	// The attributes are checked once the QP is known to be alive: a QP
	// that is gone refuses every Modify with ErrClosed.
	if attr == nil {
		qp.mu.Unlock()
		return fmt.Errorf("%w: nil QP attributes", ErrInvalidArgument)
	}
	if err := d.checkValues(attr, mask); err != nil {
		qp.mu.Unlock()
		return err
	}
	cur := qp.state
	next, err := checkTransition(qp.typ, cur, attr, mask)
	if err == nil {
		err = qp.checkDraining(cur, next, mask)
	}
	if err != nil {
		qp.mu.Unlock()
		return err
	}
	qp.apply(attr, mask)
	switch {
	case next == QPSReset:
		qp.reset()
	case next == QPSErr:
		qp.enterError()
	case cur == QPSRTS && next == QPSSQD:
		// Only RTS→SQD starts a drain: SQD→SQD (or a Modify without
		// the state bit in SQD) keeps the drain under way or done, so
		// SQ_DRAINED is raised once per drain (IBA 11.6.3.2; kernel rxe
		// raises it when its requester first reaches QP_STATE_DRAINED).
		qp.setDraining(true)
		qp.drainSent = false
		// The SQ_DRAINED request modifies this one transition (IBA
		// 10.3.1: EN_SQD_ASYNC_NOTIFY is an optional modifier of
		// RTS→SQD; 11.6.3.2): a drain started without it raises
		// nothing, whatever an earlier drain asked for. (Kernel rxe
		// keeps en_sqd_async_notify in qp->attr and raises SQ_DRAINED
		// whatever it says.)
		if mask&QPAttrEnSQDAsyncNotify == 0 {
			qp.attr.SQDrainNotify = false
		}
	case cur == QPSSQD && next == QPSRTS:
		qp.setDraining(false)
	case qp.unreliable():
		qp.startUnreliable(cur, next)
	case cur == QPSInit && next == QPSRTR:
		qp.startResponder()
	case cur == QPSRTR && next == QPSRTS:
		qp.startRequester()
	}
	if qp.tracing() {
		qp.traceState(cur, next)
	}
	qp.state = next
	err = qp.syncConfig(mask)
	qp.syncShare()
	qp.mu.Unlock()
	d.schedule(qp)
	return err
}

// checkDraining refuses a state change out of SQD while the send queue is
// still draining (a started WQE is unacknowledged), except to ERR, as
// kernel rxe_qp_chk_attr does (EINVAL while qp->attr.sq_draining): the QP
// leaves SQD once SQ_DRAINED is reached. A Modify without the state bit
// (SQD→SQD attributes) stays allowed. The caller holds mu.
func (qp *QP) checkDraining(cur, next QPState, mask QPAttrMask) error {
	if cur != QPSSQD || mask&QPAttrState == 0 || next == QPSErr || qp.sendDrained() {
		return nil
	}
	return fmt.Errorf("%w: SQD to %v while the send queue is still draining", ErrInvalidState, next)
}

// setDraining starts or ends the drain of the send engine, RC or UC/UD
// (caller holds mu; a QP in RTS or SQD has one).
func (qp *QP) setDraining(on bool) {
	if qp.ureq != nil {
		qp.ureq.SetDraining(on)
		return
	}
	qp.req.SetDraining(on)
}

// sendDrained reports whether the send engine is draining and done
// (caller holds mu).
func (qp *QP) sendDrained() bool {
	if qp.ureq != nil {
		return qp.ureq.Drained()
	}
	return qp.req != nil && qp.req.Drained()
}

// apply copies the masked attributes.
func (qp *QP) apply(a *QPAttr, m QPAttrMask) {
	t := &qp.attr
	set := func(bit QPAttrMask, f func()) {
		if m&bit != 0 {
			f()
		}
	}
	set(QPAttrAccessFlags, func() { t.AccessFlags = a.AccessFlags })
	set(QPAttrPKeyIndex, func() { t.PKeyIndex = a.PKeyIndex })
	set(QPAttrPort, func() { t.Port = a.Port })
	set(QPAttrQKey, func() { t.QKey = a.QKey })
	set(QPAttrAV, func() { t.AH = a.AH })
	set(QPAttrPathMTU, func() { t.PathMTU = a.PathMTU })
	set(QPAttrTimeout, func() { t.Timeout = a.Timeout })
	set(QPAttrRetryCnt, func() { t.RetryCnt = a.RetryCnt })
	set(QPAttrRNRRetry, func() { t.RNRRetry = a.RNRRetry })
	set(QPAttrMinRNRTimer, func() { t.MinRNRTimer = a.MinRNRTimer })
	// A PSN is 24 bits (IBA 9.3.1): the bits above are dropped, as
	// rxe_qp_from_attr masks rq_psn and sq_psn with BTH_PSN_MASK.
	set(QPAttrRQPSN, func() { t.RQPSN = a.RQPSN & packet.PSNMask })
	set(QPAttrSQPSN, func() { t.SQPSN = a.SQPSN & packet.PSNMask })
	set(QPAttrMaxQPRdAtomic, func() { t.MaxRdAtomic = a.MaxRdAtomic })
	set(QPAttrMaxDestRdAtomic, func() { t.MaxDestRdAtomic = a.MaxDestRdAtomic })
	set(QPAttrDestQPN, func() { t.DestQPN = a.DestQPN })
	set(QPAttrEnSQDAsyncNotify, func() { t.SQDrainNotify = a.SQDrainNotify })
	set(QPAttrSelectiveRepeat, func() {
		t.SelectiveRepeat, t.OOOLimit, t.PeerOOOLimit = a.SelectiveRepeat, a.OOOLimit, a.PeerOOOLimit
	})
	if m&QPAttrAV != 0 {
		port := a.AH.UDPPort
		if port == 0 {
			port = packet.UDPPort
		}
		qp.dest = netip.AddrPortFrom(a.AH.DGID.Unmap(), port)
	}
}

// roundUpPow2 returns n rounded up to a power of two (0 stays 0). The
// responder gets that many resources for max_dest_rd_atomic n, as
// rxe_qp_from_attr rounds it: a kernel rxe requester rounds its
// max_rd_atomic up too, and keeps that many READs and atomics
// outstanding, so a responder with fewer resources would recycle the
// resource of one it may have to replay. Query still reports n, the
// value given. max_rd_atomic is not rounded: gorxe's requester keeps no
// more outstanding than the application agreed with its peer, whose
// responder may not round.
func roundUpPow2(n int) int {
	if n <= 0 {
		return 0
	}
	return 1 << bits.Len(uint(n-1))
}

// pseudo returns the ICRC pseudo-header of the packets this QP sends: our
// address and port to the peer's, IPv4 ID 0 with DF (what an unconnected
// socket with IP_PMTUDISC_DO puts on the wire).
func (qp *QP) pseudo() packet.PseudoHeader {
	ph := packet.PseudoHeader{Src: qp.dev.addr, Dst: qp.dest.Addr(), SrcPort: qp.dev.port, DstPort: qp.dest.Port()}
	if ph.Src.Is4() {
		ph.IPFlags = packet.IPv4FlagDF
	}
	return ph
}

func (qp *QP) startResponder() {
	cfg := responder.Config{
		QPN: qp.qpn, DestQPN: qp.attr.DestQPN, PMTU: qp.attr.PathMTU.Bytes(),
		RQPSN: packet.PSN(qp.attr.RQPSN), MinRNRTimer: qp.attr.MinRNRTimer,
		MaxDestRdAtomic: roundUpPow2(qp.attr.MaxDestRdAtomic), Access: qp.attr.AccessFlags,
		PKey: packet.DefaultPKey, Pseudo: qp.pseudo(),
		Credits: qp.dev.opts.Credits, SRQ: qp.srq != nil,
	}
	sr := qp.selectiveRepeat()
	cfg.SelectiveRepeat, cfg.OOOLimit = sr.on, sr.oooLimit
	qp.resp = responder.New(&cfg, responder.Env{
		Mem: pdMemory{qp.dev, qp.pd}, RQ: qp.recvSource(), CQ: qp.sink(qp.recvCQ, "responder"),
		Trace: qp.responderTrace(),
	})
}

func (qp *QP) startRequester() {
	cfg := requester.Config{
		QPN: qp.qpn, DestQPN: qp.attr.DestQPN, PMTU: qp.attr.PathMTU.Bytes(),
		SQPSN: packet.PSN(qp.attr.SQPSN), Timeout: qp.attr.Timeout,
		RetryCnt: qp.attr.RetryCnt, RNRRetry: qp.attr.RNRRetry, MaxRdAtomic: qp.attr.MaxRdAtomic,
		PKey: packet.DefaultPKey, Pseudo: qp.pseudo(), SigAll: qp.sigAll,
		MaxWR: qp.cap.MaxSendWR, MaxSGE: qp.cap.MaxSendSGE, MaxInline: qp.cap.MaxInlineData,
		Credits: qp.dev.opts.Credits, Recovery: qp.dev.opts.Recovery,
	}
	cfg.Window, cfg.MaxReadPkts = qp.bufferLimits(cfg.PMTU)
	sr := qp.selectiveRepeat()
	cfg.SelectiveRepeat, cfg.PeerOOOLimit = sr.on, sr.peerLimit
	qp.req = requester.New(&cfg, pdMemory{qp.dev, qp.pd}, qp.sink(qp.sendCQ, "completer"))
}

// syncConfig gives the engines the attributes of mask that a Modify may
// change once they exist (IBA 10.3.1: RTS→RTS, SQD→RTS, SQD→SQD), as
// rxe_qp_from_attr updates qp->attr for rxe's requester and responder:
// min_rnr_timer, the access flags and max_dest_rd_atomic (the responder
// resources) to the responder; timeout, retry_cnt, rnr_retry and
// max_rd_atomic to the requester; a new address vector's pseudo-header to
// both, so that their ICRCs cover the new path.
func (qp *QP) syncConfig(mask QPAttrMask) error {
	a := &qp.attr
	var errs []error
	qp.syncUnreliable(mask)
	if qp.resp != nil {
		qp.resp.SetMinRNRTimer(a.MinRNRTimer)
		qp.resp.SetAccess(a.AccessFlags)
		if mask&QPAttrMaxDestRdAtomic != 0 {
			qp.resp.SetMaxDestRdAtomic(roundUpPow2(a.MaxDestRdAtomic))
		}
		if mask&QPAttrAV != 0 {
			errs = append(errs, qp.resp.SetPath(qp.pseudo()))
		}
	}
	if qp.req != nil {
		if mask&QPAttrTimeout != 0 {
			qp.req.SetTimeout(a.Timeout)
		}
		if mask&QPAttrRetryCnt != 0 {
			qp.req.SetRetryCnt(a.RetryCnt)
		}
		if mask&QPAttrRNRRetry != 0 {
			qp.req.SetRNRRetry(a.RNRRetry)
		}
		if mask&QPAttrMaxQPRdAtomic != 0 {
			qp.req.SetMaxRdAtomic(a.MaxRdAtomic)
		}
		if mask&QPAttrAV != 0 {
			errs = append(errs, qp.req.SetPath(qp.pseudo()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: address vector: %w", ErrInvalidArgument, err)
	}
	return nil
}

// reset returns the QP to RESET: all queue contents and PSN state go,
// and so do the datagrams of a transmit pass under way: they belong to the
// incarnation that ends here (gen), as rxe_qp_reset drops everything the
// QP queued.
func (qp *QP) reset() {
	qp.gen++
	qp.retireEngines()
	qp.req, qp.resp = nil, nil
	qp.ureq, qp.uresp = nil, nil
	if qp.srq == nil {
		qp.rq = newRecvQueue(qp.dev, qp.cap.MaxRecvWR, qp.cap.MaxRecvSGE)
	}
	qp.stopTimers()
	qp.attr = QPAttr{}
	// The peer's announced buffer, like selective repeat in attr, was the
	// last connection's: the next one, brought up with Modify alone
	// toward a peer that announces nothing, gets rxe's window.
	qp.peerBuf = peerBuffer{}
}

// enterError moves the QP to ERR (caller holds mu): outstanding and later
// work requests complete with WR_FLUSH_ERR.
func (qp *QP) enterError() {
	if qp.state == QPSErr {
		return
	}
	if qp.tracing() {
		qp.traceState(qp.state, QPSErr)
	}
	qp.state = QPSErr
	if qp.req != nil {
		qp.req.Flush()
	}
	qp.flushUnreliable()
	if qp.resp != nil {
		qp.resp.Flush()
	} else if qp.srq == nil {
		qp.rq.flush(qp.recvCQ, qp.qpn)
	}
	if qp.srq != nil {
		qp.dev.raise(AsyncEvent{Type: EventQPLastWQEReached, QP: qp})
	}
	qp.timerAt = time.Time{} // held ACK and NAK packets still go (heldAcksOnly)
}

// stopTimers forgets the requester's deadline and the held datagrams
// (forgetHeld) and takes the QP out of its vector's timer queue (reset,
// Destroy, Close; caller holds mu).
func (qp *QP) stopTimers() {
	qp.timerAt = time.Time{}
	qp.forgetHeld()
	qp.vec.timers.cancel(qp)
}

// dead reports whether the QP was destroyed or its device closed (caller
// holds mu): its engines run no more and its verbs fail with ErrClosed.
func (qp *QP) dead() bool { return qp.destroyed || qp.dev.closed.Load() }

// closeDevice stops the QP for Device.Close (the device is already marked
// closed): work requests still outstanding complete with WR_FLUSH_ERR, as
// in ERR, its timers stop, and once it returns no step of the QP runs or
// is under way, so the QP touches no registered memory again. A UC or UD
// datagram built and not yet reported written belongs to a transmit pass
// whose write outlasted Close's wait and that the close cuts short: its
// work request completes with WR_FLUSH_ERR here, before Close returns
// (requester.Unreliable.Unsent), and the pass's late report finds nothing
// left to complete.
func (qp *QP) closeDevice() {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.destroyed {
		return
	}
	if qp.state != QPSReset {
		qp.enterError()
		qp.syncShare()
	}
	if qp.ureq != nil {
		qp.ureq.Unsent()
	}
	qp.stopTimers()
}

func (qp *QP) pending() bool {
	if qp.state == QPSErr || qp.state == QPSReset {
		return false
	}
	return qp.resp != nil && qp.resp.Pending() || qp.req != nil && qp.req.Pending() || qp.ureq != nil && qp.ureq.Pending()
}

// PostSend posts send work requests (ibv_post_send). It returns how many
// were posted; on error, wrs[n] is the one refused (bad_wr): a full send
// queue gives ErrNoResources, a malformed WR ErrInvalidArgument (among
// them one with SendInline and an SGList, or InlineData without
// SendInline: the payload is InlineData with the flag, SGList without
// it). The QP must
// be in RTS or SQD (or ERR, where they complete with WR_FLUSH_ERR); after
// Destroy or Device.Close it fails with ErrClosed.
func (qp *QP) PostSend(wrs ...SendWR) (int, error) {
	qp.mu.Lock()
	if qp.dead() {
		qp.mu.Unlock()
		return 0, ErrClosed
	}
	switch qp.state {
	case QPSRTS, QPSSQD, QPSErr:
	default:
		st := qp.state
		qp.mu.Unlock()
		return 0, fmt.Errorf("%w: PostSend on a QP in %v", ErrInvalidState, st)
	}
	if qp.ureq == nil && qp.req == nil {
		// ERR reached before RTS: there is no send queue, but the WRs
		// still complete with WR_FLUSH_ERR (rxe_post_send accepts WRs in
		// ERR and flushes them; protocol.md §6.5). They are validated
		// first, as rxe post_one_send validates every WR it queues: the
		// list stops at the first malformed one (bad_wr).
		for i := range wrs {
			if err := qp.checkSendWR(&wrs[i]); err != nil {
				qp.mu.Unlock()
				return i, fmt.Errorf("%w: send WR %d (%v): %w", ErrInvalidArgument, i, wrs[i].Opcode, err)
			}
			wc := WC{ID: wrs[i].ID, Status: verbs.WCWRFlushErr, Opcode: verbs.WCOpcodeOf(wrs[i].Opcode), QPNum: qp.qpn}
			qp.sendCQ.push(&wc, false)
		}
		qp.mu.Unlock()
		return len(wrs), nil
	}
	n := 0
	var err error
	for i := range wrs {
		if what := qp.badWR(&wrs[i]); what != "" {
			err = fmt.Errorf("%w: send WR %d: %s", ErrInvalidArgument, i, what)
			break
		}
		wr := &wrs[i]
		if ah, ok := wr.AH.(*AddrHandle); ok && ah.mcast && wr.RemoteQPN != MulticastQPN {
			// A datagram to a group goes to MulticastQPN, the QPN a
			// receiver's rxe_rcv hands to rxe_rcv_mcast_pkt.
			// A copy keeps the caller's work request as it was.
			mwr := *wr
			mwr.RemoteQPN = MulticastQPN
			wr = &mwr
		}
		if err = qp.postOne(wr); err != nil {
			kind := ErrInvalidArgument
			if errors.Is(err, requester.ErrQueueFull) {
				kind = ErrNoResources
			}
			err = fmt.Errorf("%w: send WR %d (%v): %w", kind, i, wrs[i].Opcode, err)
			break
		}
		n++
	}
	if qp.state == QPSErr {
		qp.flushSendQueue()
	}
	qp.mu.Unlock()
	if n > 0 {
		qp.schedulePosted()
	}
	return n, err
}

// badWR says what is wrong with wr that the send engines do not check
// (its address handle, badAH, and how it carries its payload,
// payloadShape), or returns "".
func (qp *QP) badWR(wr *SendWR) string {
	if what := qp.badAH(wr.AH); what != "" {
		return what
	}
	return payloadShape(wr)
}

// payloadShape says what is wrong with how wr carries its payload, or
// returns "": in InlineData with SendInline, in SGList without it. A WR
// that mixes the two is refused rather than sent with a payload the
// caller did not give: libibverbs asks for inline data with
// IBV_SEND_INLINE and an SG list, whose bytes the provider copies at post
// time (rdma-core rxe's init_send_wqe), where a SendWR's SGList would
// not be sent, and InlineData without SendInline would not be either.
func payloadShape(wr *SendWR) string {
	inline := wr.Flags&SendInline != 0
	switch {
	case inline && len(wr.SGList) > 0:
		return "a SendInline WR sends its InlineData: its SGList must be empty (copy the bytes into InlineData)"
	case !inline && len(wr.InlineData) > 0:
		return "InlineData is sent only with SendInline (set the flag, or give the bytes in SGList)"
	}
	return ""
}

// badAH says what is wrong with a send WR's address handle, or returns
// "" if it is none or a live one made by PD.CreateAH on the QP's PD. As
// ibv_post_send takes only an ibv_ah of the QP's PD, any other
// verbs.AddressHandle is refused: it skipped CreateAH's checks (a nil one
// would panic in the requester with the QP's lock held, and one of the
// other IP family would fail the QP when its datagram is built). A handle
// after AddrHandle.Destroy is refused too, as its ibv_ah no longer exists;
// a WR that passed this check keeps the destination the requester copies
// from it.
func (qp *QP) badAH(h verbs.AddressHandle) string {
	if h == nil {
		return ""
	}
	ah, ok := h.(*AddrHandle)
	switch {
	case !ok:
		return fmt.Sprintf("address handle %T not made by PD.CreateAH", h)
	case ah == nil:
		return "nil address handle"
	case ah.pd != qp.pd:
		return "address handle of another PD"
	case ah.destroyed.Load():
		return "destroyed address handle"
	}
	return ""
}

// checkSendWR validates wr for the QP without a send engine to post it to
// (ERR reached before RTS; the caller holds mu): badWR's checks, and
// the checks the QP type's engine makes at Post (requester.Check,
// requester.CheckUnreliable with the port's active MTU for UD).
func (qp *QP) checkSendWR(wr *SendWR) error {
	if what := qp.badWR(wr); what != "" {
		return errors.New(what)
	}
	c := qp.cap
	if qp.typ == QPTypeRC {
		return requester.Check(wr, c.MaxSendSGE, c.MaxInlineData)
	}
	return requester.CheckUnreliable(wr, qp.typ == QPTypeUD, c.MaxSendSGE, c.MaxInlineData, qp.dev.activeMTU.Bytes())
}

// postOne queues wr on the QP's send engine, the UC/UD one or the RC
// requester (one of them is set; the caller holds mu). It calls the
// engines directly, not through an interface, so that the compiler sees
// that wr does not escape and PostSend's variadic slice stays on the
// caller's stack: a PostSend of one work request allocates nothing.
func (qp *QP) postOne(wr *SendWR) error {
	if qp.ureq != nil {
		return qp.ureq.Post(wr)
	}
	return qp.req.Post(wr)
}

// flushSendQueue completes the send engine's queued work requests with
// WR_FLUSH_ERR (the caller holds mu).
func (qp *QP) flushSendQueue() {
	if qp.ureq != nil {
		qp.ureq.Flush()
		return
	}
	qp.req.Flush()
}

// PostRecv posts receive work requests to the QP's own receive queue
// (ibv_post_recv). It returns how many were posted; a full receive queue
// gives ErrNoResources. Allowed from INIT on (ErrInvalidState in RESET);
// in ERR they complete with WR_FLUSH_ERR. A QP with an SRQ takes its
// receives from the SRQ, and PostRecv on it fails with ErrInvalidArgument.
// After Destroy or Device.Close it fails with ErrClosed.
func (qp *QP) PostRecv(wrs ...RecvWR) (int, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead() {
		return 0, ErrClosed
	}
	if qp.srq != nil {
		return 0, fmt.Errorf("%w: the QP uses an SRQ: post to the SRQ", ErrInvalidArgument)
	}
	if qp.state == QPSReset {
		return 0, fmt.Errorf("%w: PostRecv on a QP in RESET", ErrInvalidState)
	}
	n, err := qp.rq.post(wrs)
	if qp.state == QPSErr {
		qp.rq.flush(qp.recvCQ, qp.qpn)
	} else if n > 0 && qp.resp != nil && qp.resp.CreditUpdate() {
		// End-to-end credits: an unsolicited ACK tells a requester blocked
		// by credits of the new WQEs (IBA 9.7.7.2.5).
		qp.dev.schedule(qp)
	}
	return n, err
}

// Query returns the QP's current attributes, with the live SQ and RQ PSNs.
func (qp *QP) Query() QPAttr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	a := qp.attr
	a.State, a.CurState = qp.state, qp.state
	a.Cap = qp.cap
	if qp.req != nil {
		a.SQPSN = uint32(qp.req.SQPSN())
	}
	if qp.resp != nil {
		a.RQPSN = uint32(qp.resp.EPSN())
	}
	qp.queryUnreliable(&a)
	return a
}

// Destroy destroys the QP: outstanding work is discarded without
// completions (ibv_destroy_qp). A UD QP still attached to a multicast
// group is not destroyed: Destroy fails with ErrInUse and the QP stays as
// it was, attached and usable, as rxe_destroy_qp refuses with EBUSY while
// the QP has groups (rxe_qp_chk_destroy, IBA o10-2.2.3); detach it first
// (QP.DetachMcast). Device.Close ends attached QPs too. After Device.Close
// or a first Destroy it fails with ErrClosed. A QP that Dial or
// CMListener.Accept set up also ends its connection, as CMConn.Close does
// (a DREQ, not awaited), unless the connection has ended already: the
// peer's side does not stay established.
func (qp *QP) Destroy() error {
	var err error
	if qp.typ == QPTypeUD {
		err = qp.dev.retireUnattached(qp)
	} else {
		err = qp.retire()
	}
	if err != nil {
		return err
	}
	qp.dev.qps.remove(qp.qpn)
	qp.pd.users.Add(-1)
	qp.sendCQ.users.Add(-1)
	qp.recvCQ.users.Add(-1)
	if qp.srq != nil {
		qp.srq.detach()
	}
	if c := qp.cm.Load(); c != nil {
		// After the teardown: the connection's end finds the QP destroyed
		// and flushes nothing to its CQs.
		c.Close()
	}
	return nil
}

// retire marks the QP destroyed and stops it (Destroy): its timers and
// engines end and it is in RESET. It fails with ErrClosed if the QP was
// destroyed already or its device closed.
func (qp *QP) retire() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead() {
		return ErrClosed
	}
	qp.destroyed = true
	qp.stopTimers()
	qp.state = QPSReset
	qp.retireEngines()
	qp.req, qp.resp = nil, nil
	qp.ureq, qp.uresp = nil, nil
	qp.syncShare()
	return nil
}

// QPCounters are a QP's counters, named after rxe's hw counters where one
// exists.
type QPCounters struct {
	RcvdPkts  uint64 // packets delivered to this QP
	SentPkts  uint64 // packets sent by this QP
	RcvdBytes uint64
	BadSource uint64 // packets from an address other than the peer's, dropped
	BadState  uint64 // packets the QP state did not accept, dropped
	// LocalDrops counts this QP's local drops, datagrams the local host
	// refused (Options.LocalDropMode); DropRetries, how many times the QP
	// sent its locally dropped datagrams again after its local-drop
	// back-off; BackoffDelay is its current local-drop back-off delay
	// (zero until the back-off first moved). HeldDropped counts the
	// datagrams the QP took back after local drops and then forgot
	// instead of sending them: those that were not ACK or NAK packets
	// once an RC QP was in ERR or its engine had failed (heldAcksOnly),
	// and all of them once the QP was destroyed, reset or closed, or a UC
	// or UD QP was in ERR.
	LocalDrops   uint64
	DropRetries  uint64
	HeldDropped  uint64
	BackoffDelay time.Duration
	Requester    requester.Counters
	Responder    responder.Counters
	// Unreliable holds the receive side's counters of a UC or UD QP (its
	// send side's are in Requester).
	Unreliable responder.UCounters
}

// Counters returns a snapshot of the QP's counters.
func (qp *QP) Counters() QPCounters {
	c := QPCounters{
		SentPkts:  qp.counter.sentPkts.Load(),
		BadSource: qp.counter.badSrc.Load(), BadState: qp.counter.badState.Load(),
		LocalDrops: qp.counter.localDrops.Load(), DropRetries: qp.counter.dropRetries.Load(),
		HeldDropped: qp.counter.heldDropped.Load(),
	}
	qp.mu.Lock()
	c.RcvdPkts, c.RcvdBytes = qp.counter.rcvdPkts, qp.counter.rcvdBytes
	c.BackoffDelay = qp.localDrop.delay
	qp.takeShare() // the window reported is the one the next packet obeys
	if qp.req != nil {
		c.Requester = qp.req.Counters()
	}
	if qp.resp != nil {
		c.Responder = qp.resp.Counters()
	}
	if qp.ureq != nil {
		c.Requester = qp.ureq.Counters()
	}
	if qp.uresp != nil {
		c.Unreliable = qp.uresp.Counters()
	}
	qp.mu.Unlock()
	return c
}
