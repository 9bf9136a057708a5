package netdev

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxICMPRetries bounds how many queued ICMP errors in a row one send may
// absorb before the error is returned.
const maxICMPRetries = 8

// UDPConn is a Conn over an unconnected UDP socket (see the package
// documentation for the socket options it sets). Create it with ListenUDP.
type UDPConn struct {
	uc        *net.UDPConn
	rc        syscall.RawConn
	local     netip.AddrPort
	v6        bool
	wildcard  bool
	batch     int
	bufs      BufferSizes
	closed    atomic.Bool
	stats     counters
	gso       atomic.Bool // UDP_SEGMENT is available and has not failed
	gro       bool        // UDP_GRO is on
	paged     atomic.Bool // single datagrams to this host go out paged (PagesTo)
	rewrite   func(dgram []byte, from, to uint16)
	runsByQPN bool // Options.RunsByQPN

	rmu sync.Mutex // serialises ReadBatch; guards the fields below
	rx  *mmsg
	grx groReader // with gro

	// The state of ReadBatchGated and TryReadBatch (shared_linux.go),
	// which use rx and grx under their caller's gate instead of rmu.
	gated  gatedRead
	tryRun func(fd uintptr)

	wmu     sync.Mutex // serialises WriteBatch; guards the fields below
	tx      *mmsg
	hdrMsgs []int    // messages per sendmmsg header
	hdrSeg  []bool   // the header carries a UDP_SEGMENT control message (GSO or paged)
	ids     []uint16 // the IPv4 ID each packed message was rewritten for
	// gsoMax bounds one GSO buffer in bytes as a qdisc counts them
	// (runLength): gsoWireMax, halved by each refused buffer (shrinkGSO), doubled by a buffer sent
	// a second or more after it last changed (growGSO, at gsoChanged).
	gsoMax     int
	gsoChanged time.Time
	now        func() time.Time // time.Now; tests set another clock
}

// ListenUDP opens a UDP socket bound to addr. An IPv4 address (or an
// IPv4-mapped IPv6 one) gives an IPv4 socket; an IPv6 address gives an
// IPV6_V6ONLY socket, so [::] does not receive IPv4. Port 0 binds an
// ephemeral port; the caller chooses any other port (RoCEv2 uses 4791).
func ListenUDP(addr netip.AddrPort, opts Options) (*UDPConn, error) {
	return listenUDP(addr, opts, false)
}

// listenUDP is ListenUDP; reusePort sets SO_REUSEPORT before bind (see
// ListenUDPGroup).
func listenUDP(addr netip.AddrPort, opts Options, reusePort bool) (*UDPConn, error) {
	return listenSetup(addr, opts, socketSetup{reusePort: reusePort})
}

