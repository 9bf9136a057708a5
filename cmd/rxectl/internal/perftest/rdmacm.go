package perftest

// -R (perftest's --rdma_cm): the QPs are connected by the RDMA connection
// manager and the out-of-band exchange runs over an rdma_cm connection of
// its own, as perftest does (perftest_communication.c: rdma_server_connect
// and rdma_client_connect make the exchange's connection, whose messages
// are RC SENDs (rdma_write_data, rdma_read_data); create_rdma_cm_connection
// connects the test QPs between two key exchanges of zeroed messages).
// Both connections go to the RDMA CM port -p (18515).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/rxe"
)

const (
	// cmDialAttempts and cmDialPause are rdma_cm_client_connection's
	// retries: a connection refused because the server does not listen
	// yet is tried again, up to 10 times 100 ms apart.
	cmDialAttempts = 10
	cmDialPause    = 100 * time.Millisecond
	// cmDialTimeout bounds one connection attempt (REQ retries included).
	cmDialTimeout = 10 * time.Second
	// cmEndTimeout bounds the disconnection at the end.
	cmEndTimeout = 3 * time.Second
	// rejInvalidServiceID is the REJ reason "invalid service ID" (IBA
	// 12.6.7.2, table 112: nobody listens on the service ID, the port).
	rejInvalidServiceID = 8
	// cmSlot is the size of one message buffer of the exchange's
	// connection (the largest message, a TCP key message, is 108 bytes);
	// cmRecvs receives are posted at once.
	cmSlot  = 128
	cmRecvs = 4
)

// cmState is an -R session's rdma_cm side.
type cmState struct {
	client bool
	target string // the server's host:port (client)
	port   uint16 // the RDMA CM port
	// stop ends the exchange's waits: the interrupt before the
	// measurement (once softStop is set, an interrupt lets it finish).
	stop  context.Context
	pipe  *cmPipe
	conns []*rxe.CMConn // the test QPs' connections
	// ready, when set, is sent the device's UDP port once the server
	// listens (runLoopbackCM).
	ready chan<- uint16
	// silence bounds a wait for the peer's next exchange message during
	// which none of this end's QPs receives or sends a packet (cmSilence;
	// tests shorten it).
	silence time.Duration
	// udpPort is the UDP port the client's REQs go to: its device's own
	// (rxe.Dial), named by dialError.
	udpPort uint16
	// udQPs are the test QPs of -c UD, which no connection holds
	// (rdmacmud.go).
	udQPs []*rxe.QP
	// requested is set once the client's request for the test QP of the
	// server's current setup wait (watchCMSetup) has come: accept sets it
	// as it takes the request, answerUD as Accept returns it, both before
	// the answer goes out.
	requested atomic.Bool
}

// cmSilence is how long an -R exchange wait lasts with no packet from or
// to the peer on any of the session's connections (the stall bound of the
// test loops). A peer killed outright sends no DREQ, and nothing else
// would end the wait. A server waits in the exchange while its client
// runs: the client's READ, WRITE or SEND requests arrive meanwhile, or,
// during one long READ whose requests all came, this end sends its
// responses; a peer that is gone leaves both at rest.
const cmSilence = stallTimeout

// errPeerSilent ends an -R exchange wait that heard nothing for cmSilence.
type errPeerSilent struct{ d time.Duration }

func (e errPeerSilent) Error() string {
	return fmt.Sprintf("no packet from or to the peer on any connection for %v (with -R a peer that was killed or whose host or path is gone sends nothing, not even a DREQ)", e.d)
}

// errExchangeEnded ends an -R wait for the peer outside the exchange
// (watchCMSetup) once the exchange's connection has ended: the peer
// disconnected it (its DREQ). Those waits are the test QPs' connections
// (connectCMQPs, connectCMQPsUD), in the setup before the run starts
// (oob.Conn.RunStarted), where a peer of another test or other options
// (-c, -q) fails and disconnects: the text names that cause among the
// others, as oob.ErrPeerClosed does for the setup exchanges. A disconnect
// once the run started is an exchange step's oob.ErrPeerEnded
// (TestRDMACMPeerClosedByStage).
type errExchangeEnded struct{ peer string }

// Error names the peer that disconnected.
func (e errExchangeEnded) Error() string {
	return fmt.Sprintf("the %s disconnected the exchange's rdma_cm connection (it failed, was interrupted, or runs a different test or options: see its output)", e.peer)
}

// errExchangeQPErr ends an -R wait for the peer outside the exchange
// (watchCMSetup) once the exchange's QP is in the error state while its
// connection is still up.
type errExchangeQPErr struct{}

// Error says the exchange's QP failed.
func (errExchangeQPErr) Error() string {
	return "the exchange's rdma_cm connection failed: its QP is in the error state"
}

