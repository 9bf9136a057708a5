package perftest

// One end of a perftest-style test: the out-of-band exchange in the order
// each perftest program does it (read_bw.c, write_bw.c, send_bw.c,
// atomic_bw.c, read_lat.c, write_lat.c, send_lat.c, atomic_lat.c), the
// verbs resources, the QP transitions of ctx_connect and the output.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/gorxe/gorxe/rxe"
)

// minRNRTimer is perftest's MIN_RNR_TIMER (12: 0.64 ms).
const minRNRTimer = 12

// session is one end of a test.
type session struct {
	t      Test
	o      *options
	client bool
	oob    *oob.Conn
	conn   net.Conn  // the exchange's TCP connection (nil with -R), for watchPeer
	out    io.Writer // FULL_VERBOSITY output
	errw   io.Writer // statistics after a run with faults or a capture

	dev  *rxe.Device
	pd   *rxe.PD
	mr   *rxe.MR
	scq  *rxe.CQ          // the first QP's send CQ (the latency tests')
	rcq  *rxe.CQ          // the first QP's receive CQ (send tests)
	sset cqSet            // every QP's send CQ (cqs.go)
	rset cqSet            // every QP's receive CQ
	ch   *rxe.CompChannel // -e: both CQs' notifications
	rch  *rxe.CompChannel // -e with send-bw -b: the receive CQ's (its loop runs apart)
	qps  []*rxe.QP
	srq  *rxe.SRQ // --use-srq on an end that receives: the QPs' shared receive queue
	// rposted counts each QP's receives posted and not yet completed
	// (SEND tests).
	rposted []int
	// rowed counts each QP's receives completed and not yet posted
	// again, with --recv_post_list N: they are posted N at a time.
	rowed []int
	rlist []rxe.RecvWR // postRecvList's list
	// counters are -W's counters, this end's readings (reportcounters.go).
	counters []reportCounter
	ahs      []*rxe.AddrHandle // -c UD: the address handle of each peer QP
	my       []oob.KeyMsg
	rem      []oob.KeyMsg
	peer     oob.PeerVersion
	cm       *cmState // -R: the rdma_cm connections (rdmacm.go)

	mtu         rxe.MTU
	cycleBuffer int
	buffSize    int // per-QP region: max(largest size, cycle buffer)
	outReads    int
	peerAddr    netip.AddrPort // the peer's RoCE address

	rqPSN    uint32          // the PSN the peer's next request will carry (write-lat)
	peerBase []uint32        // -b: each QP's expected PSN where the size's peer requests begin (markPeerBase)
	latStall time.Duration   // a latency test's bound on a wait for the peer; 0: stallTimeout
	peerDone context.Context // a latency run's: ends once the peer is done (watchLat); nil: not watched
	figures  io.Writer       // where --output figures go
	softStop atomic.Bool     // an interrupt ends the measurement, not the exchange

	bwResults  []report.BW
	latResults []report.Lat

	bufs     netdev.BufferSizes // the socket buffers the kernel granted
	fconn    *faults.Conn       // --drop etc.: the first socket's
	fmore    []*faults.Conn     // the other sockets' (sockets.go)
	socks    []*netdev.UDPConn  // the device's sockets, one per completion vector (sockets.go)
	unread   int32              // of socks, those no spinner reads (unreadSockets)
	spin     time.Duration      // how long a latency wait spins (choosePolling)
	pollMode string             // how the latency waits wait (choosePolling), for the header and --json
	procs    int                // GOMAXPROCS during the test (shareCPUs)
	procsWas int                // GOMAXPROCS before shareCPUs halved it (the peer runs on this host), else 0
	pconn    *pcapdump.Conn     // --pcap
	// capName is the capture's file (--pcap, or --ladder's temporary
	// one: capTemp); traceErr the --trace file's error (observe.go).
	capName  string
	capTemp  bool
	traceErr error
	pfile    *os.File      // --pcap
	final    *report.Final // counters after the device closed
	endSetup func() error  // lifts the deadline of the first exchanges (TCP)
}

// runSession runs one end of the test over conn and closes conn.
func runSession(ctx context.Context, t Test, o *options, conn net.Conn, client bool, stdout io.Writer) error {
	var pipe oob.Pipe = oob.NewTCPPipe(conn)
	if o.hooks.pipe != nil {
		pipe = o.hooks.pipe(conn)
	}
	s := newSession(t, o, client, stdout)
	silence := stallTimeout
	if o.hooks.silence > 0 {
		silence = o.hooks.silence
	}
	sp := &silentPipe{Pipe: pipe, conn: conn, s: s, silence: silence}
	s.oob = oob.NewConn(sp, client)
	s.conn = conn
	stop := context.AfterFunc(ctx, func() {
		if !s.softStop.Load() {
			conn.Close()
		}
	})
	defer stop()
	defer s.oob.Close()
	local := tcpIP(conn.LocalAddr())
	if !local.IsValid() {
		local = netip.IPv4Unspecified()
	}
	restore := s.shareCPUs(tcpIP(conn.RemoteAddr())) // before the device opens a socket per processor
	defer restore()
	// The first exchanges (versions, system data, MTU) are bounded: a TCP
	// peer that connected but says nothing (not rxectl or perftest) must
	// not hold this end forever. From the address exchange on the peer is
	// known to be one, and its pauses (a server waiting out the client's
	// run) are the test's: silentPipe then ends a wait only when neither
	// the exchange nor the test QPs have moved for stallTimeout.
	setup := defSetupTimeout
	if o.hooks.setupTimeout > 0 {
		setup = o.hooks.setupTimeout
	}
	if err := conn.SetDeadline(time.Now().Add(setup)); err != nil {
		return fmt.Errorf("setting the exchange's deadline: %w", err)
	}
	s.endSetup = func() error {
		sp.armed.Store(true)
		return conn.SetDeadline(time.Time{})
	}
	err := s.run(ctx, local.Unmap())
	s.closeDevice()
	return s.end(ctx, stdout, err)
}