// listenSetup opens the socket of listenUDP and ListenMulticastUDP with
// the options of setup (reusePort, multicast) and opts.
func listenSetup(addr netip.AddrPort, opts Options, setup socketSetup) (*UDPConn, error) {
	if !addr.IsValid() {
		return nil, fmt.Errorf("netdev: ListenUDP: invalid address %v", addr)
	}
	ip := addr.Addr()
	v6 := ip.Is6() && !ip.Is4In6()
	network := "udp4"
	if v6 {
		network = "udp6" // Go sets IPV6_V6ONLY for "udp6"
	} else {
		ip = ip.Unmap()
	}
	bind := netip.AddrPortFrom(ip, addr.Port())
	setup.v6, setup.wildcard, setup.opts = v6, ip.IsUnspecified(), opts
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = setup.apply(int(fd)) }); err != nil {
			return err
		}
		return serr
	}}
	var pconn net.PacketConn
	var err error
	if setup.multicast {
		pconn, err = bindGroup(bind, &setup)
	} else {
		pconn, err = lc.ListenPacket(context.Background(), network, bind.String())
	}
	if err != nil {
		return nil, fmt.Errorf("netdev: ListenUDP %v: %w", bind, err)
	}
	uc := pconn.(*net.UDPConn)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("netdev: ListenUDP %v: %w", bind, err)
	}
	local := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())

	n := batchSize(opts.BatchSize)
	c := &UDPConn{
		uc:        uc,
		rc:        rc,
		local:     local,
		v6:        v6,
		wildcard:  setup.wildcard,
		batch:     n,
		bufs:      setup.got,
		gro:       setup.gro,
		tx:        newMmsg(n, n, sendOOBSize+gsoOOBSize+tosOOBSize, unix.SYS_SENDMMSG),
		hdrMsgs:   make([]int, n),
		hdrSeg:    make([]bool, n),
		ids:       make([]uint16, n),
		runsByQPN: opts.RunsByQPN,
		gsoMax:    gsoWireMax,
		now:       time.Now,
	}
	c.stats.gsoLimit.Store(gsoWireMax)
	c.gso.Store(setup.gso && (v6 || opts.RewriteIPv4ID != nil))
	c.paged.Store(setup.paged)
	if !v6 {
		c.rewrite = opts.RewriteIPv4ID
	}
	c.tx.block = opts.BlockingWrite
	c.tx.flags = unix.MSG_DONTWAIT
	c.tx.handOff = setup.got.RecvCapped() || setup.got.SendCapped()
	rxHdrs := n
	if c.gro {
		rxHdrs = groEntries(n)
		c.grx.init(rxHdrs)
	}
	c.rx = newRecvMmsg(rxHdrs, recvOOBSize)
	return c, nil
}

// newRecvMmsg makes the receive state: n headers of one I/O vector each,
// with oobSize bytes of control buffer per header (recvOOBSize; tests give
// less to make the kernel truncate the control data).
func newRecvMmsg(n, oobSize int) *mmsg {
	r := newMmsg(n, n, oobSize, unix.SYS_RECVMMSG)
	r.block = true
	r.flags = unix.MSG_DONTWAIT
	for i := range n {
		h := &r.hdrs[i].Hdr
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
	}
	return r
}

// BatchSize implements Conn.
func (c *UDPConn) BatchSize() int { return c.batch }

// LocalAddr implements Conn. IPv4 addresses are never v4-mapped.
func (c *UDPConn) LocalAddr() netip.AddrPort { return c.local }