// errExchangeAhead ends an -R server's wait for its client's request for
// a test QP (watchCMSetup) once the client's next exchange message has
// arrived on the exchange's connection with no request for that QP: the
// client has connected all its test QPs and gone on to the exchange after
// them, so it runs fewer than this end (a smaller -q).
type errExchangeAhead struct{}

// Error says the client went on without this test QP.
func (errExchangeAhead) Error() string {
	return "the client went on with the exchange (its next message came) without a request for this test QP: it runs fewer test QPs than this end (a smaller -q: give both ends the same)"
}

// checkCM checks the settings -R supports.
func (o *options) checkCM() error {
	if !o.rdmaCM {
		return nil
	}
	if o.connType != "RC" && o.connType != "UD" {
		return fmt.Errorf("-R with -c %s: librdmacm has no UC (perftest refuses it too); -R takes RC and UD", o.connType)
	}
	if o.loopback && o.ipv6 {
		return errors.New("-R with --loopback --ipv6: both ends would share ::1, and the RDMA CM reaches the peer on this end's own UDP port, so the two ends need an address each; use IPv4 for the loopback")
	}
	if !o.loopback && o.udpPort == 0 {
		// rxe.Dial sends the CM's REQ to the peer's QP1 on this device's
		// own UDP port; an ephemeral one differs from the peer's.
		return errors.New("-R with --udp-port 0: the RDMA CM reaches the peer on this end's own UDP port, so both ends need the same fixed --udp-port (4791 against perftest)")
	}
	return nil
}

// runCM runs one end of an -R test: the server (no HOST) or the client.
func runCM(ctx context.Context, t Test, o *options, server bool, stdout io.Writer) error {
	return runCMReady(ctx, t, o, !server, stdout, nil)
}

func runCMReady(ctx context.Context, t Test, o *options, client bool, stdout io.Writer, ready chan<- uint16) error {
	local, err := cmLocalAddr(ctx, o, client)
	if err != nil {
		return err
	}
	s := newSession(t, o, client, stdout)
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	after := context.AfterFunc(ctx, func() {
		if !s.softStop.Load() {
			cancel()
		}
	})
	defer after()
	silence := cmSilence
	if o.hooks.silence > 0 {
		silence = o.hooks.silence
	}
	s.cm = &cmState{client: client, port: uint16(o.oobPort), stop: stop, ready: ready, silence: silence,
		target: net.JoinHostPort(o.host, strconv.Itoa(o.oobPort))}
	restore := func() {}
	if client {
		restore = s.shareCPUs(hostPeer(ctx, o.host))
	}
	defer func() { restore() }()
	err = s.openDevice(local)
	if err == nil {
		err = s.connectComm(stop)
	}
	if err == nil && !client {
		restore = s.shareCPUs(s.cm.pipe.conn.RemoteAddr.Addr()) // the server learns its peer on the device
	}
	if err == nil {
		err = s.runOpen(ctx)
	}
	if s.oob != nil {
		s.oob.Close()
	}
	s.closeDevice()
	return s.end(ctx, stdout, err)
}