// newSession returns one end of a test; its exchange (s.oob) is the
// caller's to set.
func newSession(t Test, o *options, client bool, stdout io.Writer) *session {
	s := &session{t: t, o: o, client: client, out: stdout, errw: o.stderr}
	if s.errw == nil {
		s.errw = io.Discard
	}
	if !o.fullOutput() {
		s.out = io.Discard
	}
	if o.output != "" {
		s.figures = stdout
	}
	return s
}

// end reports the session's result err after its device closed: to
// runLoopback (hooks.held), or printed.
func (s *session) end(ctx context.Context, stdout io.Writer, err error) error {
	if err != nil && ctx.Err() != nil && !s.softStop.Load() && !errors.Is(err, errPeerQP) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	if s.o.hooks.held != nil {
		*s.o.hooks.held = s // runLoopback reports, with the server's counters
		return err
	}
	return s.report(stdout, nil, err)
}

func (s *session) run(ctx context.Context, local netip.Addr) error {
	if err := s.openDevice(local); err != nil {
		return err
	}
	return s.runOpen(ctx)
}

// runOpen runs the test on the open device, from the exchange of versions
// on.
func (s *session) runOpen(ctx context.Context) error {
	if err := s.exchangeVersions(); err != nil {
		return err
	}
	if err := s.exchangeSysData(); err != nil {
		return err
	}
	if err := s.exchangeMTU(); err != nil {
		return err
	}
	if s.endSetup != nil {
		if err := s.endSetup(); err != nil {
			return fmt.Errorf("clearing the exchange's deadline: %w", err)
		}
	}
	if err := s.limitUD(); err != nil {
		return err
	}
	if err := s.allocate(); err != nil {
		return err
	}
	if s.t.lat {
		s.choosePolling()
	}
	s.printHeader()
	switch {
	case !s.t.lat && s.t.verb == verbSend:
		return s.flowSendBW(ctx)
	case !s.t.lat:
		return s.flowRDMABW(ctx)
	case s.t.verb == verbSend:
		return s.flowSendLat(ctx)
	case s.t.verb == verbWrite:
		return s.flowWriteLat(ctx)
	default:
		return s.flowReadAtomicLat(ctx)
	}
}

// openDevice opens the RoCE device on --bind or the local address of the
// exchange's TCP connection.
func (s *session) openDevice(local netip.Addr) error {
	if s.o.bind != "" {
		local = netip.MustParseAddr(s.o.bind).Unmap()
	}
	if s.o.ipv6 && local.Is4() {
		return fmt.Errorf("--ipv6: this end reached the peer over IPv4 (%v): give --bind an IPv6 address of this host, or HOST an IPv6 address", local)
	}
	if !s.o.ipv6 && local.Is6() && s.o.bind == "" {
		return fmt.Errorf("this end reached the peer over IPv6 (%v): add --ipv6 for an IPv6 GID, or --bind an IPv4 address", local)
	}
	addr := netip.AddrPortFrom(local, uint16(s.o.udpPort))
	conns, err := s.openSockets(addr)
	if err != nil {
		return err
	}
	sink, err := s.o.traceSink()
	if err != nil {
		closeConns(conns)
		return err
	}
	dev, err := rxe.OpenConns(conns, rxe.Options{OwnConn: true, Name: s.o.devName, LocalDropMode: s.o.localDropMode, Trace: sink,
		Recovery: s.o.recovery.config(), ReceiveSpin: s.o.rxeReceiveSpin(), TrafficClass: uint8(s.o.tclass),
		LinkMTU: linkMTU})
	if err != nil {
		s.o.closeTrace()
		closeConns(conns)
		if s.pfile != nil {
			s.pfile.Close()
		}
		return err
	}
	s.dev = dev
	for _, c := range conns {
		// An end that only answers reads its sockets itself while it
		// spins (answerLoop): with -e or --busy-poll 0 it does not.
		if _, ok := netdev.AsSharedReader(c); !ok || (s.answersOnly() && s.o.busyPoll == 0) {
			s.unread++
		}
	}
	unreadSockets.Add(s.unread) // closeDevice takes them back
	return nil
}

// exchangeVersions is exchange_versions and check_version_compatibility.
// After perftest's version string it offers rxectl's gorxe-only data: the
// receive buffer each of the device's sockets was granted, how many
// receive sockets it has (one per completion vector, openSockets) and
// the selective-repeat offer.
func (s *session) exchangeVersions() error {
	rem := make([]byte, oob.VersionMsgSize)
	if err := s.oob.Exchange("exchanging versions", oob.VersionMsgOffer(s.dev.Addr().Port(),
		oob.Offer{RecvBuffer: s.bufs.Recv, RecvSockets: len(s.socks), SelectiveRepeat: s.srOffer()}), rem); err != nil {
		return err
	}
	s.peer = oob.ParseVersionMsg(rem)
	s.oob.SetPeerVersion(s.peer) // -R: perftest 6.29's key message layout
	if s.peer.Value < oob.MinPeerVersion {
		return fmt.Errorf("the peer's perftest version %q is older than 5.70, whose exchange differs (perftest 4.4-0.3x or newer is needed)", s.peer.Text)
	}
	port := uint16(defRoCEPort)
	if s.peer.RxeCtl {
		port = s.peer.UDPPort
	} else if s.dev.Addr().Port() != defRoCEPort {
		return fmt.Errorf("the peer is perftest %s, which sends RoCE to UDP port %d only: run without --udp-port (this end uses %d)", s.peer.Text, defRoCEPort, s.dev.Addr().Port())
	}
	s.peerAddr = netip.AddrPortFrom(netip.Addr{}, port)
	return nil
}

