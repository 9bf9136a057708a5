package netdev

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// batchConn is what UDPConn needs from x/net's ipv4.PacketConn and
// ipv6.PacketConn (ipv4.Message and ipv6.Message are the same type).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// maxICMPRetries bounds how many queued ICMP errors in a row one send may
// absorb before the error is returned.
const maxICMPRetries = 8

// UDPConn is a Conn over an unconnected UDP socket (see the package
// documentation for the socket options it sets). Create it with ListenUDP.
type UDPConn struct {
	uc       *net.UDPConn
	rc       syscall.RawConn
	pc       batchConn
	local    netip.AddrPort
	v6       bool
	wildcard bool
	batch    int
	wflags   int
	bufs     BufferSizes
	closed   atomic.Bool
	stats    counters

	rmu   sync.Mutex // serialises ReadBatch; guards the fields below
	rm    []ipv4.Message
	rbufs [][]byte // rm[i].Buffers is rbufs[i : i+1]
	roob  []byte   // recvOOBSize bytes per message

	wmu   sync.Mutex // serialises WriteBatch; guards the fields below
	wm    []ipv4.Message
	wbufs [][]byte
	waddr []net.UDPAddr
	wip   [][16]byte // backing arrays of waddr[i].IP
	woob  []byte     // sendOOBSize bytes per message
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
	setup := &socketSetup{v6: v6, wildcard: ip.IsUnspecified(), reusePort: reusePort, opts: opts}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = setup.apply(int(fd)) }); err != nil {
			return err
		}
		return serr
	}}
	pconn, err := lc.ListenPacket(context.Background(), network, bind.String())
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
		uc:       uc,
		rc:       rc,
		local:    local,
		v6:       v6,
		wildcard: setup.wildcard,
		batch:    n,
		bufs:     setup.got,
		rm:       make([]ipv4.Message, n),
		rbufs:    make([][]byte, n),
		roob:     make([]byte, n*recvOOBSize),
		wm:       make([]ipv4.Message, n),
		wbufs:    make([][]byte, n),
		waddr:    make([]net.UDPAddr, n),
		wip:      make([][16]byte, n),
		woob:     make([]byte, n*sendOOBSize),
	}
	if v6 {
		c.pc = ipv6.NewPacketConn(uc)
	} else {
		c.pc = ipv4.NewPacketConn(uc)
	}
	if !opts.BlockingWrite {
		c.wflags = unix.MSG_DONTWAIT
	}
	for i := range n {
		c.rm[i].Buffers = c.rbufs[i : i+1 : i+1]
		c.wm[i].Buffers = c.wbufs[i : i+1 : i+1]
		c.wm[i].Addr = &c.waddr[i]
	}
	return c, nil
}

// BatchSize implements Conn.
func (c *UDPConn) BatchSize() int { return c.batch }

// LocalAddr implements Conn. IPv4 addresses are never v4-mapped.
func (c *UDPConn) LocalAddr() netip.AddrPort { return c.local }

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
	rm := c.rm[:min(len(msgs), len(c.rm))]
	defer func() {
		for i := range rm {
			c.rbufs[i] = nil // keep no reference to the caller's buffers
			rm[i].Addr = nil
		}
	}()
	for {
		for i := range rm {
			c.rbufs[i] = msgs[i].Buf[:cap(msgs[i].Buf)]
			rm[i].OOB = c.roob[i*recvOOBSize : (i+1)*recvOOBSize]
		}
		got, err := c.pc.ReadBatch(rm, 0)
		if err != nil {
			cls, _ := classify(err)
			if cls == classICMP {
				icmp, _ := drainErrQueue(c.rc)
				c.stats.icmpErrors.Add(uint64(max(icmp, 1)))
				continue
			}
			return 0, err
		}
		if n := c.finishRead(msgs, rm[:got]); n > 0 {
			return n, nil
		}
	}
}

// finishRead converts the received messages to msgs, dropping truncated
// ones by moving the good ones to the front, and returns how many are good.
func (c *UDPConn) finishRead(msgs []Message, rm []ipv4.Message) int {
	good, bytes := 0, 0
	var drops uint32
	haveDrops := false
	for i := range rm {
		r := &rm[i]
		dst, d, hd := parseRecvCmsgs(r.OOB[:r.NN])
		if hd {
			drops, haveDrops = d, true
		}
		if r.Flags&unix.MSG_TRUNC != 0 {
			c.stats.truncated.Add(1)
			continue
		}
		if i != good {
			msgs[good], msgs[i] = msgs[i], msgs[good]
		}
		m := &msgs[good]
		good++
		m.N = r.N
		bytes += r.N
		m.Addr = udpAddrPort(r.Addr)
		if !c.wildcard || !dst.IsValid() {
			dst = c.local.Addr()
		}
		m.Local = dst
	}
	if haveDrops {
		c.stats.recvOverflows.Store(uint64(drops))
	}
	c.stats.packetsReceived.Add(uint64(good))
	c.stats.bytesReceived.Add(uint64(bytes))
	return good
}

