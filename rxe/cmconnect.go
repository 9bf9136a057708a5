package rxe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
)

// Dial connects an RC QP to the RDMA CM listener at addr ("host:port",
// port being the RDMA CM port, as rdma_resolve_addr and rdma_connect take
// it), as librdmacm's active side does: it creates the QP on opts.PD,
// sends a CM REQ with RDMA CM's IP header in its private data, moves the
// QP to RTR and RTS with the peer's REP, and answers with an RTU. It
// honours ctx (deadline, cancel). The errors say what went wrong: a
// *RejectError (refused: a REJ with its reason), ErrCMTimeout (nobody
// answered), ErrUnreachable, ErrClosed (the device is or was meanwhile
// closed), or ctx's error.
func Dial(ctx context.Context, d *Device, addr string, opts CMOptions) (*CMConn, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if err := opts.defaults(d); err != nil {
		return nil, err
	}
	if len(opts.PrivateData) > packet.CMIPPrivateDataSize {
		return nil, fmt.Errorf("%w: %d bytes of private data (a REQ carries %d)", ErrInvalidArgument, len(opts.PrivateData), packet.CMIPPrivateDataSize)
	}
	to, err := resolve(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	// An ended ctx returns before the REQ goes out (resolving an IP
	// literal does not look at it): the REQ would be withdrawn by a REJ
	// at once, the peer's Accept perhaps already answering it.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	qp, err := newCMQP(&opts)
	if err != nil {
		return nil, err
	}
	if opts.Prepare != nil {
		if err := opts.Prepare(qp); err != nil {
			qp.Destroy()
			return nil, err
		}
	}
	c, err := dialQP(ctx, d, qp, to, &opts)
	if err != nil {
		qp.Destroy()
		return nil, err
	}
	return c, nil
}

// buildREQ fills the REQ of a Dial from QP qp to "to".
func buildREQ(d *Device, qp *QP, from, to netip.AddrPort, psn uint32, o *CMOptions) packet.REQ {
	req := packet.REQ{
		ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, to.Port()), LocalQPN: qp.qpn,
		ResponderResources: uint8(o.ResponderResources), InitiatorDepth: uint8(o.InitiatorDepth),
		RemoteCMResponseTimeout: o.CMResponseTimeout, LocalCMResponseTimeout: o.CMResponseTimeout,
		TransportServiceType: packet.CMTransportRC, StartingPSN: psn, RetryCount: o.RetryCnt,
		PKey: packet.DefaultPKey, PathMTU: uint8(o.MTU), RNRRetryCount: o.RNRRetry, MaxCMRetries: o.MaxCMRetries,
		SRQ: o.SRQ != nil,
		Primary: packet.CMPath{LocalLID: 0xFFFF, RemoteLID: 0xFFFF, LocalGID: packet.GIDFromAddr(from.Addr()),
			RemoteGID: packet.GIDFromAddr(to.Addr()), HopLimit: 64,
			LocalACKTimeout: reqLocalACKTimeout(d.attr.LocalCAAckDelay, o.Timeout),
			// The device's traffic class, as rdma_cm puts the id's TOS in the
			// REQ's path: a kernel peer's QP then answers with it too.
			TrafficClass: d.opts.TrafficClass,
			FlowLabel:    rdmaCMFlowLabel(from.Port(), to.Port())},
	}
	ip := packet.CMIPHeader{SrcPort: from.Port(), Src: from.Addr(), Dst: to.Addr()}
	ip.Encode(req.PrivateData[:])
	copy(req.PrivateData[packet.CMIPHeaderSize:], o.PrivateData)
	return req
}

// rdmaCMFlowLabel is the flow label rdma_cm gives the path of a RoCEv2
// connection from RDMA CM port sport to dport, which its REQ carries
// (kernel cma_get_roce_udp_flow_label: sport × 31 + dport, in 20 bits; an
// IPv6 source address's own flow label would come first, and gorxe has
// none). Kernel rxe derives a QP's UDP source port from its path's flow
// label (rxe_modify_qp), so a kernel peer's QP sends from the port a
// kernel active side would have given it.
func rdmaCMFlowLabel(sport, dport uint16) uint32 {
	return (uint32(sport)*31 + uint32(dport)) & 0xFFFFF
}