// exchangeSysData is check_sys_data: page size and cache line size, each
// side keeping the larger.
func (s *session) exchangeSysData() error {
	rem := make([]byte, 4)
	if err := s.oob.Exchange("exchanging the page size", oob.Int32Msg(oob.OurCycleBuffer), rem); err != nil {
		return err
	}
	s.cycleBuffer = max(oob.OurCycleBuffer, int(int32(beUint32(rem))))
	if err := s.oob.Exchange("exchanging the cache line size", oob.Int32Msg(oob.OurCacheLine), rem); err != nil {
		return err
	}
	if s.cycleBuffer > 1<<24 {
		return fmt.Errorf("the peer's page size %d is implausible", s.cycleBuffer)
	}
	return nil
}

// linkMTU is the link MTU the devices are opened with (rxe.Options.LinkMTU):
// 0, the interface's. Tests set it to give a port a smaller active MTU.
var linkMTU = 0

// exchangeMTU is check_mtu: both sides send their MTU enum and use the
// smaller. The MTU this side offers is perftest set_mtu's: -m, lowered to
// the port's active MTU when it is above it, or the active MTU when -m is
// none of 256-4096 (perftest runs on in both cases, with a note; so does
// rxectl, with its note on stderr). A peer's smaller MTU is taken as
// perftest takes it; rxectl says so on stderr when -m asked for more.
func (s *session) exchangeMTU() error {
	active := s.dev.ActiveMTU()
	local := active
	if s.o.mtu != 0 {
		switch asked := rxe.MTU(mtuEnum(s.o.mtu)); {
		case asked == 0:
			fmt.Fprintf(s.errw, " -m %d is not a path MTU (256, 512, 1024, 2048 or 4096): using the port's active MTU %d\n",
				s.o.mtu, active.Bytes())
		case asked > active:
			fmt.Fprintf(s.errw, " -m %d is above this port's active MTU %d (link MTU %d minus RoCE headers): using %d\n",
				s.o.mtu, active.Bytes(), s.dev.PortAttr().LinkMTU, active.Bytes())
		default:
			local = asked
		}
	}
	rem := make([]byte, oob.MTUMsgSize)
	if err := s.oob.Exchange("exchanging the MTU", oob.MTUMsg(int(local)), rem); err != nil {
		return err
	}
	r := oob.ParseMTUMsg(rem)
	s.mtu = local
	if r >= 1 && r <= 5 && rxe.MTU(r) < local {
		if s.o.mtu != 0 {
			fmt.Fprintf(s.errw, " the peer's MTU is %d (its -m or port MTU), below -m %d: using %d\n",
				rxe.MTU(r).Bytes(), s.o.mtu, rxe.MTU(r).Bytes())
		}
		s.mtu = rxe.MTU(r)
	}
	return nil
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// allocate makes the PD, the buffer and its MR, the CQs and the QPs, and
// this side's key messages (set_up_connection). The buffer holds, per QP,
// a local region (what we send from) and, after all of those, the region
// the peer targets, whose address we advertise.
func (s *session) allocate() error {
	o := s.o
	var err error
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return err
	}
	s.buffSize = roundUp(max(s.recvSize(o.maxSize()), s.cycleBuffer), 4096)
	if err := s.checkMemory(); err != nil {
		return err
	}
	nq := o.qps
	// setup_mr_flags: remote rights only for the verb under test, so a
	// SEND test's rkey is 0 as perftest's is.
	access := rxe.AccessLocalWrite
	switch s.t.verb {
	case verbWrite:
		access |= rxe.AccessRemoteWrite
	case verbRead:
		access |= rxe.AccessRemoteRead
	case verbAtomic:
		access |= rxe.AccessRemoteAtomic
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 2*nq*s.buffSize), access); err != nil {
		return err
	}
	if err := s.createCQs(nq); err != nil {
		return err
	}
	s.outReads = 1
	if s.t.verb == verbRead || s.t.verb == verbAtomic {
		s.outReads = s.dev.Attr().MaxQPRdAtom
		if o.outs > 0 {
			s.outReads = min(o.outs, s.outReads)
		}
	}
	if o.useSRQ && s.receives() {
		// perftest: one SRQ of rx-depth WQEs for all the QPs, on the ends
		// that receive.
		if s.srq, err = s.pd.CreateSRQ(rxe.SRQAttr{MaxWR: o.rxDepth, MaxSGE: 1}); err != nil {
			return fmt.Errorf("create the SRQ (--use-srq): %w", err)
		}
	}
	if s.cm != nil {
		return s.connectCMQPs() // the QPs come from the rdma_cm connections
	}
	gid := s.dev.GID().As16()
	for i := range nq {
		scq, rcq := s.qpCQs(i)
		qp, err := s.pd.CreateQP(rxe.QPInitAttr{Type: s.qpType(), SendCQ: scq, RecvCQ: rcq, SRQ: s.srq, BlockSelfMcastLoopback: o.mcg,
			Cap: rxe.QPCap{MaxSendWR: o.txDepth, MaxRecvWR: s.qpRecvWR(), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: o.inline}})
		if err != nil {
			return err
		}
		s.qps = append(s.qps, qp)
		s.my = append(s.my, oob.KeyMsg{OutReads: uint16(s.outReads), QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF,
			RKey: s.mr.RKey(), VAddr: s.remoteRegion(i), GID: gid})
	}
	s.rem = make([]oob.KeyMsg, nq)
	if err := s.attachMcast(); err != nil {
		return err
	}
	s.startCounters()
	return nil
}