// cmLocalAddr is the address of the end's RoCE device: --bind, else the
// client's source address toward HOST, else (server) this host's first
// address of the IP version.
func cmLocalAddr(ctx context.Context, o *options, client bool) (netip.Addr, error) {
	if o.bind != "" {
		return netip.MustParseAddr(o.bind).Unmap(), nil
	}
	network := "udp4"
	if o.ipv6 {
		network = "udp6"
	}
	if client {
		// A connected UDP socket sends nothing; it asks the kernel for
		// the route's source address.
		var d net.Dialer
		c, err := d.DialContext(ctx, network, net.JoinHostPort(o.host, strconv.Itoa(defRoCEPort)))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("-R: no route to %s: %w (give --bind)", o.host, err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-R: list this host's addresses: %w (give --bind)", err)
	}
	for _, a := range addrs {
		p, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(p.IP)
		if ip = ip.Unmap(); ip.IsGlobalUnicast() && ip.Is4() != o.ipv6 {
			return ip, nil
		}
	}
	return netip.Addr{}, errors.New("-R: this host has no address to serve RoCE on: give --bind")
}

// connectComm makes the exchange's rdma_cm connection: its own PD, buffer
// and CQs, then Dial (client) or ListenCM and Accept (server). The
// receives are posted on the QP before the REQ or the REP goes out
// (CMOptions.Prepare), as perftest's rdma_client_connect and
// rdma_server_connect post theirs before rdma_connect and rdma_accept:
// the client sends the exchange's first message as soon as its Dial
// returns, which can be before the server's Accept has returned (its
// RTU still on the way), and that SEND then finds a receive, not an RNR
// NAK.
func (s *session) connectComm(ctx context.Context) error {
	pd, err := s.dev.AllocPD()
	if err != nil {
		return err
	}
	mr, err := pd.RegMR(make([]byte, (1+cmRecvs)*cmSlot), rxe.AccessLocalWrite)
	if err != nil {
		return err
	}
	p := &cmPipe{st: s.cm, mr: mr}
	if p.scq, err = s.dev.CreateCQ(4, -1); err != nil {
		return err
	}
	if p.rcq, err = s.dev.CreateCQ(cmRecvs, -1); err != nil {
		return err
	}
	opts := rxe.CMOptions{PD: pd, SendCQ: p.scq, RecvCQ: p.rcq, Access: rxe.AccessLocalWrite,
		Cap: rxe.QPCap{MaxSendWR: 4, MaxRecvWR: cmRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}, Timeout: uint8(s.o.timeout), RetryCnt: uint8(s.o.retryCount),
		// No READ or atomic either way, as perftest's comm context (a SEND
		// test whose out_reads is 0) connects (rdma_client_connect,
		// rdma_server_connect).
		Explicit: rxe.QPAttrTimeout | rxe.QPAttrRetryCnt | rxe.QPAttrMaxDestRdAtomic | rxe.QPAttrMaxQPRdAtomic, MTU: s.dev.ActiveMTU(),
		Prepare: func(qp *rxe.QP) error {
			for i := 1; i <= cmRecvs; i++ {
				if err := p.postOn(qp, i); err != nil {
					return err
				}
			}
			return nil
		}}
	var c *rxe.CMConn
	if s.client {
		c, err = s.cm.dial(ctx, s.dev, opts)
	} else {
		var ln *rxe.CMListener
		if ln, err = s.cm.listen(s.dev, opts); err != nil {
			return err
		}
		if s.o.fullOutput() {
			io.WriteString(s.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		}
		if s.cm.ready != nil {
			s.cm.ready <- s.dev.Addr().Port() // buffered
		}
		c, err = ln.Accept(ctx)
		ln.Close()
		if err != nil && ctx.Err() != nil {
			err = errors.New("interrupted while waiting for a client")
		}
	}
	if err != nil {
		return err
	}
	if s.o.hooks.cmExchangeUp != nil {
		s.o.hooks.cmExchangeUp(c)
	}
	p.conn = c
	p.stop = ctx
	s.cm.pipe = p
	s.oob = oob.NewCMConn(p, s.client, s.o.gidIndex)
	return nil
}

// listen starts an RDMA CM listener on the port.
func (st *cmState) listen(d *rxe.Device, opts rxe.CMOptions) (*rxe.CMListener, error) {
	ln, err := d.ListenCM(st.port, opts)
	if err != nil {
		return nil, fmt.Errorf("listen on RDMA CM port %d: %w (another server running? try -p)", st.port, err)
	}
	return ln, nil
}

// dial connects to the server, retrying while it refuses because nobody
// listens on the port yet.
func (st *cmState) dial(ctx context.Context, d *rxe.Device, opts rxe.CMOptions) (*rxe.CMConn, error) {
	st.udpPort = d.Addr().Port() // where Dial sends the REQ
	if err := st.notSelf(ctx, d); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		dctx, cancel := context.WithTimeout(ctx, cmDialTimeout)
		c, err := rxe.Dial(dctx, d, st.target, opts)
		cancel()
		if err == nil {
			return c, nil
		}
		var rej *rxe.RejectError
		refused := errors.As(err, &rej) && uint16(rej.Reason) == rejInvalidServiceID
		if !refused || try == cmDialAttempts {
			return nil, st.dialError(ctx, err, refused, try, len(st.conns))
		}
		select {
		case <-time.After(cmDialPause):
		case <-ctx.Done():
			return nil, fmt.Errorf("rdma_cm connect to %s: interrupted", st.target)
		}
	}
}

// notSelf refuses a server address that is the client's own device
// address. Dial sends the REQ to that address and to the client's own
// UDP port, so it would reach the client's device, where no server
// listens, and each try would be refused as if no server ran: the usual
// mistake is a server and a client on one host without --bind (the
// server's device takes the host's address, the client's the one the
// route to the server's name gives, often the same). The address is
// resolved as Dial resolves it: its first address of the device's family.
// A name that does not resolve is left to Dial to report.
func (st *cmState) notSelf(ctx context.Context, d *rxe.Device) error {
	host, _, err := net.SplitHostPort(st.target)
	if err != nil {
		return nil
	}
	own := d.Addr().Addr().Unmap()
	for _, ip := range hostAddrs(ctx, host) {
		if ip = ip.Unmap(); ip.Is4() != own.Is4() {
			continue
		}
		if ip == own {
			return fmt.Errorf("rdma_cm connect to %s: %v is this client's own RoCE address (its device is on %v), so the request would go to itself; "+
				"a server and a client on one host need an address each: start them with --bind (e.g. --bind 127.0.0.1 for the server, --bind 127.0.0.2 for the client) and connect to the server's", st.target, ip, d.Addr())
		}
		return nil
	}
	return nil
}

// dialError explains a failed connection, the tries-th, of test QP qp
// once the exchange's connection is up (st.pipe). The server is there
// then: its device answered on the same address and UDP port. One that
// refuses test QP 0 takes none of this end's test QPs: it listens for
// those of another -c (another service ID) or does not listen (perftest's
// server listens for the test QPs only after the first exchange,
// rdma_cm_server_connection, and this end's tries span about a second).
// One that refuses a later test QP, having connected the ones before,
// takes no more: it runs fewer (both ends stop listening after their
// last, rdma_cm_server_connection and connectCMQPs). One that does not
// answer in time (the REQ's or SIDR_REQ's retries all went unanswered)
// stopped or stalls, or the requests or its answers were lost on the
// path. Before the exchange's connection is up, a refusal says nobody
// listens on the port, and no answer leaves open whether any device is
// at the address.
func (st *cmState) dialError(ctx context.Context, err error, refused bool, tries, qp int) error {
	switch {
	case refused && st.pipe != nil && qp == 0:
		return fmt.Errorf("rdma_cm connect to %s: refused %d times (%w): the server, whose exchange connection is up, takes no test QP on RDMA CM port %d: it runs another -c, or it does not listen (it stopped or stalls: see its output)", st.target, tries, err, st.port)
	case refused && st.pipe != nil:
		took := fmt.Sprintf("%d test QPs", qp)
		if qp == 1 {
			took = "1 test QP"
		}
		return fmt.Errorf("rdma_cm connect to %s: refused %d times (%w): the server took %s and takes no more: it runs fewer (a smaller -q: give both ends the same)", st.target, tries, err, took)
	case refused:
		return fmt.Errorf("rdma_cm connect to %s: refused %d times, nobody listens on RDMA CM port %d (%w) — is a server running with -R and the same -p?", st.target, tries, st.port, err)
	case ctx.Err() != nil:
		return fmt.Errorf("rdma_cm connect to %s: interrupted", st.target)
	case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rxe.ErrCMTimeout)) && st.pipe != nil:
		return fmt.Errorf("rdma_cm connect to %s: the server, whose exchange connection is up, did not answer the test QP's request within %v (%w): it stopped or stalls (see its output), or the requests or its answers were lost on the path", st.target, cmDialTimeout, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rxe.ErrCMTimeout):
		return fmt.Errorf("rdma_cm connect to %s: no answer within %v (%w) — is an RDMA device (rxectl or kernel rxe) on UDP %d there?", st.target, cmDialTimeout, err, st.udpPort)
	}
	return fmt.Errorf("rdma_cm connect to %s: %w", st.target, err)
}