// udpAddrPort converts the sender address x/net reports.
func udpAddrPort(a net.Addr) netip.AddrPort {
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ip, ok := netip.AddrFromSlice(ua.IP)
	if !ok {
		return netip.AddrPort{}
	}
	if ip.Is6() && ua.Zone != "" {
		ip = ip.WithZone(ua.Zone)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(ua.Port))
}

// WriteBatch implements Conn.
//
// A local drop returns a DropError (ENOBUFS; EAGAIN unless
// Options.BlockingWrite). Queued ICMP errors from earlier datagrams are
// absorbed, counted and the datagram is sent again. Other errors (EMSGSIZE
// for a datagram over the path MTU, no route, closed) are returned as x/net
// reports them: a *net.OpError wrapping the errno or net.ErrClosed.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	sent := 0
	for sent < len(msgs) {
		chunk := msgs[sent:min(len(msgs), sent+len(c.wm))]
		k, verr := c.pack(chunk)
		if k > 0 {
			n, err := c.send(c.wm[:k], chunk[:k])
			sent += n
			if err != nil {
				c.unpack(k)
				return sent, err
			}
		}
		c.unpack(k)
		if verr != nil {
			return sent, verr
		}
	}
	return sent, nil
}

// pack fills c.wm from chunk. It stops at the first invalid message and
// returns how many it packed, and the error for the invalid one.
func (c *UDPConn) pack(chunk []Message) (int, error) {
	for i := range chunk {
		m := &chunk[i]
		if m.N < 0 || m.N > cap(m.Buf) {
			return i, fmt.Errorf("%w: N = %d, cap(Buf) = %d", ErrInvalidMessage, m.N, cap(m.Buf))
		}
		ip := m.Addr.Addr()
		ua := &c.waddr[i]
		switch {
		case !m.Addr.IsValid():
			return i, fmt.Errorf("%w: no destination address", ErrInvalidMessage)
		case c.v6 && ip.Is6() && !ip.Is4In6():
			c.wip[i] = ip.As16()
			ua.IP = c.wip[i][:16]
			ua.Zone = ip.Zone()
		case !c.v6 && (ip.Is4() || ip.Is4In6()):
			a := ip.Unmap().As4()
			copy(c.wip[i][:4], a[:])
			ua.IP = c.wip[i][:4]
			ua.Zone = ""
		default:
			return i, fmt.Errorf("%w: destination %v on a socket bound to %v", ErrInvalidMessage, m.Addr, c.local)
		}
		ua.Port = int(m.Addr.Port())
		c.wbufs[i] = m.Buf[:m.N]
		c.wm[i].OOB = nil
		if src := m.Local; src.IsValid() && !src.IsUnspecified() {
			if c.v6 != (src.Is6() && !src.Is4In6()) {
				return i, fmt.Errorf("%w: source %v on a socket bound to %v", ErrInvalidMessage, src, c.local)
			}
			oob := c.woob[i*sendOOBSize : (i+1)*sendOOBSize]
			c.wm[i].OOB = oob[:putSourceCmsg(oob, src.Unmap())]
		}
	}
	return len(chunk), nil
}

// unpack drops the references pack took to the caller's buffers.
func (c *UDPConn) unpack(k int) {
	for i := range k {
		c.wbufs[i] = nil
	}
}

// send hands all of wm (packed from ms) to the kernel, working around the
// x/net and sendmmsg quirks, and returns how many went out.
func (c *UDPConn) send(wm []ipv4.Message, ms []Message) (int, error) {
	done, icmpRetries := 0, 0
	for done < len(wm) {
		n, err := c.pc.WriteBatch(wm[done:], c.wflags)
		if n > 0 { // x/net returns n = -1 with an error on the first message
			bytes := 0
			for i := done; i < done+n; i++ {
				bytes += ms[i].N
			}
			c.stats.packetsSent.Add(uint64(n))
			c.stats.bytesSent.Add(uint64(bytes))
			done += n
			icmpRetries = 0
		}
		if err == nil {
			if n <= 0 {
				return done, errors.New("netdev: sendmmsg sent nothing and reported no error")
			}
			// A short count without an error: sendmmsg stopped at a
			// datagram that failed and dropped the error. Send the rest
			// again, so it either goes out or reports its error.
			continue
		}
		cls, errno := classify(err)
		switch cls {
		case classNoBufs:
			c.stats.noBufs.Add(1)
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