func roundUp(v, a int) int { return (v + a - 1) / a * a }

// receives reports whether this end posts receives: the SEND tests' server,
// both ends of send-lat and of send-bw -b.
func (s *session) receives() bool {
	return s.t.verb == verbSend && (s.t.lat || !s.client || s.o.bidir)
}

// qpRecvWR is the receive queue depth of a test QP: none on an SRQ.
func (s *session) qpRecvWR() int {
	if s.srq != nil {
		return 0
	}
	return s.o.rxDepth
}

// localRegion and remoteRegion are the buffer offsets of QP i's regions;
// remoteRegion returns the advertised virtual address.
func (s *session) localRegion(i int) int { return i * s.buffSize }

func (s *session) remoteRegion(i int) uint64 {
	return s.mr.Addr() + uint64((s.o.qps+i)*s.buffSize)
}

// hsQPs exchanges every QP's key message; the first time it learns the
// peer's.
func (s *session) hsQPs(step string) error {
	for i := range s.my {
		k, err := s.oob.Handshake(step, s.my[i])
		if err != nil {
			return err
		}
		s.rem[i] = k
	}
	return nil
}

// hs is one more key exchange of QP 0's messages, a synchronisation point.
func (s *session) hs(step string) error {
	_, err := s.oob.Handshake(step, s.my[0])
	return err
}

// qpType is the QP type of -c.
func (s *session) qpType() rxe.QPType {
	switch s.o.connType {
	case "UC":
		return rxe.QPTypeUC
	case "UD":
		return rxe.QPTypeUD
	}
	return rxe.QPTypeRC
}

// connect is ctx_connect: INIT with the verb's access right, RTR toward
// the peer's QP, and RTS on the client (and on both ends of a latency
// test), with perftest's attributes (protocol reference §5.3). A UC QP
// takes only the attributes UC has: no responder resources or RNR timer
// at RTR, no timeout, retry counts or READ depth at RTS.
func (s *session) connect() error {
	if s.cm != nil {
		return s.connectCM()
	}
	for _, rem := range s.rem {
		if g := netip.AddrFrom16(rem.GID).Unmap(); g.IsMulticast() && s.mcastPeer() {
			// The client of -g sends to the server's group.
		} else if !g.IsValid() || g.IsUnspecified() || g.IsMulticast() || g == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return fmt.Errorf("the peer sent GID %v, not the unicast IP address of a host", netip.AddrFrom16(rem.GID))
		}
	}
	gid := netip.AddrFrom16(s.rem[0].GID).Unmap()
	s.peerAddr = netip.AddrPortFrom(gid, s.peerAddr.Port())
	s.rqPSN = s.rem[0].PSN
	if gid.Is4() != s.dev.Addr().Addr().Is4() {
		return fmt.Errorf("the peer's GID %v and ours %v are of different IP versions (ctx_check_gid_compatibility)", gid, s.dev.Addr().Addr())
	}
	access := s.remoteAccess()
	if s.qpType() == rxe.QPTypeUD {
		return s.connectUD()
	}
	for i, qp := range s.qps {
		rem, my := s.rem[i], s.my[i]
		dgid := netip.AddrFrom16(rem.GID).Unmap()
		// An rxectl peer announced its receive buffer (zero from perftest
		// or an older rxectl: nothing changes on the wire then); rxe
		// gives this QP its share of it (peerBuffer).
		if err := qp.SetPeerReceiveBuffer(s.peerBuffer()); err != nil {
			return err
		}
		steps := []qpStep{
			{rxe.QPAttr{State: rxe.QPSInit, Port: 1, AccessFlags: access}, rxe.QPAttrState | rxe.QPAttrPKeyIndex | rxe.QPAttrPort | rxe.QPAttrAccessFlags},
			{rxe.QPAttr{State: rxe.QPSRTR, AH: rxe.AH{DGID: dgid, UDPPort: s.peerAddr.Port(), HopLimit: 0xFF},
				PathMTU: s.mtu, DestQPN: rem.QPN, RQPSN: rem.PSN, MaxDestRdAtomic: int(my.OutReads), MinRNRTimer: minRNRTimer},
				rxe.QPAttrState | rxe.QPAttrAV | rxe.QPAttrPathMTU | rxe.QPAttrDestQPN | rxe.QPAttrRQPSN | rxe.QPAttrMinRNRTimer | rxe.QPAttrMaxDestRdAtomic},
		}
		if s.qpType() == rxe.QPTypeUC {
			steps[1].mask &^= rxe.QPAttrMinRNRTimer | rxe.QPAttrMaxDestRdAtomic
		}
		s.srAttr(&steps[1].attr, &steps[1].mask)
		if s.t.lat || s.client || s.o.bidir {
			steps = append(steps, qpStep{rxe.QPAttr{State: rxe.QPSRTS, SQPSN: my.PSN, Timeout: uint8(s.o.timeout), RetryCnt: uint8(s.o.retryCount), RNRRetry: 7,
				MaxRdAtomic: max(int(rem.OutReads), 1)},
				rxe.QPAttrState | rxe.QPAttrSQPSN | rxe.QPAttrTimeout | rxe.QPAttrRetryCnt | rxe.QPAttrRNRRetry | rxe.QPAttrMaxQPRdAtomic})
		}
		if s.qpType() == rxe.QPTypeUC && len(steps) == 3 {
			steps[2].mask = rxe.QPAttrState | rxe.QPAttrSQPSN
		}
		if err := modifySteps(qp, steps); err != nil {
			return fmt.Errorf("connect QP %#x to %v QP %#x: %w", qp.QPN(), s.peerAddr, rem.QPN, err)
		}
	}
	return nil
}