// connectCMQPs is create_rdma_cm_connection: a key exchange of zeroed
// messages, one rdma_cm connection per test QP (the client dials, the
// server accepts), another zeroed exchange; then this end's key messages
// describe the connected QPs. The server listens before the first
// exchange, so the client's requests never find the port closed, and
// stops once it has accepted its last test QP, so that a client of more
// test QPs is refused (dialError names -q). The test
// QPs' RNR retry count is --retry_count, in the REQ and the REP, as
// perftest's conn_param.rnr_retry_count for them (rdma_cm_route_handler,
// rdma_cm_connection_request_handler); the exchange's connection keeps 7.
// Their responder resources and initiator depth are perftest's too: the
// outstanding reads both ways for READ and atomic tests (the server
// answering the smaller of its own and the REQ's), 0 for WRITE and SEND
// tests, whose QPs then have max_rd_atomic and max_dest_rd_atomic 0.
//
// The server accepts the test QPs' connections of its client only: the
// peer's offers it learned in this exchange (selective repeat, its
// receive buffer) are that client's, and a request from another host in
// the window between its listen and its accepts is refused (cmState.accept).
func (s *session) connectCMQPs() error {
	if s.qpType() == rxe.QPTypeUD {
		return s.connectCMQPsUD()
	}
	o := s.o
	access := s.remoteAccess()
	depth := 0
	if s.t.verb == verbRead || s.t.verb == verbAtomic {
		depth = s.outReads
	}
	opts := rxe.CMOptions{PD: s.pd, SendCQ: s.scq, RecvCQ: s.rcq, SRQ: s.srq, Access: access, MTU: s.mtu,
		Cap:                rxe.QPCap{MaxSendWR: o.txDepth, MaxRecvWR: s.qpRecvWR(), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: o.inline},
		ResponderResources: depth, InitiatorDepth: depth, Timeout: uint8(o.timeout), RetryCnt: uint8(o.retryCount),
		RNRRetry:        uint8(o.retryCount),
		Explicit:        rxe.QPAttrTimeout | rxe.QPAttrRetryCnt | rxe.QPAttrRNRRetry | rxe.QPAttrMaxDestRdAtomic | rxe.QPAttrMaxQPRdAtomic,
		SelectiveRepeat: s.srOffer(), PeerSelectiveRepeat: s.peer.SelectiveRepeat}
	opts.PeerRecvBuffer, opts.PeerRecvSockets = s.peerBuffer() // rxe divides it among the QPs on each peer socket
	var ln *rxe.CMListener
	if !s.client {
		// Listening without the client's offers: they go to its
		// requests only (cmState.accept).
		plain := opts
		plain.PeerSelectiveRepeat, plain.PeerRecvBuffer, plain.PeerRecvSockets = false, 0, 0
		var err error
		if ln, err = s.cm.listen(s.dev, plain); err != nil {
			return err
		}
		defer ln.Close()
		if s.o.hooks.cmListening != nil {
			s.o.hooks.cmListening(s.dev)
		}
	}
	s.my = make([]oob.KeyMsg, 1) // zero, as perftest's my_dest is until the QPs exist
	if err := s.hs("synchronising before the rdma_cm connections"); err != nil {
		return err
	}
	for i := range o.qps {
		var c *rxe.CMConn
		var err error
		opts.SendCQ, opts.RecvCQ = s.qpCQs(i) // each QP's own CQs (createCQs), as without -R
		ctx, release := s.watchCMSetup()
		if s.client {
			c, err = s.cm.dial(ctx, s.dev, opts)
		} else {
			c, err = s.cm.accept(ctx, ln, opts, s.errw)
		}
		release()
		if cause := setupCause(ctx); err != nil && cause != nil {
			err = cause
			if !s.client {
				err = fmt.Errorf("no connection request from the client: %w", cause)
			}
		}
		if err != nil {
			return fmt.Errorf("rdma_cm connection of test QP %d: %w", len(s.cm.conns), err)
		}
		s.cm.conns = append(s.cm.conns, c)
	}
	if ln != nil {
		// The last test QP is accepted: a client of more test QPs gets
		// its next request refused (a REJ, invalid service ID) at once,
		// not queued unanswered while this end waits in the exchange.
		// (The deferred Close then finds it closed.)
		if err := ln.Close(); err != nil {
			return fmt.Errorf("close the RDMA CM listener of port %d: %w", s.cm.port, err)
		}
	}
	if err := s.hs("synchronising after the rdma_cm connections"); err != nil {
		return err
	}
	gid := s.dev.GID().As16()
	s.my = s.my[:0]
	for i, c := range s.cm.conns {
		s.qps = append(s.qps, c.QP)
		s.my = append(s.my, oob.KeyMsg{OutReads: uint16(s.outReads), QPN: c.QP.QPN(), PSN: c.Local.PSN,
			RKey: s.mr.RKey(), VAddr: s.remoteRegion(i), GID: gid})
	}
	s.rem = make([]oob.KeyMsg, o.qps)
	s.startCounters()
	return nil
}

