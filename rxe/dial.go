package rxe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
)

// Errors of Dial and Accept besides *RejectError.
var (
	// ErrCMTimeout: the peer's CM did not answer within the retries.
	ErrCMTimeout = errors.New("rxe: connection manager timed out")
	// ErrUnreachable: the address cannot be reached from this device (it
	// does not resolve, or is of the other IP family).
	ErrUnreachable = errors.New("rxe: address unreachable")
)

// RejectError is the peer's refusal of a connection (a CM REJ): Reason
// says why (packet.RejInvalidServiceID: nobody listens on that port;
// packet.RejConsumerReject: the application refused), PrivateData is the
// REJ's without its trailing zeros (the wire carries 148 bytes and no
// length). A choose function of CMListener.AcceptFunc returns one to
// refuse a request with private data in its REJ.
type RejectError struct {
	Reason      packet.REJReason
	PrivateData []byte
}

// Error describes the rejection.
func (e *RejectError) Error() string {
	return fmt.Sprintf("rxe: connection rejected by the peer: %v (%d)", e.Reason, uint16(e.Reason))
}

// CMOptions are the resources and parameters of a connection set up by
// Dial or accepted by a CMListener. PD and CQ are required, and they, the
// receive CQ and the SRQ must belong to the device that dials or listens;
// zero values elsewhere take the defaults of rdma_cm and perftest.
type CMOptions struct {
	PD     *PD
	SendCQ *CQ // also the receive CQ unless RecvCQ is set
	RecvCQ *CQ
	SRQ    *SRQ
	Cap    QPCap // default: 128 send and receive WRs, 1 SGE each
	SigAll bool
	Access AccessFlags // default: local write, remote read, write and atomic
	// MTU is Dial's path MTU, the REQ's (default and at most the device's
	// active MTU); an accepted connection takes the REQ's instead, at most
	// the device's active MTU, as kernel ib_cm has the passive side do.
	MTU MTU
	// ResponderResources and InitiatorDepth bound outstanding READ and
	// atomic requests (default 16 each; Explicit makes 0 the value 0: the
	// QP takes or issues none, as the rdma_conn_param of a librdmacm
	// application that does no READs carries, perftest's WRITE and SEND
	// tests' among them). A Dial's REQ offers them and its QP takes what
	// the REP answers, as kernel ib_cm's active side does (the REP's
	// initiator depth its responder resources, its responder resources
	// its initiator depth; at most the device's maxima); an accepted QP
	// takes the smaller of them and the REQ's offer, which its REP
	// carries. A 0 stays 0.
	ResponderResources, InitiatorDepth int
	Timeout                            uint8 // the QP's local ACK timeout exponent; default 14 (a Dial's REQ announces what kernel ib_cm would for it: 16 for 14, 17 for 0)
	RetryCnt, RNRRetry                 uint8 // default 7, 7
	// Explicit marks the fields among Timeout, RetryCnt, RNRRetry,
	// ResponderResources and InitiatorDepth (QPAttrTimeout,
	// QPAttrRetryCnt, QPAttrRNRRetry, QPAttrMaxDestRdAtomic,
	// QPAttrMaxQPRdAtomic) whose zero is the value 0 rather than the
	// default: a Timeout of 0 is no local ACK timeout (the requester never
	// times out), a RetryCnt of 0 fails the QP at the first timeout, an
	// RNRRetry of 0 at the first RNR NAK, a ResponderResources or
	// InitiatorDepth of 0 no READ or atomic in that direction. The REQ
	// carries them as given. Other bits are refused with
	// ErrInvalidArgument. A listener's QPs take the retry count and RNR
	// retry count of each REQ, as the IBA's CM has the passive side do.
	Explicit QPAttrMask
	// CMResponseTimeout is the CM response timeout exponent announced in
	// the REQ (default 20, about 4.3 s, as rdma_cm); MaxCMRetries the REQ,
	// REP and DREQ retries (default 15).
	CMResponseTimeout, MaxCMRetries uint8
	// PrivateData goes to the peer: at most 56 bytes in a REQ (after RDMA
	// CM's IP header), 196 in a REP.
	PrivateData []byte
	// LocalPort is the RDMA CM source port of a Dial; 0 picks one.
	LocalPort uint16
	// PeerRecvBuffer and PeerRecvSockets are the receive buffer and
	// socket count a gorxe peer announced out of band, undivided
	// (ConnInfo.RecvBuffer), given to the QP before RTS
	// (QP.SetPeerReceiveBuffer); zero: none, the wire as without. The
	// device divides the buffer among its QPs whose packets reach one
	// socket of the peer, by the peer QPN the connection learns.
	PeerRecvBuffer, PeerRecvSockets int
	// SelectiveRepeat is this end's offer of selective repeat, told to the
	// peer out of band, and PeerSelectiveRepeat the peer's offer learned
	// out of band (rxectl carries both in its exchange before the data
	// QPs connect); the connection uses it only when both are set, with
	// OOOLimit as this end's out-of-order buffer (QPAttr.OOOLimit: 0 for
	// the default, at most MaxOOOLimit). The
	// CM's REQ and REP carry no offer: their private data belongs to the
	// application (a librdmacm peer reads it), so without an out-of-band
	// exchange the connection is go-back-N, as with any RoCE peer.
	SelectiveRepeat, PeerSelectiveRepeat bool
	OOOLimit                             int
	// Prepare, when set, is called with the connection's QP once it is
	// created and in INIT, before the REQ (Dial) or the REP (an accept)
	// goes out: the place to post the receives for the peer's first
	// SENDs, which can come as soon as the peer's QP is in RTS (an
	// accepting peer's before our RTU reaches it), as a librdmacm
	// application posts them between rdma_create_qp and rdma_connect or
	// rdma_accept. It must leave the QP's state alone. Its error ends the
	// setup and the QP is destroyed (its receives with it, completing
	// nothing): Dial returns the error before any REQ goes out; an accept
	// rejects the request (consumer reject) and returns the error in an
	// *AcceptError.
	Prepare func(*QP) error
}