// reqLocalACKTimeout is the Local ACK Timeout of a Dial's REQ for a QP
// whose own local ACK timeout is timeout, as kernel ib_cm fills it for an
// rdma_cm id whose ACK timeout is set (rdma_set_option
// RDMA_OPTION_ID_ACK_TIMEOUT, as perftest sets -u): rdma_cm gives a RoCE
// path a packet life time of timeout − 1, or CMA_IBOE_PACKET_LIFETIME
// (16) for timeout 0 (cma_resolve_iboe_route), and ib_cm announces about
// 2 × packet life time + the CA's ACK delay (IBA 12.7.34): the larger of
// life time + 1 and the ACK delay, plus one when the other is within one
// of it, at most 31 (cm_format_req, cm_ack_timeout). A kernel passive
// side's QP takes it as its timeout unless its application set one, so
// it is never 0 (no timeout would reach that QP as the shortest one).
func reqLocalACKTimeout(caAckDelay, timeout uint8) uint8 {
	life := 16
	if timeout > 0 {
		life = int(timeout) - 1
	}
	t, delay := life+1, int(caAckDelay)
	switch {
	case t >= delay && delay >= t-1:
		t++
	case t < delay && t >= delay-1:
		t = delay + 1
	case t < delay:
		t = delay
	}
	return uint8(min(t, 31))
}

// localCMAddr is the address a Dial or a SIDR resolution sends from: the
// device's, with the RDMA CM port port, or with one of Linux's ephemeral
// range (net.ipv4.ip_local_port_range, 32768 to 60999) when port is 0, as
// rdma_cm binds an unbound id (cma_alloc_any_port).
func localCMAddr(d *Device, port uint16) netip.AddrPort {
	if port == 0 {
		port = uint16(32768 + rand.N(28232))
	}
	return netip.AddrPortFrom(d.addr, port)
}