// errStranger is the server's refusal of a test QP's rdma_cm request from
// another host than its client's.
var errStranger = errors.New("not from this test's client")

// accept accepts the next test QP connection of the client, the peer of
// the exchange's connection, with opts (the options learned from it
// included), waiting until ctx ends (watchCMSetup's context). A request
// from another address is refused (a REJ, consumer reject) and noted on
// w, and the wait goes on. perftest's -R server
// accepts the first -q requests whoever sends them
// (rdma_cm_connection_request_handler counts them and nothing else); a
// stranger's would take the place of one of the client's QPs, whose own
// request would then be turned away when the listener closes, and would
// get options learned from another peer. The client is known by its IP
// address, its RDMA device's, which each of its connections comes from
// (its RDMA CM source port differs from one connection to the next).
func (st *cmState) accept(ctx context.Context, ln *rxe.CMListener, opts rxe.CMOptions, w io.Writer) (*rxe.CMConn, error) {
	client := st.pipe.conn.RemoteAddr.Addr()
	for {
		c, err := ln.AcceptFunc(ctx, func(r *rxe.CMRequest) (rxe.CMOptions, error) {
			if r.Remote.Addr() != client {
				return rxe.CMOptions{}, errStranger
			}
			st.requested.Store(true)
			return opts, nil
		})
		var ae *rxe.AcceptError
		if errors.As(err, &ae) && errors.Is(err, errStranger) {
			fmt.Fprintf(w, " Refused an rdma_cm connection request from %v: the test QPs are %v's, the client of this test\n", ae.Remote, client)
			continue
		}
		return c, err
	}
}