// qpStep is one QP transition of ctx_connect: the attributes and their
// mask.
type qpStep struct {
	attr rxe.QPAttr
	mask rxe.QPAttrMask
}

// modifySteps makes qp's transitions in order and stops at the first that
// fails.
func modifySteps(qp *rxe.QP, steps []qpStep) error {
	for _, st := range steps {
		if err := qp.Modify(&st.attr, st.mask); err != nil {
			return err
		}
	}
	return nil
}

// flowRDMABW is read_bw.c, write_bw.c and atomic_bw.c without -b: the
// client runs, the server only answers and waits at the end.
func (s *session) flowRDMABW(ctx context.Context) error {
	if s.o.bidir {
		return s.flowBidirBW(ctx)
	}
	if err := s.connectAndPrint(false); err != nil {
		return err
	}
	if err := s.hs("synchronising after RTR"); err != nil {
		return err
	}
	s.oob.RunStarted()
	s.printTableHeader()
	if !s.client {
		if err := s.hs("waiting for the client to finish"); err != nil {
			return err
		}
		rep, err := s.oob.ExchangeReports(report.BW{Size: uint64(s.o.size), Iters: uint64(s.o.iters * s.o.qps)})
		if err != nil {
			return err
		}
		s.addBW(rep)
		if err := s.oob.CloseConnection(s.my[0]); err != nil {
			return err
		}
		s.printLine()
		return nil
	}
	var last report.BW
	s.softStop.Store(true) // from here an interrupt ends the run and reports it
	for _, size := range s.o.sizes() {
		if ctx.Err() != nil {
			break
		}
		r, err := s.runBWClient(ctx, size)
		if err != nil {
			return err
		}
		last = r
		s.addBW(r)
	}
	s.printLine()
	if err := s.hs("synchronising at the end"); err != nil {
		return err
	}
	if _, err := s.oob.ExchangeReports(last); err != nil {
		return err
	}
	return s.oob.CloseConnection(s.my[0])
}

// flowSendBW is send_bw.c without -b: the server receives and measures
// too.
func (s *session) flowSendBW(ctx context.Context) error {
	if s.o.bidir {
		return s.flowBidirBW(ctx)
	}
	if err := s.connectAndPrint(true); err != nil {
		return err
	}
	s.oob.RunStarted()
	s.printTableHeader()
	// From here an interrupt ends the client's run and reports it: the
	// server sees the client stop on the exchange (watchPeer: its TCP
	// connection, or with -R the rdma_cm connection's next message).
	if s.client {
		s.softStop.Store(true)
	}
	for _, size := range s.o.sizes() {
		if s.client && s.endsAfterInterrupt(ctx) {
			break // the server sees the closing exchange instead of this size's
		}
		// The server's runBWServer synchronises once its receive loop
		// runs.
		if s.client {
			if err := s.hs("synchronising before the run"); err != nil {
				return err
			}
		} else if err := s.postRecvs(min(s.o.rxDepth, s.o.iters)); err != nil {
			return err
		}
		var r report.BW
		var err error
		if s.client {
			r, err = s.runBWClient(ctx, size)
		} else {
			r, err = s.runBWServer(ctx, size)
		}
		if errors.Is(err, errClientEnded) {
			// The client's closing key exchange was this size's first;
			// its "done" is waiting.
			fmt.Fprintf(s.errw, " The client ended the run before the %d-byte size (it was interrupted): no larger sizes are run\n", size)
			s.printLine()
			return s.oob.Finish(true)
		}
		if err != nil {
			return err
		}
		if r.Iters > 0 || !s.o.all { // -a: none when the client was interrupted before this size
			s.addBW(r)
		}
		if s.o.all {
			if err := s.hs("synchronising after the run"); err != nil {
				return err
			}
		}
	}
	s.printLine()
	return s.oob.CloseConnection(s.my[0])
}

// endsAfterInterrupt reports whether an interrupted send-bw client of -a
// (ctx ended) runs no more sizes and closes the exchange at once: when its
// server is rxectl over TCP, which tells the closing key exchange from the
// next size's by the oob.DoneMsg that follows it (runBWServer, peekDone).
// perftest's server, which knows no interrupt, and an -R server, whose
// exchange has no DoneMsg, get the exchange of every size left, with no
// messages.
func (s *session) endsAfterInterrupt(ctx context.Context) bool {
	return s.o.all && ctx.Err() != nil && s.peer.RxeCtl && s.cm == nil
}