// SyscallConn returns the socket's raw connection, as net.UDPConn's does:
// for socket options this package does not set, and for tests that find
// the socket in /proc by its descriptor. Reads and writes through it
// bypass WriteBatch's and ReadBatch's bookkeeping.
func (c *UDPConn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// BufferSizes reports the socket buffer sizes obtained at ListenUDP.
func (c *UDPConn) BufferSizes() BufferSizes { return c.bufs }

// Stats returns a snapshot of the counters.
func (c *UDPConn) Stats() Stats { return c.stats.snapshot() }

// Close implements Conn.
func (c *UDPConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.uc.Close()
}

// ReadBatch implements Conn. Queued ICMP errors (ECONNREFUSED after sending
// to a closed port, and the like) are absorbed and counted, never returned.
func (c *UDPConn) ReadBatch(msgs []Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.gro {
		return c.readGRO(msgs)
	}
	r := c.rx
	k := min(len(msgs), len(r.hdrs))
	defer r.clearIovs(k) // keep no reference to the caller's buffers
	for {
		for i := range k {
			r.setIov(i, msgs[i].Buf[:cap(msgs[i].Buf)])
		}
		got, err := c.recv(k)
		if err != nil {
			return 0, err
		}
		if n := c.finishRead(msgs, got); n > 0 {
			return n, nil
		}
	}
}

// recv runs recvmmsg over the first k headers of c.rx, whose I/O vectors are
// set, absorbing queued ICMP errors, and returns how many it filled.
func (c *UDPConn) recv(k int) (int, error) {
	r := c.rx
	for {
		r.prepRecv(k)
		if err := c.read(r.run); err != nil {
			return 0, err // closed: a *net.OpError wrapping net.ErrClosed
		}
		if r.errno == 0 {
			return r.got, nil
		}
		err := opError("read", "recvmmsg", r.errno)
		if cls, _ := classify(err); cls == classICMP {
			icmp, _ := drainErrQueue(c.rc)
			c.stats.icmpErrors.Add(uint64(max(icmp, 1)))
			continue
		}
		return 0, err
	}
}

// errEventWait bounds each wait of read's fallback in poll(2): a Close
// waits for it to end.
const errEventWait = 10 // milliseconds

// read runs f (a receive attempt that returns false when it would wait)
// as RawConn.Read does, waiting in the runtime poller while f returns
// false. One case needs more: when an ICMP error reaches the socket while
// its send buffer is more than half full, epoll reports EPOLLERR alone
// (udp_poll sets neither EPOLLIN nor EPOLLOUT), and the Go runtime then
// fails every RawConn.Read at once ("not pollable": netpollcheckerr's
// eventErr) until the socket's next event of another kind, a datagram's
// arrival or send-buffer space. read then runs f in RawConn.Control, and
// when f would wait it empties the socket's error queue (counted in
// Stats.ICMPErrors; the pending ICMP error is f's, which returns it) and
// waits in poll(2) for the socket to become readable, at most
// errEventWait, before it tries RawConn.Read again. It returns nil once f
// returned true, or RawConn.Read's error wrapping net.ErrClosed (or
// os.ErrDeadlineExceeded, after a read deadline set on the socket). When
// Close has begun (closed set, the socket maybe not closed yet) and
// RawConn.Read fails otherwise, it returns an error wrapping
// net.ErrClosed too, as Conn.Close promises, without waiting in poll(2).
func (c *UDPConn) read(f func(fd uintptr) bool) error {
	for {
		err := c.rc.Read(f)
		if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if c.closed.Load() {
			return &net.OpError{Op: "read", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
		}
		done := false
		if err := c.rc.Control(func(fd uintptr) {
			if done = f(fd); done {
				return
			}
			if icmp, _ := drainErrQueue(c.rc); icmp > 0 {
				c.stats.icmpErrors.Add(uint64(icmp))
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, errEventWait)
		}); err != nil {
			return err
		}
		if done {
			return nil
		}
		runtime.Gosched() // a reader that holds the gate (ReadBatchGated) reads what poll saw
	}
}

// prepRecv readies the first k receive headers, whose I/O vectors are
// set, for one recvmmsg: the address and control buffers, and the count.
func (r *mmsg) prepRecv(k int) {
	for i := range k {
		h := &r.hdrs[i].Hdr
		h.Name = &r.names[i][0]
		h.Namelen = sockaddrSize
		oob := r.oobAt(i)
		h.Control = &oob[0]
		h.SetControllen(len(oob))
		h.Flags = 0
	}
	r.start, r.n = 0, k
}

// opError wraps a system call's errno as net.UDPConn reports errors.
func opError(op, call string, errno unix.Errno) error {
	return &net.OpError{Op: op, Net: "udp", Err: os.NewSyscallError(call, errno)}
}

// finishRead converts the first got received headers to msgs, dropping
// truncated datagrams (recvDropped) by moving the good ones to the front,
// and returns how many are good.
func (c *UDPConn) finishRead(msgs []Message, got int) int {
	r := c.rx
	good, bytes := 0, 0
	for i := range got {
		h := &r.hdrs[i]
		cm := c.recvInfo(i)
		if c.recvDropped(i) {
			continue
		}
		if i != good {
			msgs[good], msgs[i] = msgs[i], msgs[good]
		}
		m := &msgs[good]
		good++
		m.N = int(h.Len)
		bytes += m.N
		m.Addr = sockaddrAddrPort(&r.names[i], int(h.Hdr.Namelen))
		m.Local = cm.dst
		m.TOS, m.TTL = cm.tos, cm.ttl
	}
	c.stats.packetsReceived.Add(uint64(good))
	c.stats.bytesReceived.Add(uint64(bytes))
	return good
}

// recvDropped reports whether received header i holds a buffer to drop,
// and counts it: its data was truncated (MSG_TRUNC: longer than the
// buffer; Stats.Truncated) or its control data was (MSG_CTRUNC;
// Stats.ControlTruncated). A buffer whose control data was truncated may
// lack its UDP_GRO segment size, so that a coalesced buffer of several
// datagrams would pass for one, or its IP_PKTINFO destination, so that
// Local would be wrong; either way the RoCE layer would drop it later, so
// it is dropped here, where the loss is counted. recvOOBSize holds every
// control message the socket asks for, so the kernel truncates only if it
// adds messages of its own.
func (c *UDPConn) recvDropped(i int) bool {
	switch f := c.rx.hdrs[i].Hdr.Flags; {
	case f&unix.MSG_TRUNC != 0:
		c.stats.truncated.Add(1)
	case f&unix.MSG_CTRUNC != 0:
		c.stats.controlTruncated.Add(1)
	default:
		return false
	}
	return true
}

// recvInfo reads received header i's control messages: it records the drop
// counter and returns what they say, with the datagram's destination
// address always set. It reads no further than the control buffer,
// whatever length the header reports.
func (c *UDPConn) recvInfo(i int) recvCmsgs {
	h := &c.rx.hdrs[i].Hdr
	oob := c.rx.oobAt(i)
	cm := parseRecvCmsgs(oob[:min(uint64(h.Controllen), uint64(len(oob)))])
	if cm.haveDrops {
		c.stats.recvOverflows.Store(uint64(cm.drops))
	}
	if !c.wildcard || !cm.dst.IsValid() {
		cm.dst = c.local.Addr()
	}
	return cm
}

// ReportIPFields implements IPFieldReporter: it asks the kernel for the
// traffic class and TTL of every datagram received from now on (IP_RECVTOS
// and IP_RECVTTL, or IPV6_RECVTCLASS and IPV6_RECVHOPLIMIT). The receive
// control buffers hold them already (recvOOBSize), so it may be called
// while another goroutine reads.
func (c *UDPConn) ReportIPFields() error {
	opts := []intOpt{{"IP_RECVTOS", unix.IPPROTO_IP, unix.IP_RECVTOS, 1}, {"IP_RECVTTL", unix.IPPROTO_IP, unix.IP_RECVTTL, 1}}
	if c.v6 {
		opts = []intOpt{{"IPV6_RECVTCLASS", unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1}, {"IPV6_RECVHOPLIMIT", unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1}}
	}
	var serr error
	if err := c.rc.Control(func(fd uintptr) { serr = setIntOpts(int(fd), opts) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("netdev: %w", serr)
	}
	return nil
}

// WriteBatch implements Conn.
//
// A local drop returns a DropError (ENOBUFS; EAGAIN unless
// Options.BlockingWrite). Queued ICMP errors from earlier datagrams are
// absorbed, counted and the datagram is sent again. Other errors (EMSGSIZE
// for a datagram over the path MTU, no route, closed) are returned as
// net.UDPConn reports them: a *net.OpError wrapping the errno or
// net.ErrClosed.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	sent := 0
	// refused is set when the kernel failed a header with UDP_SEGMENT
	// (errGSORefused, errPagedRefused): the next pass sends the first
	// datagram it held alone and without UDP_SEGMENT. If that goes out,
	// the kernel refused the segmentation, which is turned off for good
	// (refuse); if it fails, the error is that datagram's own (EINVAL for
	// port 0 or a multicast source, EMSGSIZE) and is returned as for any
	// datagram, with GSO and paged sends kept.
	var refused error
	for sent < len(msgs) {
		chunk := msgs[sent:]
		k, h, verr := c.pack(chunk, refused != nil)
		if h > 0 {
			n, err := c.send(chunk[:k], h)
			c.tx.clearIovs(k) // keep no reference to the caller's buffers
			sent += n
			if refused != nil && n > 0 {
				c.refuse(refused)
			}
			refused = nil
			if err == errGSORefused || err == errPagedRefused {
				refused = err
				continue // the rest again, the first datagram alone
			}
			if err != nil {
				return sent, err
			}
		}
		if verr != nil {
			return sent, verr
		}
	}
	return sent, nil
}

// errGSORefused and errPagedRefused are send's reports that the kernel
// failed a GSO send, or a single datagram sent paged, with an errno that
// may mean it refuses the segmentation (gsoRefusal); WriteBatch tells
// which by sending the first datagram alone without it.
var (
	errGSORefused   = errors.New("netdev: GSO refused")
	errPagedRefused = errors.New("netdev: paged send refused")
)

// refuse turns off what the kernel refused (errGSORefused: GSO,
// errPagedRefused: paged sends) for the life of the UDPConn.
func (c *UDPConn) refuse(err error) {
	switch err {
	case errGSORefused:
		c.gso.Store(false)
		c.stats.gsoFallbacks.Store(1)
	case errPagedRefused:
		c.paged.Store(false)
	}
}

// send hands the h packed headers (holding ms) to the kernel, working around
// the sendmmsg quirks, and returns how many messages went out. Before it
// returns, the messages that did not go out have their IPv4 ID rewrite
// undone.
func (c *UDPConn) send(ms []Message, h int) (int, error) {
	w := c.tx
	doneHdrs, done, icmpRetries := 0, 0, 0
	defer func() { c.unrewrite(ms, done) }()
	for doneHdrs < h {
		w.start, w.n = doneHdrs, h-doneHdrs
		if err := c.rc.Write(w.run); err != nil {
			return done, err // closed
		}
		if w.got > 0 {
			n, bytes := 0, 0
			for i := doneHdrs; i < doneHdrs+w.got; i++ {
				if c.hdrMsgs[i] > 1 {
					c.stats.gsoBuffers.Add(1)
					c.growGSO()
				}
				n += c.hdrMsgs[i]
			}
			for i := done; i < done+n; i++ {
				bytes += ms[i].N
			}
			c.stats.packetsSent.Add(uint64(n))
			c.stats.bytesSent.Add(uint64(bytes))
			done += n
			doneHdrs += w.got
			icmpRetries = 0
		}
		if w.errno == 0 {
			if w.got <= 0 {
				return done, errors.New("netdev: sendmmsg sent nothing and reported no error")
			}
			// A short count without an error: sendmmsg stopped at a
			// datagram that failed and dropped the error. Send the rest
			// again, so it either goes out or reports its error.
			continue
		}
		if c.hdrSeg[doneHdrs] && gsoRefusal(w.errno) {
			if c.hdrMsgs[doneHdrs] > 1 {
				return done, errGSORefused
			}
			return done, errPagedRefused
		}
		err := opError("write", "sendmmsg", w.errno)
		cls, errno := classify(err)
		switch cls {
		case classNoBufs:
			c.stats.noBufs.Add(1)
			if m := c.hdrMsgs[doneHdrs]; m > 1 {
				c.shrinkGSO(ms[done : done+m])
			}
			return done, dropError(cls)
		case classWouldBlock:
			c.stats.wouldBlock.Add(1)
			return done, dropError(cls)
		case classICMP:
			// A queued ICMP error from an earlier datagram fails this
			// send without sending it; a local error (no route, EMSGSIZE)
			// leaves no ICMP entry on the error queue. ECONNREFUSED is
			// never local on an unconnected socket.
			icmp, _ := drainErrQueue(c.rc)
			if (icmp > 0 || errno == syscall.ECONNREFUSED) && icmpRetries < maxICMPRetries {
				c.stats.icmpErrors.Add(uint64(max(icmp, 1)))
				icmpRetries++
				continue
			}
		}
		return done, err
	}
	return done, nil
}