// watchCMSetup returns the context of a wait for the peer outside the
// exchange, in which no exchange message is awaited and so no bound of
// cmPipe.wait applies: the server's wait for its client's requests for
// the test QPs (AcceptFunc, UDListener.Accept) and for a UD client's QPN
// message, the client's for the server's answers (Dial, DialUD) and for
// its QPN message's send completion. perftest's server blocks in
// rdma_get_cm_event until the requests come; a client gone after the
// exchange (killed, or failed on its own, e.g. one of another -c whose
// requests nobody answers) would hold it there for ever. The context
// ends, with the cause that setupCause returns, once the exchange's
// connection ends (the peer's DREQ: errExchangeEnded), once its QP is in
// the error state with the connection still up (errExchangeQPErr), on
// the server once the client's next exchange message has come with no
// request for this test QP (errExchangeAhead: the client runs fewer test
// QPs; its messages follow its last connection, whose request came
// first, so one that comes before a request is not that connection's),
// or once for st.silence no packet has come from or gone to the peer on the
// exchange's QP or a test QP and no CM MAD has reached this device from
// the peer's IP address, the exchange's peer's (a request, an answer, or
// its retry: errPeerSilent); it also ends when st.stop does (the
// interrupt), without a cause of its own. Another host's MADs do not
// count: a stranger whose requests the server refuses (accept) would
// otherwise keep it waiting for a client that is gone. release ends the
// watch and waits for it: call it before adding to st.conns or st.udQPs.
func (s *session) watchCMSetup() (ctx context.Context, release func()) {
	st, p := s.cm, s.cm.pipe
	ctx, cancel := context.WithCancelCause(st.stop)
	peer := "client"
	if s.client {
		peer = "server"
	}
	conns, uds := st.conns, st.udQPs // appended to after release only
	st.requested.Store(false)
	mads := s.dev.CountMADs(p.conn.RemoteAddr.Addr())
	heard := func() uint64 { return p.heard(conns, uds) + mads.Load() }
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer mads.Stop()
		tick, stop := p.silenceTicker()
		defer stop()
		p.watchQuiet(ctx, cancel, tick, errExchangeEnded{peer}, heard, func() error {
			select {
			case <-p.conn.Done(): // the disconnect explains the QP's state
				return errExchangeEnded{peer}
			default:
			}
			// The message is looked for before the request: a request
			// sets requested before its answer goes, and so before any
			// message the client sends after it.
			ahead := !s.client && p.rcq.Len() > 0 && !st.requested.Load()
			if p.conn.QP.State() == rxe.QPSErr {
				return errExchangeQPErr{} // its receives' flushes are no message
			}
			if ahead {
				return errExchangeAhead{}
			}
			return nil
		})
	}()
	return ctx, func() {
		cancel(nil)
		<-exited
	}
}

// setupCause returns why ctx, a watchCMSetup context, ended if its watch
// ended it (errExchangeEnded, errExchangeQPErr, errExchangeAhead,
// errPeerSilent), else nil
// (it has not ended, or st.stop ended it: the interrupt).
func setupCause(ctx context.Context) error {
	switch c := context.Cause(ctx).(type) {
	case errExchangeEnded, errExchangeQPErr, errExchangeAhead, errPeerSilent:
		return c
	}
	return nil
}

// connectCM stands for ctx_connect under -R, which perftest skips: the
// rdma_cm connections moved the QPs to RTS. It takes the peer's address
// from the connection (connectCMQPs gave the QPs its receive buffer).
func (s *session) connectCM() error {
	if s.qpType() == rxe.QPTypeUD {
		return s.connectCMUD()
	}
	c := s.cm.conns[0]
	s.peerAddr = netip.AddrPortFrom(c.RemoteAddr.Addr(), c.Remote.UDPPort)
	if c.Remote.UDPPort == 0 {
		s.peerAddr = netip.AddrPortFrom(c.RemoteAddr.Addr(), defRoCEPort)
	}
	s.rqPSN = c.Remote.PSN
	return nil
}

// cmPipe is the exchange over the rdma_cm connection: each message one
// signalled RC SEND from slot 0 of the buffer, received into one of the
// other slots (perftest's rdma_write_data and rdma_read_data).
type cmPipe struct {
	st       *cmState
	conn     *rxe.CMConn
	mr       *rxe.MR
	scq, rcq *rxe.CQ
	stop     context.Context
	finished bool
	// pending is the receive completion of the peer's next message when
	// watch took it, for Recv; unwatch ends watch's wait for one.
	pending *rxe.WC
	unwatch func()
}