// cmExplicit are the bits CMOptions.Explicit may have.
const cmExplicit = QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxDestRdAtomic | QPAttrMaxQPRdAtomic

func (o *CMOptions) defaults(d *Device) error {
	if o.PD == nil || o.SendCQ == nil {
		return fmt.Errorf("%w: CMOptions needs a PD and a CQ", ErrInvalidArgument)
	}
	if o.RecvCQ == nil {
		o.RecvCQ = o.SendCQ
	}
	// The QP is created on the PD's device while the CM announces d's GID:
	// every resource must be d's.
	if o.PD.dev != d || o.SendCQ.dev != d || o.RecvCQ.dev != d || o.SRQ != nil && o.SRQ.dev != d {
		return fmt.Errorf("%w: CMOptions has a PD, CQ or SRQ of another device than %s", ErrInvalidArgument, d.Name())
	}
	// Each of these goes on the wire in a field of a few bits (the REQ,
	// IBA 12.6.5) and to the QP: a wider value would be cut there and
	// refused by Modify only after the REQ or REP went out.
	switch {
	case o.Timeout > 31 || o.CMResponseTimeout > 31:
		return fmt.Errorf("%w: CMOptions timeout %d, CM response timeout %d (at most 31)", ErrInvalidArgument, o.Timeout, o.CMResponseTimeout)
	case o.Explicit&^cmExplicit != 0:
		return fmt.Errorf("%w: CMOptions.Explicit has %v (only TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_DEST_RD_ATOMIC and MAX_QP_RD_ATOMIC may be)",
			ErrInvalidArgument, o.Explicit&^cmExplicit)
	case o.RetryCnt > 7 || o.RNRRetry > 7:
		return fmt.Errorf("%w: CMOptions retry count %d, RNR retry %d (at most 7)", ErrInvalidArgument, o.RetryCnt, o.RNRRetry)
	case o.MaxCMRetries > 15:
		return fmt.Errorf("%w: CMOptions CM retries %d (at most 15)", ErrInvalidArgument, o.MaxCMRetries)
	case o.ResponderResources < 0 || o.InitiatorDepth < 0:
		return fmt.Errorf("%w: CMOptions responder resources %d, initiator depth %d", ErrInvalidArgument, o.ResponderResources, o.InitiatorDepth)
	// The QP's SetPeerReceiveBuffer and Modify (checkSelectiveRepeat, below)
	// would refuse these only once a request was taken or a REQ sent.
	case o.PeerRecvBuffer < 0 || o.PeerRecvSockets < 0:
		return fmt.Errorf("%w: CMOptions peer receive buffer %d bytes, %d sockets", ErrInvalidArgument, o.PeerRecvBuffer, o.PeerRecvSockets)
	}
	if err := checkOOOLimit("CMOptions out-of-order buffer", o.OOOLimit); err != nil {
		return err
	}
	if o.Cap.MaxSendWR == 0 {
		o.Cap.MaxSendWR = 128
	}
	if o.Cap.MaxRecvWR == 0 && o.SRQ == nil {
		o.Cap.MaxRecvWR = 128
	}
	// Checked here, not first by every CreateQP of an Accept (each would
	// fail as an AcceptError) or after a Dial's REQ is built.
	if err := o.Cap.check(o.SRQ != nil); err != nil {
		return fmt.Errorf("CMOptions.Cap: %w", err)
	}
	if o.Access == 0 {
		o.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if o.MTU == 0 || o.MTU > d.activeMTU {
		o.MTU = d.activeMTU
	}
	setDefault := func(p *uint8, v uint8) {
		if *p == 0 {
			*p = v
		}
	}
	o.Explicit.orDefault(QPAttrTimeout, &o.Timeout, 14)
	o.Explicit.orDefault(QPAttrRetryCnt, &o.RetryCnt, 7)
	o.Explicit.orDefault(QPAttrRNRRetry, &o.RNRRetry, 7)
	setDefault(&o.CMResponseTimeout, 20)
	setDefault(&o.MaxCMRetries, 15)
	if o.ResponderResources == 0 && o.Explicit&QPAttrMaxDestRdAtomic == 0 {
		o.ResponderResources = 16
	}
	if o.InitiatorDepth == 0 && o.Explicit&QPAttrMaxQPRdAtomic == 0 {
		o.InitiatorDepth = 16
	}
	o.ResponderResources = min(o.ResponderResources, d.attr.MaxQPRdAtom, 255)
	o.InitiatorDepth = min(o.InitiatorDepth, d.attr.MaxQPInitRdAtom, 255)
	return nil
}

// CMConn is an RC connection set up by the communication manager.
type CMConn struct {
	// QP is the connected RC QP, in RTS.
	QP *QP
	// Local and Remote describe the two ends as the out-of-band exchange
	// would (GID, UDP port, QPN, first PSN, MTU, READ/atomic depth).
	Local, Remote ConnInfo
	// LocalAddr and RemoteAddr are the IP addresses and RDMA CM ports.
	LocalAddr, RemoteAddr netip.AddrPort
	// PrivateData is what the peer sent: the REP's private data (Dial) or
	// the REQ's after its IP header (Accept), as the wire carries it.
	PrivateData []byte

	dev    *Device
	id     cm.ID
	events chan cm.Event
	done   chan struct{}
	once   sync.Once
	err    error // why the connection ended (nil, ErrClosed or ErrCMTimeout), as Disconnect reports it; set before done closes
	// closeGap, when set (tests), runs in Close between sending the DREQ
	// and ending the connection.
	closeGap func()
}

// Done is closed when the connection ends: the peer disconnected (the QP
// is then in ERR), Disconnect returned, Close was called, or the device
// was closed.
func (c *CMConn) Done() <-chan struct{} { return c.done }

// watch follows the connection's events once it is established: a DREQ
// from the peer, or a REJ, moves the QP to ERR and closes Done; so does
// Device.Close (the QP is then already in ERR). It returns once Done is
// closed by anyone: end forgets the connection's waiter, so no event
// comes after that (a Disconnect whose context ended first).
func (c *CMConn) watch() {
	for {
		select {
		case <-c.done:
			return
		case <-c.dev.done:
			c.end(ErrClosed)
			return
		case e := <-c.events:
			switch e.Kind {
			case cm.EventDisconnected:
				if e.Reason == packet.RejTimeout {
					// Our DREQ's retries ran out with no DREP (kernel
					// rdma_cm: DISCONNECTED with -ETIMEDOUT).
					c.end(ErrCMTimeout)
					return
				}
				c.end(nil)
				return
			case cm.EventDisconnect, cm.EventRejected, cm.EventTimeout:
				c.end(nil)
				return
			}
		}
	}
}

// end moves the QP to ERR, forgets the connection's waiter and closes Done,
// once; err is why it ended (nil, ErrClosed, or ErrCMTimeout for a DREQ
// the peer never answered), as Disconnect reports it.
func (c *CMConn) end(err error) {
	c.once.Do(func() {
		c.err = err
		_ = c.QP.Modify(&QPAttr{State: QPSErr}, QPAttrState) // fails only for a QP already destroyed or closed with its device, or reset by the application (RESET does not go to ERR), none of which has anything left to flush
		g := c.dev.gsiOf()
		g.mu.Lock()
		delete(g.waiters, c.id)
		g.mu.Unlock()
		close(c.done)
	})
}

// Disconnect ends the connection (a CM DREQ) and waits for the peer's DREP
// or ctx; the QP is then in ERR, its outstanding work requests flushed.
// A REJ from a peer that never saw the connection established (its RTU
// was lost and it gave up) ends the wait too, with nil: the peer ended
// the connection (kernel rdma_cm reports RDMA_CM_EVENT_REJECTED there).
// Destroying the QP is the caller's. If the peer never answers, the DREQ's
// retries run out and it returns ErrCMTimeout, the connection ended all
// the same. Once the device is closed (before or during the wait), or the
// connection closed by Close, it returns ErrClosed; for a connection that
// has already ended it returns at once what its end was (nil if the peer
// ended it).
//
// ctx bounds only the wait for the DREP, not the disconnect: the DREQ goes
// out and the connection ends here whatever ctx is, as with
// http.Server.Shutdown. An ended ctx, even one already ended at the call,
// makes Disconnect return ctx.Err() without waiting; the DREQ is then
// resent in the background until the DREP or its retries end it, as for
// Close, which is the way to end a connection without a context.
func (c *CMConn) Disconnect(ctx context.Context) error {
	if c.dev.closed.Load() {
		c.end(ErrClosed)
		return c.err
	}
	g := c.dev.gsiOf()
	g.mu.Lock()
	if g.down {
		// Close ran since the check above: its shutdown forgot the
		// connection (and sent the DREQ).
		g.mu.Unlock()
		c.end(ErrClosed)
		return c.err
	}
	err := g.agent.Disconnect(time.Now(), c.id, nil)
	// DREQ sent: another Disconnect, a Close, or the agent itself (a
	// peer reusing the connection's QP: cm.Agent's stale-connection
	// rule) sent it, and this one waits for the same end; Close ends the
	// connection at once.
	ending := err != nil && g.agent.State(c.id) == cm.StateDREQSent
	g.step(time.Now())
	g.unlock()
	if err != nil && !ending { // the peer already ended it
		c.end(nil)
		return c.err
	}
	if err := ctx.Err(); err != nil {
		// Ended before the wait: its error, even if the DREP has already
		// come back (a select would pick either at random).
		c.end(nil)
		return err
	}
	select {
	case <-c.done:
		return c.err
	case <-c.dev.done:
		c.end(ErrClosed)
		return c.err
	case <-ctx.Done():
		c.end(nil)
		return ctx.Err()
	}
}

// Close ends the connection without waiting, as rdma_destroy_id does for a
// connected ID: an established connection gets a DREQ (the peer's side
// ends), the QP moves to ERR (its outstanding work requests flushed) and
// Done closes; the DREP is not awaited. Events of the connection are
// forgotten; the DREQ is resent in the background until the DREP comes or
// its retries run out (kernel cm_destroy_id sends it once and enters
// time-wait; resending it lets a lost DREQ still reach the peer). The QP
// is not destroyed: that is the caller's, after Close or Disconnect, as
// the CM does not own it.
//
// Close is idempotent, never blocks on the network, and may race
// Disconnect or Device.Close: a connection already ended (by the peer, by
// Disconnect or by the device's Close) is left as it is. A Disconnect
// waiting for its DREP when Close is called returns ErrClosed, as does
// any later one. Close always returns nil.
//
// QP.Destroy of the connection's QP without Close or Disconnect closes the
// connection as Close does, once the QP is gone.
func (c *CMConn) Close() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	g := c.dev.gsiOf()
	g.mu.Lock()
	// The connection's events are forgotten before the DREQ goes out:
	// the DREP may come back before end below runs, and watch would then
	// end the connection as answered (nil) instead of closed.
	delete(g.waiters, c.id)
	if !g.down && !c.dev.closed.Load() {
		// Established: the DREQ goes out. DREQ sent (a Disconnect's), in
		// time-wait or forgotten (the peer ended it): nothing to send, and
		// Disconnect fails with ErrState or ErrUnknownID.
		now := time.Now()
		_ = g.agent.Disconnect(now, c.id, nil)
		g.step(now)
	}
	g.unlock()
	if c.closeGap != nil {
		c.closeGap()
	}
	c.end(ErrClosed)
	return nil
}