// startActive starts an active exchange, a Dial's or a DialUD's: under
// the GSI's lock it returns ErrClosed once the CM is shut down, else calls
// start (the agent's Connect or ResolveSIDR) with the time now. An error
// of start's is returned wrapped: cm.ErrInvalid (a value the caller's
// checks let through) in ErrInvalidArgument, any other (the agent's table
// is full) in ErrNoResources. On success the new exchange's events come on
// the channel returned, and what start queued goes out as the lock is
// released.
func (g *gsi) startActive(start func(now time.Time) (cm.ID, error)) (cm.ID, chan cm.Event, error) {
	g.mu.Lock()
	if g.down {
		g.mu.Unlock()
		return 0, nil, ErrClosed
	}
	now := time.Now()
	id, err := start(now)
	if err != nil {
		g.mu.Unlock()
		if errors.Is(err, cm.ErrInvalid) {
			return 0, nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		return 0, nil, fmt.Errorf("%w: %w", ErrNoResources, err)
	}
	events := g.wait(id)
	g.step(now)
	g.unlock()
	return id, events, nil
}

// abandonActive withdraws an active exchange whose caller gives up (its
// context ended): the agent aborts it, as Agent.Abort says, and its events
// are no longer routed.
func (g *gsi) abandonActive(id cm.ID) {
	g.mu.Lock()
	_ = g.agent.Abort(time.Now(), id) // ErrUnknownID or ErrState: the exchange already ended, nothing to withdraw
	delete(g.waiters, id)
	g.step(time.Now())
	g.unlock()
}

// forgetActive stops routing the events of an active exchange that has
// ended or that no answer will reach.
func (g *gsi) forgetActive(id cm.ID) {
	g.mu.Lock()
	delete(g.waiters, id)
	g.mu.Unlock()
}

// dialQP runs the active side's exchange for a QP in INIT.
func dialQP(ctx context.Context, d *Device, qp *QP, to netip.AddrPort, o *CMOptions) (*CMConn, error) {
	from := localCMAddr(d, o.LocalPort)
	psn := rand.Uint32() & packet.PSNMask
	req := buildREQ(d, qp, from, to, psn, o)
	g := d.gsiOf()
	id, events, err := g.startActive(func(now time.Time) (cm.ID, error) { return g.agent.Connect(now, to.Addr(), &req) })
	if err != nil {
		return nil, err
	}
	c := &CMConn{QP: qp, LocalAddr: from, RemoteAddr: to, dev: d, id: id, events: events, done: make(chan struct{})}
	c.Local = ConnInfo{GID: d.GID(), UDPPort: d.port, QPN: qp.qpn, PSN: psn, MTU: o.MTU, MaxRdAtomic: o.ResponderResources}
	for {
		select {
		case <-ctx.Done():
			g.abandonActive(id)
			return nil, ctx.Err()
		case <-d.done: // the agent's timers run no more: no answer will come
			g.forgetActive(id)
			return nil, ErrClosed
		case e := <-events:
			done, err := c.activeEvent(e, o)
			if err != nil || done {
				if err != nil {
					g.forgetActive(id)
				}
				return c, err
			}
		}
	}
}

// activeEvent handles one event of a Dial in progress; it reports whether
// the connection is up.
func (c *CMConn) activeEvent(e cm.Event, o *CMOptions) (bool, error) {
	g := c.dev.gsiOf()
	switch e.Kind {
	case cm.EventREP:
		rep := e.REP
		// The READ/atomic depths are the REP's: its responder resources
		// our max_rd_atomic, its initiator depth our max_dest_rd_atomic,
		// as kernel ib_cm's active side takes them (cm_rep_handler,
		// cm_init_qp_rtr_attr, cm_init_qp_rts_attr; librdmacm's
		// ucma_process_conn_resp overrides neither). Our REQ offered
		// CMOptions' depths; a REP may answer more (librdmacm does not
		// bound an application's rdma_accept depths by the REQ's), and the
		// peer's QP then has them: ours matches it, so its READs find the
		// resources it was told of. The device's maxima bound them, where
		// kernel rxe's modify refuses a max_rd_atomic beyond
		// max_qp_rd_atom (rxe_qp_chk_attr) and the connection fails.
		c.Remote = ConnInfo{GID: netip.AddrFrom16(packet.GIDFromAddr(c.RemoteAddr.Addr())), UDPPort: c.dev.port,
			QPN: rep.LocalQPN, PSN: rep.StartingPSN, MTU: o.MTU,
			MaxRdAtomic: min(int(rep.ResponderResources), c.dev.attr.MaxQPInitRdAtom)}
		c.Local.MaxRdAtomic = min(int(rep.InitiatorDepth), c.dev.attr.MaxQPRdAtom)
		c.PrivateData = append([]byte(nil), rep.PrivateData[:]...)
		srOffers(&c.Local, &c.Remote, o)
		if err := toRTS(c.QP, c.Local, c.Remote, o, rep.RNRRetryCount, 0); err != nil {
			g.mu.Lock()
			_ = g.agent.Reject(c.id, packet.RejConsumerReject, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
			g.step(time.Now())
			g.unlock()
			return false, err
		}
		g.mu.Lock()
		err := g.agent.ConfirmREP(c.id, nil)
		g.step(time.Now())
		down := g.down
		g.unlock()
		switch {
		case err != nil && down:
			return false, ErrClosed // Close forgot the connection
		case err != nil:
			// A REJ that came while the QP moved to RTS (the passive side
			// gave up after its REP) ended the connection; its event was
			// queued as the agent forgot it, and it is the peer's refusal,
			// as kernel rdma_cm reports RDMA_CM_EVENT_REJECTED then.
			if rej := c.queuedReject(); rej != nil {
				return false, rej
			}
			return false, fmt.Errorf("rxe: the connection ended before its REP was confirmed: %w", err)
		}
		c.QP.cm.Store(c)
		go c.watch()
		return true, nil
	case cm.EventRejected:
		return false, rejectError(e)
	case cm.EventTimeout:
		return false, ErrCMTimeout
	}
	return false, nil
}

// queuedReject takes the events queued for c without waiting and returns
// the peer's REJ among them as a *RejectError, or nil if there is none.
func (c *CMConn) queuedReject() *RejectError {
	for {
		select {
		case e := <-c.events:
			if e.Kind == cm.EventRejected {
				return rejectError(e)
			}
		default:
			return nil
		}
	}
}

// rejectError is the error of a REJ event: its reason and private data.
func rejectError(e cm.Event) *RejectError {
	return &RejectError{Reason: e.Reason, PrivateData: e.PrivateData}
}

// CMListener takes the RDMA CM connection requests for one port (an
// rdma_listen on the device's address).
type CMListener struct {
	d       *Device
	port    uint16
	service uint64
	opts    CMOptions
	reqs    chan cm.Event
	closed  chan struct{}
	ctr     listenerCounters
	// newQP creates each accepted connection's QP: newCMQP (tests make it
	// fail, for an error of this side's).
	newQP func(*CMOptions) (*QP, error)
}

// listenerCounters are a CMListener's counters, updated without the GSI's
// lock by Accept.
type listenerCounters struct {
	accepted, refused, dropped, withdrawn, timedOut, abandoned, failed, declined atomic.Uint64
}

// CMListenerCounters count what became of a listener's connection
// requests.
type CMListenerCounters struct {
	// Accepted counts the connections Accept returned.
	Accepted uint64
	// Refused counts the requests rejected before an Accept took them:
	// not for an RC connection, without RDMA CM's IP header, or whose
	// header names another destination than the device's address
	// (consumer reject).
	Refused uint64
	// Dropped counts the REQs that found the backlog full, dropped
	// unanswered (each retransmission of one counts again).
	Dropped uint64
	// Withdrawn counts the requests the peer ended before they were
	// established: its REJ (it gave up while the request was queued or
	// after our REP, or refused our REP) or its DREQ before its RTU.
	Withdrawn uint64
	// TimedOut counts the requests whose RTU did not come within the
	// REP's retries (the peer got a REJ with reason timeout).
	TimedOut uint64
	// Abandoned counts the requests given up because Accept's context
	// ended while it waited for their RTU (the peer got a REJ).
	Abandoned uint64
	// Failed counts the requests this side could not set up, each
	// reported by an *AcceptError.
	Failed uint64
	// Declined counts the requests AcceptFunc's choose function refused,
	// each rejected (consumer reject) and reported by an *AcceptError.
	Declined uint64
}

// AcceptError is Accept's report of a connection request that this side
// could not set up or refused: its QP could not be created (a CMOptions
// resource exhausted, ErrNoResources), prepared (CMOptions.Prepare) or
// moved to RTR and RTS, or AcceptFunc's choose function refused it or
// chose options the device does not take. The request was rejected (no
// resources, or consumer reject) and the listener still serves: call
// Accept again. Err says what failed.
type AcceptError struct {
	// Remote is the requester's address and RDMA CM port.
	Remote netip.AddrPort
	// Err is what failed: CreateQP's, Prepare's or Modify's error, or
	// the choose function's.
	Err error
	// declined: the choose function refused the request (counted as
	// declined, not failed).
	declined bool
}

// Error describes the failed request.
func (e *AcceptError) Error() string {
	return fmt.Sprintf("rxe: connection request from %v: %v", e.Remote, e.Err)
}

// Unwrap returns the cause.
func (e *AcceptError) Unwrap() error { return e.Err }

// ListenCM listens for RDMA CM connection requests to the device's
// address on port (the service ID of the TCP port space, RDMA_PS_TCP).
// Accept creates each connection's QP with opts (AcceptWith with others
// for one connection, AcceptFunc with those chosen for each request). A request while no Accept is waiting stays queued
// (up to 64); the peer's CM is told to wait (MRA) if it asks again. One
// beyond the backlog is dropped unanswered and forgotten, as kernel
// rdma_cm drops one beyond its listener's backlog: the peer's CM resends
// its REQ on its response timeout, and once a slot is free the resent one
// is queued as a new request. One its peer withdraws meanwhile
// (a REJ: its Dial gave up, or its REQ's retries ran out) leaves the queue
// at once and is counted as withdrawn.
// A request that is not for an RC connection, lacks RDMA CM's IP header
// or whose header names another destination than the device's address
// (or names it in the other IP version) is rejected (consumer reject) and
// never queued, as kernel rdma_cm rejects one before its consumer sees it.
func (d *Device) ListenCM(port uint16, opts CMOptions) (*CMListener, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if err := opts.acceptDefaults(d); err != nil {
		return nil, err
	}
	l := &CMListener{d: d, port: port, service: packet.RDMACMServiceID(packet.RDMACMProtoTCP, port), opts: opts,
		reqs: make(chan cm.Event, 64), closed: make(chan struct{}), newQP: newCMQP}
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.agent.Listen(l.service); err != nil {
		return nil, fmt.Errorf("%w: port %d: %w", ErrInvalidArgument, port, err)
	}
	g.listeners[l.service] = l
	return l, nil
}

// acceptDefaults is defaults for the options of an accepted connection,
// whose private data goes in the REP.
func (o *CMOptions) acceptDefaults(d *Device) error {
	if err := o.defaults(d); err != nil {
		return err
	}
	if len(o.PrivateData) > packet.REPPrivateDataSize {
		return fmt.Errorf("%w: %d bytes of private data (a REP carries %d)", ErrInvalidArgument, len(o.PrivateData), packet.REPPrivateDataSize)
	}
	return nil
}

// Addr returns the address and port the listener serves.
func (l *CMListener) Addr() netip.AddrPort { return netip.AddrPortFrom(l.d.addr, l.port) }

// Counters returns a snapshot of the listener's counters.
func (l *CMListener) Counters() CMListenerCounters {
	c := &l.ctr
	return CMListenerCounters{Accepted: c.accepted.Load(), Refused: c.refused.Load(), Dropped: c.dropped.Load(), Withdrawn: c.withdrawn.Load(),
		TimedOut: c.timedOut.Load(), Abandoned: c.abandoned.Load(), Failed: c.failed.Load(), Declined: c.declined.Load()}
}

// Close stops listening: later requests, and those queued that no Accept
// took, are rejected with "invalid service ID", and Accepts waiting for a
// request return ErrClosed (as they do once the device is closed). An
// Accept already answering a request finishes it; its next call returns
// ErrClosed.
func (l *CMListener) Close() error {
	g := l.d.gsiOf()
	return closeListener(g, l.closed, l.reqs, func() {
		g.agent.Unlisten(l.service)
		delete(g.listeners, l.service)
	}, func(e cm.Event) {
		delete(g.backlog, e.ID)
		_ = g.agent.Reject(e.ID, packet.RejInvalidServiceID, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
	})
}

// closeListener closes a CMListener or UDListener under g's lock: it
// returns ErrClosed if closed is closed already, else closes it, calls
// unlisten to stop new requests from coming, calls answer for each
// request left in reqs, and steps g's agent so that the answers go out
// (when g's lock is released).
func closeListener[T any](g *gsi, closed chan struct{}, reqs <-chan T, unlisten func(), answer func(T)) error {
	g.mu.Lock()
	defer g.unlock()
	select {
	case <-closed:
		return ErrClosed
	default:
	}
	close(closed)
	unlisten()
	for {
		select {
		case q := <-reqs:
			answer(q)
		default:
			g.step(time.Now())
			return nil
		}
	}
}

// Accept waits for a connection request and accepts it: it creates the
// QP, moves it to RTR and RTS with the REQ's values, sends the REP (with
// the listener's private data) and waits for the RTU.
//
// A request that fails by the peer's doing or the network's is not
// Accept's error, as a TCP connection reset before accept(2) is not
// net.Listener's: its peer withdrew it (a REJ) while it was queued or
// after our REP, disconnected before its RTU, or its RTU never came
// within the REP's retries. Accept counts it (Counters) and serves the
// next request. Its errors are:
//   - ErrClosed: the listener or the device is closed; no request will
//     come. A device that closes while Accept sets up a request's QP
//     gives ErrClosed too, not an *AcceptError.
//   - ctx.Err(): ctx ended. If it ended while Accept waited for an RTU, the
//     peer gets a REJ, which ends its connection; if it ended while
//     Accept set up the request's QP, before the REP, the request is
//     rejected (consumer reject). A ctx already ended at the call takes
//     no request, which stays queued for the next call.
//   - *AcceptError: this side could not set up one request's QP; that
//     request was rejected and the listener still serves.
//
// An accept loop therefore reads:
//
//	for {
//		c, err := l.Accept(ctx)
//		var ae *rxe.AcceptError
//		switch {
//		case errors.As(err, &ae):
//			log.Print(err) // one request failed here; serve the next
//			continue
//		case err != nil:
//			return err // ErrClosed or ctx's error
//		}
//		go serve(c)
//	}
func (l *CMListener) Accept(ctx context.Context) (*CMConn, error) {
	return l.acceptWith(ctx, func(*CMRequest) (CMOptions, error) { return l.opts, nil })
}

// AcceptWith is Accept with opts in place of the options given to ListenCM
// for this one connection: its QP gets opts' PD, CQs, SRQ and capabilities
// and the REP opts' private data, as librdmacm's server creates each
// request's QP (rdma_create_qp) before rdma_accept. A server that gives
// each connection CQs of its own, on its own completion vector, passes
// them here. Options that are not valid for the listener's device are
// refused (ErrInvalidArgument) before a request is taken, so the request
// stays queued for the next call.
func (l *CMListener) AcceptWith(ctx context.Context, opts CMOptions) (*CMConn, error) {
	if l.d.closed.Load() {
		return nil, ErrClosed
	}
	if err := opts.acceptDefaults(l.d); err != nil {
		return nil, err
	}
	return l.acceptWith(ctx, func(*CMRequest) (CMOptions, error) { return opts, nil })
}

// CMRequest is a connection request as AcceptFunc shows it before it is
// answered, as librdmacm's connect request event (rdma_get_request)
// shows it: who asks, and what its REQ offers.
type CMRequest struct {
	// Remote is the requester's IP address (its RDMA device's, where its
	// REQ came from) and RDMA CM source port (RDMA CM's IP header in the
	// REQ's private data): the CMConn's RemoteAddr once accepted. A peer's
	// connections come from one address, each from a port of its own.
	Remote netip.AddrPort
	// PrivateData is the REQ's private data after RDMA CM's IP header, as
	// the wire carries it (zero-padded): the CMConn's PrivateData once
	// accepted.
	PrivateData []byte
	// ResponderResources and InitiatorDepth are the REQ's: how many READ
	// and atomic requests the peer's QP takes at once, and how many it
	// issues. The connection uses at most these (IBA 12.7.29, 12.7.30).
	ResponderResources, InitiatorDepth int
	// RetryCount and RNRRetryCount are the REQ's, which the accepted QP
	// takes as its own (IBA 12.7.38, 12.7.40).
	RetryCount, RNRRetryCount uint8
}

// AcceptFunc is Accept with the options chosen for each request: it waits
// for a request, passes it to choose, and accepts it with the options
// choose returns, as a librdmacm server reads the connect request
// (rdma_get_request) before it calls rdma_accept or rdma_reject. A server
// whose options depend on who asks (an offer one peer made out of band:
// CMOptions.PeerSelectiveRepeat, PeerRecvBuffer) gives them to that
// peer's requests only.
//
// If choose returns an error, the request is rejected, as rdma_reject
// rejects it: a REJ with reason consumer reject, carrying the
// PrivateData of a *RejectError in the error's chain (at most 148 bytes;
// its Reason, if set, must be packet.RejConsumerReject), and AcceptFunc
// returns an *AcceptError whose Err is choose's error (counted as
// declined). Options choose returns that the listener's device does not
// take are refused as AcceptWith would refuse them, but the request,
// already taken, is rejected (consumer reject) and reported by an
// *AcceptError with ErrInvalidArgument, as is a *RejectError that a REJ
// cannot carry (then sent without private data).
//
// choose runs on AcceptFunc's goroutine; meanwhile the peer's CM, if it
// sends its REQ again, is told to wait (MRA). Its request stays the one
// being answered if the listener is closed meanwhile. AcceptFunc's other
// errors are Accept's.
func (l *CMListener) AcceptFunc(ctx context.Context, choose func(*CMRequest) (CMOptions, error)) (*CMConn, error) {
	if choose == nil {
		return nil, fmt.Errorf("%w: AcceptFunc without a choose function", ErrInvalidArgument)
	}
	return l.acceptWith(ctx, choose)
}

// acceptWith is Accept with options chosen by choose for each request.
func (l *CMListener) acceptWith(ctx context.Context, choose func(*CMRequest) (CMOptions, error)) (*CMConn, error) {
	for {
		if l.d.closed.Load() {
			return nil, ErrClosed
		}
		// An ended ctx returns before a request is taken: the select below
		// picks among ready cases at random, and a request taken with it
		// would get a REP and at once the REJ of an abandoned accept
		// (passiveWait), lost to the next Accept.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var e cm.Event
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.closed:
			return nil, ErrClosed
		case <-l.d.done:
			return nil, ErrClosed
		case e = <-l.reqs:
		}
		c, err := l.accept(ctx, e, choose)
		var rej *RejectError
		var ae *AcceptError
		switch {
		case err == nil:
			l.ctr.accepted.Add(1)
			return c, nil
		case errors.As(err, &ae) && ae.declined:
			l.ctr.declined.Add(1)
			return nil, err
		case errors.As(err, &ae):
			l.ctr.failed.Add(1)
			return nil, err
		case errors.Is(err, ErrClosed):
			return nil, err
		case errors.Is(err, errWithdrawn), errors.As(err, &rej):
			l.ctr.withdrawn.Add(1)
		case errors.Is(err, ErrCMTimeout):
			l.ctr.timedOut.Add(1)
		default: // ctx ended while accept waited for the RTU
			l.ctr.abandoned.Add(1)
			return nil, err
		}
	}
}

// unqueue removes the REQ of connection id from the backlog, keeping the
// order of the others, and reports whether it was there (caller holds the
// GSI's lock, as every sender to reqs does, so putting the others back
// cannot block; an Accept may meanwhile take one, the first).
func (l *CMListener) unqueue(id cm.ID) bool {
	found := false
	kept := make([]cm.Event, 0, len(l.reqs))
	for n := len(l.reqs); n > 0; n-- {
		select {
		case e := <-l.reqs:
			if e.ID == id {
				found = true
			} else {
				kept = append(kept, e)
			}
		default:
		}
	}
	for _, e := range kept {
		l.reqs <- e
	}
	return found
}

// errWithdrawn is accept's answer for a REQ whose connection the peer ended
// before it was established: a REJ or the REQ's timeout ended it while it
// was queued, or the peer sent a DREQ before its RTU. Accept takes the
// next one.
var errWithdrawn = errors.New("rxe: the connection request was withdrawn")

// accept answers one REQ with the options choose gives it.
func (l *CMListener) accept(ctx context.Context, e cm.Event, choose func(*CMRequest) (CMOptions, error)) (*CMConn, error) {
	d, req := l.d, e.REQ
	g := d.gsiOf()
	g.mu.Lock()
	delete(g.backlog, e.ID) // taken: a withdrawal from now on is agent.Accept's to find
	g.mu.Unlock()
	reject := func(r packet.REJReason) {
		g.mu.Lock()
		_ = g.agent.Reject(e.ID, r, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
		g.step(time.Now())
		g.unlock()
	}
	var ip packet.CMIPHeader
	if err := ip.Decode(req.PrivateData[:]); err != nil {
		// dispatch queues only REQs with the header (rdmaCMRequest).
		reject(packet.RejConsumerReject)
		return nil, fmt.Errorf("%w: a REQ without RDMA CM's IP header: %w", errWithdrawn, err)
	}
	remote := netip.AddrPortFrom(e.Peer, ip.SrcPort)
	o, err := choose(&CMRequest{Remote: remote, PrivateData: append([]byte(nil), req.PrivateData[packet.CMIPHeaderSize:]...),
		ResponderResources: int(req.ResponderResources), InitiatorDepth: int(req.InitiatorDepth),
		RetryCount: req.RetryCount, RNRRetryCount: req.RNRRetryCount})
	if err != nil {
		data, rerr := rejectData(err)
		g.mu.Lock()
		_ = g.agent.Reject(e.ID, packet.RejConsumerReject, data) // ErrUnknownID or ErrState: the peer withdrew it meanwhile, nothing to answer
		g.step(time.Now())
		g.unlock()
		if rerr != nil {
			err = rerr
		}
		return nil, &AcceptError{Remote: remote, Err: err, declined: true}
	}
	if err := o.acceptDefaults(d); err != nil {
		reject(packet.RejConsumerReject)
		return nil, &AcceptError{Remote: remote, Err: err}
	}
	qp, err := l.newQP(&o)
	if err != nil {
		// Consumer reject, not "no resources": under rdma_cm the REQ has
		// been handed to the application (with an MRA) before it creates
		// the QP, and an application that cannot refuses the request
		// with rdma_reject or rdma_destroy_id, both of which send
		// IB_CM_REJ_CONSUMER_DEFINED (cm_destroy_id in MRA_REQ_SENT).
		reject(packet.RejConsumerReject)
		if d.closed.Load() {
			return nil, ErrClosed // the device closed under the setup: no request will come, as Dial says
		}
		return nil, &AcceptError{Remote: remote, Err: err}
	}
	if o.Prepare != nil {
		if err := o.Prepare(qp); err != nil {
			reject(packet.RejConsumerReject)
			qp.Destroy()
			if d.closed.Load() {
				return nil, ErrClosed
			}
			return nil, &AcceptError{Remote: remote, Err: err}
		}
	}
	// The REQ's path MTU, as kernel ib_cm gives the passive QP
	// (cm_init_qp_rtr_attr), bounded only by what the device's QPs take:
	// the REP carries no MTU, so the active side sends packets of the one
	// it asked for, and a smaller one here would refuse them.
	o.MTU = mtuOf(req.PathMTU, d.activeMTU)
	o.RetryCnt = req.RetryCount
	psn := rand.Uint32() & packet.PSNMask
	c := &CMConn{QP: qp, LocalAddr: netip.AddrPortFrom(d.addr, l.port), RemoteAddr: remote,
		PrivateData: append([]byte(nil), req.PrivateData[packet.CMIPHeaderSize:]...), dev: d, id: e.ID, done: make(chan struct{})}
	// The READ/atomic depths: the REQ's initiator depth bounds our
	// responder resources (max_dest_rd_atomic), its responder resources
	// our initiator depth (max_rd_atomic), as kernel ib_cm reads a REQ
	// (cm_req_handler) and as librdmacm's rdma_accept bounds them when
	// the application leaves them to it (RDMA_MAX_RESP_RES,
	// RDMA_MAX_INIT_DEPTH) and perftest's server
	// (rdma_cm_connection_request_handler) does; the listener's options
	// bound them in place of the device's maxima. A 0 stays 0: a REQ
	// whose QP issues no READ gets a QP that takes none.
	c.Local = ConnInfo{GID: d.GID(), UDPPort: d.port, QPN: qp.qpn, PSN: psn, MTU: o.MTU,
		MaxRdAtomic: min(o.ResponderResources, int(req.InitiatorDepth))}
	c.Remote = ConnInfo{GID: netip.AddrFrom16(packet.GIDFromAddr(e.Peer)), UDPPort: d.port, QPN: req.LocalQPN,
		PSN: req.StartingPSN, MTU: o.MTU, MaxRdAtomic: min(int(req.ResponderResources), o.InitiatorDepth)}
	srOffers(&c.Local, &c.Remote, &o)
	// The REQ's path gives the traffic class, as the kernel's CM builds
	// the passive QP's address from it (an rdma_cm id's TOS on the
	// active side).
	if err := toRTS(qp, c.Local, c.Remote, &o, req.RNRRetryCount, req.Primary.TrafficClass); err != nil {
		reject(packet.RejConsumerReject)
		qp.Destroy()
		if d.closed.Load() {
			return nil, ErrClosed
		}
		return nil, &AcceptError{Remote: remote, Err: err}
	}
	rep := packet.REP{LocalQPN: qp.qpn, StartingPSN: psn, ResponderResources: uint8(c.Local.MaxRdAtomic),
		InitiatorDepth: uint8(c.Remote.MaxRdAtomic), TargetACKDelay: d.attr.LocalCAAckDelay, RNRRetryCount: o.RNRRetry,
		SRQ: o.SRQ != nil}
	copy(rep.PrivateData[:], o.PrivateData)
	g.mu.Lock()
	now := time.Now()
	c.events = g.wait(e.ID)
	switch {
	case g.down:
		err = ErrClosed
	case ctx.Err() != nil:
		// Ended while the QP was set up: the request is refused as the
		// consumer's (kernel cm_destroy_id rejects a REQ received so),
		// not answered with a REP that Abort's REJ would at once withdraw.
		_ = g.agent.Reject(e.ID, packet.RejConsumerReject, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
		err = ctx.Err()
	default:
		err = g.agent.Accept(now, e.ID, &rep)
		switch {
		case errors.Is(err, cm.ErrUnknownID):
			err = errWithdrawn // a REJ or the REQ's timeout ended it while queued
		case err != nil: // ErrState: only a REQ received or MRA sent is accepted, and the REQ's was
			err = &AcceptError{Remote: remote, Err: err}
		}
	}
	g.step(now)
	g.unlock()
	if err == nil {
		err = c.passiveWait(ctx)
	}
	if err != nil {
		g.mu.Lock()
		if !d.closed.Load() {
			// Given up in REP sent (ctx ended): a REJ tells the peer, whose
			// Dial may have succeeded already (IBA 12.9.8); established
			// meanwhile (the RTU came as ctx ended): a DREQ. In any other
			// state the connection already ended: ErrUnknownID or ErrState.
			_ = g.agent.Abort(time.Now(), e.ID)
			g.step(time.Now())
		}
		delete(g.waiters, e.ID)
		g.unlock()
		qp.Destroy()
		return nil, err
	}
	qp.cm.Store(c)
	go c.watch()
	return c, nil
}

// rejectData is the private data of the REJ for a choose function's error
// err: a *RejectError's in its chain, or none. A *RejectError a REJ
// cannot carry (longer private data, or a reason other than consumer
// reject, the only one rdma_reject sends) gives none and the error
// saying why.
func rejectData(err error) ([]byte, error) {
	var rej *RejectError
	if !errors.As(err, &rej) {
		return nil, nil
	}
	switch {
	case len(rej.PrivateData) > packet.REJPrivateDataSize:
		return nil, fmt.Errorf("%w: %d bytes of REJ private data (a REJ carries %d), the REJ went without: %w",
			ErrInvalidArgument, len(rej.PrivateData), packet.REJPrivateDataSize, err)
	case rej.Reason != 0 && rej.Reason != packet.RejConsumerReject:
		return nil, fmt.Errorf("%w: REJ reason %v (a consumer's REJ is a consumer reject), the REJ went as consumer reject without private data: %w",
			ErrInvalidArgument, rej.Reason, err)
	}
	return rej.PrivateData, nil
}

// passiveWait waits for the RTU of an accepted connection, ctx or the
// device's Close.
func (c *CMConn) passiveWait(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.dev.done:
			return ErrClosed
		case e := <-c.events:
			switch e.Kind {
			case cm.EventEstablished:
				return nil
			case cm.EventRejected:
				return rejectError(e)
			case cm.EventTimeout:
				return ErrCMTimeout
			case cm.EventDisconnect:
				return fmt.Errorf("%w: the peer disconnected before its RTU", errWithdrawn)
			}
		}
	}
}