// flowBidirBW is the BW programs with -b (duplex): both ends are in RTS
// and run the traffic loop at once (run_iter_bi), each timing its own
// requests; then, per size, a key exchange, xchg_bw_reports, and both
// print print_full_bw_report with the peer's report added: the size and
// iterations are this end's, peak, average and message rate the sums of
// both directions, so both ends print the same BW.
func (s *session) flowBidirBW(ctx context.Context) error {
	send := s.t.verb == verbSend
	if err := s.connectAndPrint(send); err != nil {
		return err
	}
	if !send {
		if err := s.hs("synchronising after RTR"); err != nil {
			return err
		}
	}
	s.oob.RunStarted()
	s.printTableHeader()
	s.softStop.Store(true) // an interrupt ends this end's posting; the exchange goes on
	s.markPeerBase()
	// Once the peer has stopped early (interrupted), this end posts no
	// more sizes either, as the interrupted end posts none.
	runs, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	for _, size := range s.o.sizes() {
		if send {
			// runBidir synchronises once its receive loop runs.
			if err := s.postRecvs(min(s.o.rxDepth, s.o.iters)); err != nil {
				return err
			}
		}
		r, early, err := s.runBidir(runs, size)
		if err != nil {
			return err
		}
		if early {
			stopRuns()
		}
		s.markPeerBase()
		if send && s.o.duration > 0 {
			// perftest's send_bw -b -D exchanges no reports: each end's
			// row counts both directions (bidirSendRow).
			s.addBW(r)
			continue
		}
		rem, err := s.oob.ExchangeReports(r)
		if err != nil {
			return err
		}
		if r.Iters > 0 || rem.Iters > 0 { // else interrupted before this size
			s.addBW(bidirSum(r, rem, s.o.gbits))
		}
		if s.stopsAllSizes(r, rem) {
			if ctx.Err() == nil {
				fmt.Fprintf(s.errw, " The peer stopped early (interrupted?) during the %d-byte size: no larger sizes are run\n", size)
			}
			break
		}
	}
	s.printLine()
	return s.oob.CloseConnection(s.my[0])
}

// stopsAllSizes reports whether both ends of -b -a with an rxectl peer
// run no more sizes after the one whose reports are r (this end's) and
// rem (the peer's): either end sent fewer than its -n requests (it was
// interrupted, or stopped because its peer was). Both ends see both
// reports, so both decide alike and go to the closing exchange together.
// With perftest, which knows no interrupt, an end goes through the
// exchange of every size left, posting nothing.
func (s *session) stopsAllSizes(r, rem report.BW) bool {
	total := uint64(s.o.iters * len(s.qps))
	return s.o.all && s.peer.RxeCtl && (r.Iters < total || rem.Iters < total)
}

// bidirSum is the row a -b end prints, print_full_bw_report's with the
// peer's report: this end's size and iterations, the sum of both
// directions' peak, average and message rate, this end's --cpu_util
// figures (its window: the host's processors), and in Gb/s six decimals
// when this end's own average is below 0.1, as perftest decides before
// it adds the peer's (inc_accuracy).
func bidirSum(r, rem report.BW, gbits bool) report.BW {
	return report.BW{Size: r.Size, Iters: r.Iters, Peak: r.Peak + rem.Peak, Avg: r.Avg + rem.Avg, MsgRate: r.MsgRate + rem.MsgRate,
		CPUUtil: r.CPUUtil, CPUSeconds: r.CPUSeconds, SixDecimals: gbits && r.Avg < 0.1}
}

// runBidir is run_iter_bi: this end's requests, timed as runBWClient
// times them, and for send-bw at once the receives of the peer's
// messages (not timed: the peer reports its direction); then the key
// exchange that follows the run. In send-bw the receive loop starts
// before the exchange that lets the peer send (startReceiving), and the
// receives go on during the exchange after the run: the peer writes its
// message once its own requests are done, whatever it has received.
//
// An end that is interrupted stops posting, and its next exchange message
// follows its last completion. Over RC this end watches the exchange
// (watchPeer) and, once the peer's message is waiting or the peer closed
// the connection, counts the PSNs the peer's requests took on each QP
// since the size began (peerStoppedEarly): every request of a peer that
// finished has been acknowledged by then. Fewer than -n requests' worth
// means the peer stopped early, and this end stops posting too, noting it
// on stderr, instead of running its iterations to the end alone; early
// reports it.
func (s *session) runBidir(ctx context.Context, size int) (r report.BW, early bool, err error) {
	// send-bw: this end's receive loop runs before the exchange after
	// which the peer sends (startReceiving). The peer sends all its
	// messages even if this end is interrupted: the loop is not under ctx.
	var rc *receiving
	if s.t.verb == verbSend {
		rc = s.startReceiving(context.Background(), size, true)
		if err := s.hs("synchronising before the run"); err != nil {
			rc.abort()
			return r, false, err
		}
	}
	spoke, watching, stopWatch := s.watchPeer(context.Background())
	defer stopWatch()
	sctx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var stoppedEarly atomic.Bool // the peer stopped before its last request
	// With -D each end runs for its own duration: the peer owes no count.
	if watching && s.qpType() == rxe.QPTypeRC && s.o.duration == 0 {
		checked := make(chan struct{})
		stopAfter := context.AfterFunc(spoke, func() {
			defer close(checked)
			if s.peerStoppedEarly(size) {
				stoppedEarly.Store(true)
				stopSending()
			}
		})
		defer func() {
			if !stopAfter() {
				<-checked // it ran: let it finish with s.peerBase
			}
		}()
	}
	// The peer has stopped sending once its message is waiting (spoke) or
	// this end has read it (synced: the exchange below may read it first).
	synced := func() {}
	if rc != nil {
		synced = rc.peerStopped
		stopAfter := context.AfterFunc(spoke, synced)
		defer stopAfter()
	}
	r, err = s.runBWClient(sctx, size)
	if err == nil {
		err = s.hs("synchronising after the run")
	}
	synced()
	var rcvd report.BW // send-bw -D: the receives of the sample window
	var rerr error
	if rc != nil {
		rcvd, rerr = rc.wait()
	}
	if err != nil {
		return r, false, err
	}
	if s.t.verb == verbSend && s.o.duration > 0 && rerr == nil {
		r = bidirSendRow(r, rcvd, s.o.gbits)
	}
	early = stoppedEarly.Load() && ctx.Err() == nil
	if early {
		fmt.Fprintf(s.errw, " Sent %d of %d messages of %d bytes: the peer stopped sending early (interrupted?), so this end stopped too\n",
			r.Iters, s.o.iters*len(s.qps), size)
	}
	return r, early, rerr
}