// resolve turns "host:port" into an address of the device's family.
func resolve(ctx context.Context, d *Device, addr string) (netip.AddrPort, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %q: %w", ErrInvalidArgument, addr, err)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: port %q", ErrInvalidArgument, ps)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %q: %w", ErrUnreachable, host, err)
	}
	for _, ip := range ips {
		if ip = ip.Unmap(); ip.Is4() == d.addr.Is4() {
			return netip.AddrPortFrom(ip, uint16(port)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("%w: %q has no address of the device's family (%v)", ErrUnreachable, host, d.addr)
}

// newCMQP creates the connection's RC QP and takes it to INIT.
func newCMQP(o *CMOptions) (*QP, error) {
	qp, err := o.PD.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: o.SendCQ, RecvCQ: o.RecvCQ, SRQ: o.SRQ, Cap: o.Cap, SigAll: o.SigAll})
	if err != nil {
		return nil, err
	}
	if err := qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: o.Access},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags); err != nil {
		qp.Destroy()
		return nil, err
	}
	if o.PeerRecvBuffer != 0 || o.PeerRecvSockets != 0 {
		if err := qp.SetPeerReceiveBuffer(o.PeerRecvBuffer, o.PeerRecvSockets); err != nil {
			qp.Destroy()
			return nil, err
		}
	}
	return qp, nil
}