// watch is watchPeer over the rdma_cm exchange: the returned context ends
// once the peer's next message has arrived (its receive completion is
// kept for Recv, so the message stays for the exchange), or the peer has
// disconnected the exchange's connection or a test QP's (a CM DREQ: it
// stopped, failed or was interrupted), or ctx ends. stop ends the watch
// and waits for it. A Recv during the watch ends the wait for a message
// first, the context untouched: Recv takes the message itself.
func (p *cmPipe) watch(ctx context.Context) (spoke context.Context, stop func()) {
	spoke, cancel := context.WithCancel(ctx)
	wctx, endWait := context.WithCancel(spoke)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		wc := make([]rxe.WC, 1)
		if n, _ := p.rcq.Wait(wctx, wc); n == 1 {
			p.pending = &wc[0]
			cancel()
		}
	}()
	var once sync.Once
	p.unwatch = func() {
		once.Do(func() {
			endWait()
			<-waited
		})
	}
	conns := append([]*rxe.CMConn{p.conn}, p.st.conns...)
	var ends sync.WaitGroup
	for _, c := range conns {
		ends.Add(1)
		go func() {
			defer ends.Done()
			select {
			case <-c.Done():
				cancel()
			case <-spoke.Done():
			}
		}()
	}
	return spoke, func() {
		p.unwatch()
		p.unwatch = nil
		cancel()
		ends.Wait()
	}
}

// post posts the receive of slot i on the connection's QP.
func (p *cmPipe) post(i int) error { return p.postOn(p.conn.QP, i) }

// postOn posts the receive of slot i on qp.
func (p *cmPipe) postOn(qp *rxe.QP, i int) error {
	_, err := qp.PostRecv(rxe.RecvWR{ID: uint64(i), SGList: []rxe.SGE{p.mr.SGE(i*cmSlot, cmSlot)}})
	return err
}

// wait waits for one completion on cq, the connection's end (io.EOF) or
// the stop context.
func (p *cmPipe) wait(cq *rxe.CQ) (rxe.WC, error) {
	ctx, cancel := context.WithCancelCause(p.stop)
	defer cancel(nil)
	var tick <-chan time.Time
	if cq == p.rcq {
		// A receive waits for the peer, whose death nothing announces:
		// bound the wait by the silence of the path. (A SEND's wait is
		// bounded by its retries.)
		t, stop := p.silenceTicker()
		defer stop()
		tick = t
	}
	conns, uds := p.st.conns, p.st.udQPs // connectCMQPs appends to them once this wait is over
	go p.watchQuiet(ctx, cancel, tick, nil, func() uint64 { return p.heard(conns, uds) }, nil)
	wc := make([]rxe.WC, 1)
	if _, err := cq.Wait(ctx, wc); err != nil {
		if n := cq.Poll(wc); n == 1 {
			return wc[0], nil
		}
		var silent errPeerSilent
		switch {
		case p.stop.Err() != nil:
			return rxe.WC{}, net.ErrClosed // oobError: "interrupted"
		case errors.As(context.Cause(ctx), &silent):
			return rxe.WC{}, silent
		}
		return rxe.WC{}, io.EOF
	}
	return wc[0], nil
}

// silenceTicker returns the ticks of a wait bounded by the exchange's
// silence bound (every quarter of it, at most a second apart), and the
// function that stops them; no ticks without a bound.
func (p *cmPipe) silenceTicker() (<-chan time.Time, func()) {
	if p.st.silence <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(min(p.st.silence/4, time.Second))
	return t.C, t.Stop
}

// watchQuiet watches a wait for the peer until ctx ends, and ends it
// through cancel: with ended once the exchange's connection ends; on a
// tick, with check's error if it reports one, or with errPeerSilent once
// heard (the packets to and from the peer) has not moved for the silence
// bound.
func (p *cmPipe) watchQuiet(ctx context.Context, cancel context.CancelCauseFunc, tick <-chan time.Time,
	ended error, heard func() uint64, check func() error) {
	var was uint64
	last := time.Now()
	if tick != nil {
		was = heard()
	}
	for {
		select {
		case <-p.conn.Done():
			cancel(ended)
			return
		case <-ctx.Done():
			return
		case <-tick:
			if check != nil {
				if err := check(); err != nil {
					cancel(err)
					return
				}
			}
			// The silence runs from when heard was read, not from when
			// the tick was due: a watch that runs late reads a tick due
			// long before. A move is dated after the read, a silence
			// measured up to before it.
			before := time.Now()
			if h := heard(); h != was {
				was, last = h, time.Now()
			} else if before.Sub(last) >= p.st.silence {
				cancel(errPeerSilent{p.st.silence})
				return
			}
		}
	}
}

// heard returns the packets the exchange's QP, the test QPs of conns and
// the UD test QPs uds have received from the peer and sent to it.
func (p *cmPipe) heard(conns []*rxe.CMConn, uds []*rxe.QP) uint64 {
	c := p.conn.QP.Counters()
	n := c.RcvdPkts + c.SentPkts
	for _, cc := range conns {
		c := cc.QP.Counters()
		n += c.RcvdPkts + c.SentPkts
	}
	for _, qp := range uds {
		c := qp.Counters()
		n += c.RcvdPkts + c.SentPkts
	}
	return n
}