// bidirSendRow is the row of one end of send-bw -b -D, as perftest's
// run_iter_bi counts it in duration mode: the messages this end sent and
// those it received, each its sample window's row, in one count over the
// sender's window (the receiver's when nothing was sent); the ends
// exchange no reports.
func bidirSendRow(sent, rcvd report.BW, gbits bool) report.BW {
	w := sent
	if w.Iters == 0 {
		w = rcvd
	}
	var elapsed time.Duration
	if w.Iters > 0 && w.MsgRate > 0 { // a row's window: its count over its rate
		elapsed = time.Duration(float64(w.Iters) / (w.MsgRate * 1e6) * float64(time.Second))
	}
	r := report.NewBW(int(sent.Size), sent.Iters+rcvd.Iters, elapsed, gbits)
	r.CPUUtil, r.CPUSeconds = w.CPUUtil, w.CPUSeconds // the window the row counts over
	return r
}

// peerStoppedEarly reports whether the peer's requests of this size took
// fewer PSNs on some QP than -n of them take (SEND and WRITE one per
// packet, READ one per response packet, an atomic one): the responder's
// expected PSN against s.peerBase, where the size began. The comparison
// is modulo 2^24, the PSN space.
func (s *session) peerStoppedEarly(size int) bool {
	pkts := 1
	if s.t.verb != verbAtomic {
		pkts = max(1, (size+s.mtu.Bytes()-1)/s.mtu.Bytes())
	}
	want := uint32(s.o.iters*pkts) & 0xFFFFFF
	for q, qp := range s.qps {
		if (qp.Query().RQPSN-s.peerBase[q])&0xFFFFFF != want {
			return true
		}
	}
	return false
}

// markPeerBase records each QP's expected PSN as where the peer's
// requests of the next size begin (peerStoppedEarly): the peer's key
// message's PSN before the first size, the responder's expected PSN after
// each size's closing exchange (the peer's requests of that size are all
// acknowledged by then).
func (s *session) markPeerBase() {
	if s.peerBase == nil {
		s.peerBase = make([]uint32, len(s.qps))
		for q := range s.qps {
			s.peerBase[q] = s.rem[q].PSN
		}
		return
	}
	for q, qp := range s.qps {
		s.peerBase[q] = qp.Query().RQPSN
	}
}

// flowReadAtomicLat is read_lat.c and atomic_lat.c: the client posts and
// times each operation; the server only answers.
func (s *session) flowReadAtomicLat(ctx context.Context) error {
	if err := s.latPrologue(); err != nil {
		return err
	}
	s.oob.RunStarted()
	if s.client {
		s.printTableHeader()
		if err := s.latRuns(ctx, nil, s.runLatReadAtomic); err != nil {
			return err
		}
	}
	stopAnswering := s.startAnswering()
	err := s.oob.CloseConnection(s.my[0])
	if aerr := stopAnswering(); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	s.printLine()
	return nil
}

// flowSendLat is send_lat.c: SEND ping-pong, the client sending first.
func (s *session) flowSendLat(ctx context.Context) error {
	if err := s.connectAndPrint(true); err != nil {
		return err
	}
	s.oob.RunStarted()
	s.printTableHeader()
	if err := s.latRuns(ctx, s.prepareSend, s.runLatSend); err != nil {
		return err
	}
	s.printLine()
	return s.oob.CloseConnection(s.my[0])
}

// flowWriteLat is write_lat.c: RDMA WRITE ping-pong, both sides polling
// memory, the server writing first. perftest has no closing exchange here:
// both ends just close.
func (s *session) flowWriteLat(ctx context.Context) error {
	if err := s.latPrologue(); err != nil {
		return err
	}
	s.oob.RunStarted()
	s.printTableHeader()
	if err := s.latRuns(ctx, nil, s.runLatWrite); err != nil {
		return err
	}
	s.printLine()
	return s.oob.Finish(false)
}

// latPrologue is read_lat.c's and write_lat.c's exchange before the
// measurement: a key exchange, connectAndPrint and a synchronisation.
func (s *session) latPrologue() error {
	if err := s.hs("exchanging QP information"); err != nil {
		return err
	}
	if err := s.connectAndPrint(false); err != nil {
		return err
	}
	return s.hs("synchronising after RTR")
}

// latRuns runs the latency test run for every size of the run, after
// before (if set), and records and prints each row.
func (s *session) latRuns(ctx context.Context, before func(size int) error, run func(ctx context.Context, size int) (report.Lat, error)) error {
	for _, size := range s.o.sizes() {
		if before != nil {
			if err := before(size); err != nil {
				return err
			}
		}
		r, err := run(ctx, size)
		if err != nil {
			return err
		}
		r.Counters = s.counterDeltas()
		s.latResults = append(s.latResults, r)
		s.printLatRow(r)
		s.printCounters(s.out, r.Counters)
	}
	return nil
}