// toRTS takes a QP in INIT to RTR and RTS against remote, with selective
// repeat if both ends offered it (CMOptions.SelectiveRepeat and
// PeerSelectiveRepeat), and the traffic class tclass in its address
// vector (0: the device's).
func toRTS(qp *QP, local, remote ConnInfo, o *CMOptions, rnrRetry, tclass uint8) error {
	sr, err := negotiateSR(local, remote, false)
	if err != nil {
		return err
	}
	steps := []struct {
		attr QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: QPSRTR, AH: AH{DGID: remote.GID, UDPPort: remote.UDPPort, HopLimit: 64, TrafficClass: tclass}, PathMTU: local.MTU,
			DestQPN: remote.QPN, RQPSN: remote.PSN, MaxDestRdAtomic: local.MaxRdAtomic, MinRNRTimer: 12},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		{QPAttr{State: QPSRTS, SQPSN: local.PSN, Timeout: o.Timeout, RetryCnt: o.RetryCnt, RNRRetry: rnrRetry,
			MaxRdAtomic: remote.MaxRdAtomic}, QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic},
	}
	steps[0].attr.SelectiveRepeat, steps[0].attr.OOOLimit, steps[0].attr.PeerOOOLimit = sr.SelectiveRepeat, sr.OOOLimit, sr.PeerOOOLimit
	steps[0].mask |= QPAttrSelectiveRepeat
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			return err
		}
	}
	return nil
}

// srOffers sets the selective-repeat offers of a CM connection's two ends
// as CMOptions gives them.
func srOffers(local, remote *ConnInfo, o *CMOptions) {
	local.SelectiveRepeat, local.OOOLimit = o.SelectiveRepeat, oooBound(o.OOOLimit)
	remote.SelectiveRepeat = o.PeerSelectiveRepeat
}

// mtuOf returns the MTU of a 4-bit IBA MTU code, capped at max.
func mtuOf(code uint8, max MTU) MTU {
	m := MTU(code)
	if m.Bytes() == 0 || m > max {
		return max
	}
	return m
}