// Send sends b as one SEND and waits for its completion.
func (p *cmPipe) Send(b []byte) error {
	if len(b) > cmSlot {
		return fmt.Errorf("message of %d bytes, above the %d-byte slot", len(b), cmSlot)
	}
	copy(p.mr.Bytes()[:cmSlot], b)
	wr := rxe.SendWR{ID: 0, Opcode: rxe.WRSend, Flags: rxe.SendSignaled, SGList: []rxe.SGE{p.mr.SGE(0, len(b))}}
	if _, err := p.conn.QP.PostSend(wr); err != nil {
		return err
	}
	wc, err := p.wait(p.scq)
	if err != nil {
		return err
	}
	if wc.Status == rxe.WCWRFlushErr {
		// The QP went to the error state before the SEND left: the peer
		// disconnected (as Recv, oobError's "closed"), unless we stop.
		if p.stop.Err() != nil {
			return net.ErrClosed
		}
		return io.EOF
	}
	if wc.Status == rxe.WCRetryExcErr {
		// The transport's retries ran out (rxe_completer's retry_cnt):
		// the peer's QP answered nothing, as when its process is gone.
		return fmt.Errorf("send: %v: the peer acknowledged nothing during the retries (its process ended, or its host or the path is gone: see its output)", wc.Status)
	}
	if wc.Status != rxe.WCSuccess {
		return fmt.Errorf("send: %v", wc.Status)
	}
	return nil
}

// Recv receives one message of len(b) bytes and posts its slot again.
func (p *cmPipe) Recv(b []byte) error {
	if p.unwatch != nil {
		p.unwatch() // a pending completion is ours from here
	}
	var wc rxe.WC
	if p.pending != nil {
		wc, p.pending = *p.pending, nil
	} else {
		var err error
		if wc, err = p.wait(p.rcq); err != nil {
			return err
		}
	}
	if wc.Status == rxe.WCWRFlushErr {
		return io.EOF
	}
	if wc.Status != rxe.WCSuccess {
		return fmt.Errorf("receive: %v", wc.Status)
	}
	i := int(wc.ID)
	if i < 1 || i > cmRecvs {
		return fmt.Errorf("receive completion of unknown slot %d", i)
	}
	if int(wc.ByteLen) != len(b) {
		err := fmt.Errorf("a message of %d bytes, want %d (does the peer run the same test with -R and the same options?)", wc.ByteLen, len(b))
		return errors.Join(err, p.post(i))
	}
	copy(b, p.mr.Bytes()[i*cmSlot:])
	return p.post(i)
}

// Finish ends the connections as perftest -R does: no "done" message; the
// client disconnects the test QPs' connections, the server waits for
// that, then disconnects the exchange's connection, which the client
// waits for. Each wait is bounded; the test is over, so a peer that does
// not answer a DREQ in time is not an error (perftest ignores it too).
func (p *cmPipe) Finish(bool) error {
	p.finished = true
	ctx, cancel := context.WithTimeout(context.Background(), cmEndTimeout)
	defer cancel()
	if p.st.client {
		for _, c := range p.st.conns {
			c.Disconnect(ctx)
		}
		select {
		case <-p.conn.Done():
		case <-ctx.Done():
		}
		return nil
	}
	for _, c := range p.st.conns {
		select {
		case <-c.Done():
		case <-ctx.Done():
		}
	}
	p.conn.Disconnect(ctx)
	return nil
}

// Close disconnects every connection at once unless Finish did: the peer
// learns at once that this end stopped.
func (p *cmPipe) Close() error {
	if p.finished {
		return nil
	}
	p.finished = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, c := range p.st.conns {
		c.Disconnect(ctx)
	}
	p.conn.Disconnect(ctx)
	return nil
}

// runLoopbackCM is --loopback with -R: the server on 127.0.0.1, the
// client on 127.0.0.2, both rxectl devices on UDP 4791 (or --udp-port),
// the client's output printed.
func runLoopbackCM(ctx context.Context, t Test, o *options, stdout io.Writer) error {
	var ss, cs *session
	so, co := splitLoopback(o, &ss, &cs)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan uint16, 1)
	srvErr := make(chan error, 1)
	go func() { srvErr <- runCMReady(sctx, t, &so, false, io.Discard, ready) }()
	var cerr error
	select {
	case port := <-ready:
		co.host = "127.0.0.1"
		// The client's REQ goes to the server's QP1 on the client's own
		// UDP port (rxe.Dial): with --udp-port 0 the client takes the
		// port the server's device got (on another address).
		if co.udpPort == 0 {
			co.udpPort = int(port)
		}
		cerr = runCMReady(ctx, t, &co, true, stdout, nil)
		if cerr != nil {
			cancel()
		}
	case err := <-srvErr:
		if ss != nil {
			err = ss.report(io.Discard, nil, err)
		}
		return fmt.Errorf("server: %w", err)
	}
	return endLoopback(stdout, cs, ss, cerr, <-srvErr)
}