// prepareSend posts the receives of send-lat's next size and synchronises
// with the peer before its run. The SEND bandwidth runs post theirs and
// synchronise once their receive loop runs (startReceiving).
func (s *session) prepareSend(size int) error {
	if err := s.postRecvs(min(s.o.rxDepth, s.o.iters)); err != nil {
		return err
	}
	return s.hs("synchronising before the run")
}

// addBW records and prints a bandwidth row.
func (s *session) addBW(r report.BW) {
	r.Counters = s.counterDeltas()
	s.bwResults = append(s.bwResults, r)
	s.printBWRow(r)
	s.printCounters(s.out, r.Counters)
}

// connectAndPrint is the common middle of every program: the per-QP key
// exchange, ctx_connect, the local address lines, the second per-QP
// exchange and the remote address lines. syncAfterConnect adds send_bw's
// and send_lat's exchange right after ctx_connect.
func (s *session) connectAndPrint(syncAfterConnect bool) error {
	if err := s.hsQPs("exchanging QP information"); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if syncAfterConnect {
		if err := s.hs("synchronising after connecting"); err != nil {
			return err
		}
	}
	for i := range s.my {
		s.printAddr("local", s.my[i])
	}
	for i := range s.my {
		k, err := s.oob.Handshake("exchanging remote addresses", s.my[i])
		if err != nil {
			return err
		}
		s.rem[i] = k
		s.printAddr("remote", k)
	}
	if s.o.hooks.connected != nil {
		s.o.hooks.connected(s)
	}
	return nil
}

// postRecvs tops every QP's posted receives up to n (ctx_set_recv_wqes);
// with an SRQ, which every QP takes from, n is shared out between the
// QPs' buffers (perftest's size_per_qp / num_of_qps), each at least one.
// Receives a size left posted (its sender stopped early) count: posting
// n more each size would overflow the receive queue.
//
// With --recv_post_list N the receives go N at a time, in one PostRecv
// call each list (perftest's ctx_set_recv_wqes posts rx_depth / N lists),
// so each QP tops up to the largest multiple of N within n.
func (s *session) postRecvs(n int) error {
	if len(s.rposted) != len(s.qps) { // the first size
		s.rposted, s.rowed = make([]int, len(s.qps)), make([]int, len(s.qps))
	}
	if s.srq != nil {
		n = max(1, n/len(s.qps))
	}
	l := s.o.recvPostList
	for q := range s.qps {
		s.rowed[q] = 0 // the top-up stands for what the last size owed
		for s.rposted[q]+l <= n {
			if err := s.postRecvList(q, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// postRecv posts a receive for QP q in place of one completed: at once,
// or with --recv_post_list N once N are owed, as a list of N (perftest's
// run_iter_bw_server posts a list once N receives of the QP are unused),
// or sooner once the QP holds none.
func (s *session) postRecv(q int) error {
	if l := s.o.recvPostList; l > 1 {
		// A QP left with no receive posts what it is owed at once, a
		// shorter list: after UC/UD losses a size may begin with fewer
		// than N posted (postRecvs tops up in whole lists).
		if s.rowed[q]++; s.rowed[q] < l && s.rposted[q] > 0 {
			return nil
		}
		n := s.rowed[q]
		s.rowed[q] = 0
		return s.postRecvList(q, n)
	}
	return s.postRecvList(q, 1)
}

// postOwed posts QP q's receives owed under --recv_post_list as one
// list, shorter than N: when a size of an iteration run has counted a
// receive for every one of its messages, those owed are for its last
// ones. After losses (UC, UD) the receives left from the size before
// need not be a multiple of N, so some may be owed then.
func (s *session) postOwed(q int) error {
	if s.rowed == nil || s.rowed[q] == 0 {
		return nil
	}
	n := s.rowed[q]
	s.rowed[q] = 0
	return s.postRecvList(q, n)
}

// postRecvList posts n receives into QP q's buffer in one call, each large
// enough for the run's largest message (a receive left over from a
// smaller size of -a still fits), on QP q or, with --use-srq, on the SRQ
// (whichever QP's message then takes it), and counts them in s.rposted.
func (s *session) postRecvList(q, n int) error {
	wr := rxe.RecvWR{ID: uint64(q), SGList: []rxe.SGE{s.mr.SGE(int(s.remoteRegion(q)-s.mr.Addr()), s.recvSize(s.o.maxSize()))}}
	if cap(s.rlist) < n {
		s.rlist = make([]rxe.RecvWR, n)
	}
	list := s.rlist[:n]
	for i := range list {
		list[i] = wr
	}
	var err error
	if s.srq != nil {
		_, err = s.srq.PostRecv(list...)
	} else {
		_, err = s.qps[q].PostRecv(list...)
	}
	if err != nil {
		return fmt.Errorf("post receive: %w", err)
	}
	s.rposted[q] += n
	return nil
}

// remoteAccess is the access the test's verb needs on the QPs (the
// flags perftest's ctx_modify_qp_to_init sets).
func (s *session) remoteAccess() rxe.AccessFlags {
	switch s.t.verb {
	case verbAtomic:
		return rxe.AccessRemoteAtomic
	case verbRead:
		return rxe.AccessRemoteRead
	case verbWrite:
		return rxe.AccessRemoteWrite
	case verbSend:
		return rxe.AccessRemoteWrite | rxe.AccessLocalWrite
	}
	return 0
}
