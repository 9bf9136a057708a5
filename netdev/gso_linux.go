package netdev

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// UDP segmentation offload on send (UDP_SEGMENT, Linux 4.18) and receive
// offload (UDP_GRO, Linux 5.0).

const (
	// maxGSOSegments is the most datagrams in one GSO send: the kernel's
	// UDP_MAX_SEGMENTS (64; later kernels allow more).
	maxGSOSegments = 64
	// maxGSOBytes bounds the payload of one GSO send: an IP datagram of
	// at most 65535 bytes with the IPv4 or IPv6 and UDP headers, with room
	// to spare.
	maxGSOBytes = 65535 - 40 - 8
	// gsoWireMax bounds a GSO buffer as a qdisc counts it (qdisc_pkt_len:
	// the payloads and every datagram's Ethernet, IP and UDP headers,
	// gsoOverhead), so that a qdisc that takes packets of up to 64 KiB
	// takes the buffer whole: tbf segments a longer one (its burst bounds
	// a packet) and drops the datagrams beyond its queue limit without an
	// error (tbf_segment).
	gsoWireMax = 65535
	// groBufSize holds the largest buffer GRO delivers (one IP datagram's
	// worth of payload).
	groBufSize = 65536
)

// probeOffloads reports whether the kernel accepts UDP_SEGMENT and UDP_GRO
// on fd; asking for UDP_GRO also turns it on.
func probeOffloads(fd int, wantGSO, wantGRO bool) (gso, gro bool) {
	if wantGSO {
		gso = unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
	}
	if wantGRO {
		gro = unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1) == nil
	}
	return gso, gro
}

// gsoRefusal reports whether errno from a GSO send means the kernel cannot
// segment this socket's datagrams (udp_send_skb: EIO without checksum
// offload, EINVAL for a segment size or count it does not take), so that
// sending them one by one is the way on. ENOPROTOOPT and EOPNOTSUPP are not
// refusals: udp_send_skb never returns them, and a queued ICMP protocol
// unreachable or source route failed error (classICMP) fails the next send
// with them.
func gsoRefusal(errno unix.Errno) bool {
	return errno == unix.EIO || errno == unix.EINVAL
}

// pack fills c.tx's headers from the front of chunk: a run of messages that
// GSO may send as one buffer shares a header, every other message has its
// own. With plain, it packs chunk[0] alone, without UDP_SEGMENT (neither
// GSO nor paged: WriteBatch's test of a refusal). It returns how many
// messages (k) and headers (h) it packed, and the error for an invalid
// message at chunk[k], if it stopped there.
func (c *UDPConn) pack(chunk []Message, plain bool) (k, h int, err error) {
	w := c.tx
	gso := c.gso.Load() && !plain
	for k < len(chunk) && h < len(w.hdrs) && k < len(w.iovs) && !(plain && h == 1) {
		m := &chunk[k]
		if err := c.checkMessage(m); err != nil {
			return k, h, err
		}
		run := 1
		if gso {
			run = c.runLength(chunk[k:], len(w.iovs)-k)
		}
		hdr := &w.hdrs[h].Hdr
		hdr.Name = &w.names[h][0]
		hdr.Namelen = uint32(putSockaddr(&w.names[h], m.Addr, c.v6))
		hdr.Iov = &w.iovs[k]
		hdr.SetIovlen(run)
		hdr.Flags = 0
		oob := w.oobAt(h)
		n := 0
		if src := m.Local; src.IsValid() && !src.IsUnspecified() {
			n = putSourceCmsg(oob, src.Unmap())
		}
		seg := run > 1 || !plain && m.N > 0 && c.PagesTo(m.Addr.Addr())
		if seg {
			n += putSegmentCmsg(oob[n:], m.N) // a single one: paged (paged_linux.go)
		}
		c.hdrSeg[h] = seg
		if m.TOS != 0 {
			n += putTOSCmsg(oob[n:], m.TOS, c.v6)
		}
		if n > 0 {
			hdr.Control = &oob[0]
		} else {
			hdr.Control = nil
		}
		hdr.SetControllen(n)
		for j := range run {
			d := &chunk[k+j]
			w.setIov(k+j, d.Buf[:d.N])
			c.ids[k+j] = 0
			if j > 0 && c.rewrite != nil {
				c.rewrite(d.Buf[:d.N], 0, uint16(j))
				c.ids[k+j] = uint16(j)
			}
		}
		c.hdrMsgs[h] = run
		k += run
		h++
	}
	return k, h, nil
}

// checkMessage checks that m can be sent on c.
func (c *UDPConn) checkMessage(m *Message) error {
	if m.N < 0 || m.N > cap(m.Buf) {
		return fmt.Errorf("%w: N = %d, cap(Buf) = %d", ErrInvalidMessage, m.N, cap(m.Buf))
	}
	ip := m.Addr.Addr()
	switch {
	case !m.Addr.IsValid():
		return fmt.Errorf("%w: no destination address", ErrInvalidMessage)
	case c.v6 && ip.Is6() && !ip.Is4In6():
	case !c.v6 && (ip.Is4() || ip.Is4In6()):
	default:
		return fmt.Errorf("%w: destination %v on a socket bound to %v", ErrInvalidMessage, m.Addr, c.local)
	}
	if src := m.Local; src.IsValid() && !src.IsUnspecified() && c.v6 != (src.Is6() && !src.Is4In6()) {
		return fmt.Errorf("%w: source %v on a socket bound to %v", ErrInvalidMessage, src, c.local)
	}
	return nil
}

// runLength is how many messages from the front of ms (at most limit) one
// GSO send can carry: the same destination, source and traffic class, the first one's
// size for all but the last, which may be shorter, all valid and non-empty,
// within the kernel's segment and byte limits and gsoMax bytes as a qdisc
// counts them (gsoOverhead per datagram).
func (c *UDPConn) runLength(ms []Message, limit int) int {
	first := &ms[0]
	seg := first.N
	if seg == 0 {
		return 1
	}
	oh := c.gsoOverhead()
	n, bytes, wire := 1, seg, seg+oh
	limit = min(limit, maxGSOSegments, len(ms))
	for n < limit {
		m := &ms[n]
		if m.N <= 0 || m.N > seg || m.N > cap(m.Buf) || bytes+m.N > maxGSOBytes || wire+m.N+oh > c.gsoMax ||
			m.Addr != first.Addr || !sameSource(m.Local, first.Local) || m.TOS != first.TOS || c.checkMessage(m) != nil ||
			c.runsByQPN && !sameQPN(first.Buf[:first.N], m.Buf[:m.N]) {
			break
		}
		n++
		bytes += m.N
		wire += m.N + oh
		if m.N < seg {
			break // a shorter datagram ends a run
		}
	}
	return n
}

// gsoOverhead is what a qdisc counts for each datagram of a GSO buffer
// besides its payload: Ethernet, IP and UDP headers (qdisc_pkt_len_init).
func (c *UDPConn) gsoOverhead() int {
	if c.v6 {
		return 14 + 40 + 8
	}
	return 14 + 20 + 8
}

// shrinkGSO halves gsoMax after the local host refused the GSO buffer of
// refused (ENOBUFS): at most half its bytes as a qdisc counts them, at
// least one datagram's. A qdisc drops a buffer whose length exceeds its
// queue limit whole, however empty the queue is (tbf's queue, a bfifo of
// limit bytes), so resending the same buffer after a back-off would be
// refused for ever; smaller buffers fit, and single datagrams fit wherever
// an unsegmented sender's do.
func (c *UDPConn) shrinkGSO(refused []Message) {
	oh, wire := c.gsoOverhead(), 0
	for i := range refused {
		wire += refused[i].N + oh
	}
	c.gsoMax = max(min(c.gsoMax, wire/2), refused[0].N+oh)
	c.gsoChanged = c.now()
	c.stats.gsoShrinks.Add(1)
	c.stats.gsoLimit.Store(uint64(c.gsoMax))
}

// gsoRegrow is how long gsoMax stays as shrinkGSO (or the last growGSO) set
// it before a GSO buffer sent doubles it.
const gsoRegrow = time.Second

// growGSO doubles gsoMax, up to gsoWireMax, once gsoRegrow has passed
// since it last changed; WriteBatch calls it after a GSO buffer went out.
// A refusal that came from a queue merely full for a moment then costs
// larger buffers for a second, while a qdisc that can never take a large
// buffer is tried with one once a second only: a buffer longer than tbf's
// burst is segmented there and its datagrams beyond the queue limit are
// dropped without an error (tbf_segment), a loss the transport must
// recover, so growing back a datagram per buffer would bring those losses
// back within a few dozen buffers.
func (c *UDPConn) growGSO() {
	if c.gsoMax >= gsoWireMax {
		return
	}
	if now := c.now(); now.Sub(c.gsoChanged) >= gsoRegrow {
		c.gsoMax = min(2*c.gsoMax, gsoWireMax)
		c.gsoChanged = now
		c.stats.gsoLimit.Store(uint64(c.gsoMax))
	}
}

// sameQPN reports whether a ListenUDPGroup steers datagrams a and b to
// the same socket: the same BTH DestQP, or both too short for one
// (steerByQPN).
func sameQPN(a, b []byte) bool {
	if len(a) < 8 || len(b) < 8 {
		return len(a) < 8 && len(b) < 8
	}
	return a[5] == b[5] && a[6] == b[6] && a[7] == b[7]
}

// sameSource reports whether two Message.Local values select the same source.
func sameSource(a, b netip.Addr) bool {
	aSet := a.IsValid() && !a.IsUnspecified()
	bSet := b.IsValid() && !b.IsUnspecified()
	if !aSet || !bSet {
		return aSet == bSet
	}
	return a.Unmap() == b.Unmap()
}

// unrewrite undoes the IPv4 ID rewrite of ms[from:], the messages not sent.
func (c *UDPConn) unrewrite(ms []Message, from int) {
	if c.rewrite == nil {
		return
	}
	for i := from; i < len(ms); i++ {
		if id := c.ids[i]; id != 0 {
			c.rewrite(ms[i].Buf[:ms[i].N], id, 0)
			c.ids[i] = 0
		}
	}
}

// groEntries is how many 64 KiB buffers a GRO reader with batch size n
// receives into per recvmmsg: each may hold up to 64 datagrams, so 8 cover
// the largest batches of full datagrams, in 512 KiB per socket.
func groEntries(n int) int { return max(1, min(n, 8)) }

// groReader holds a UDPConn's GRO receive buffers and the datagrams of the
// last recvmmsg not yet returned.
type groReader struct {
	bufs [][]byte
	got  int // buffers filled by the last recvmmsg
	next int // the buffer being split
	off  int // where its next datagram starts
	seg  []int
	size []int
	from []netip.AddrPort
	to   []netip.Addr
	ip   [][2]uint8 // TOS and TTL (Message), one for every datagram of a buffer
}

// init sizes the reader for n buffers; the buffers themselves are made at
// the first read, so a socket that only sends never holds them.
func (g *groReader) init(n int) {
	g.bufs = make([][]byte, n)
	g.seg = make([]int, n)
	g.size = make([]int, n)
	g.from = make([]netip.AddrPort, n)
	g.to = make([]netip.Addr, n)
	g.ip = make([][2]uint8, n)
}

// readGRO is ReadBatch with UDP_GRO: it returns the datagrams left from the
// last recvmmsg, or receives into the GRO buffers and splits them.
func (c *UDPConn) readGRO(msgs []Message) (int, error) {
	g := &c.grx
	for g.next >= g.got {
		c.setGROIovs()
		got, err := c.recv(len(c.rx.hdrs))
		if err != nil {
			return 0, err
		}
		c.fillGRO(got)
	}
	return c.splitGRO(msgs), nil
}

// setGROIovs points the receive headers' I/O vectors at the GRO buffers,
// making those not made yet.
func (c *UDPConn) setGROIovs() {
	g, r := &c.grx, c.rx
	for i := range r.hdrs {
		if g.bufs[i] == nil {
			g.bufs[i] = make([]byte, groBufSize)
		}
		r.setIov(i, g.bufs[i])
	}
}

// fillGRO records the got buffers the last recvmmsg filled as the ones
// to split, dropping those whose data or control data was truncated
// (recvDropped): without its UDP_GRO control message a coalesced buffer
// cannot be split.
func (c *UDPConn) fillGRO(got int) {
	g, r := &c.grx, c.rx
	g.got, g.next, g.off = 0, 0, 0
	for i := range got {
		h := &r.hdrs[i]
		cm := c.recvInfo(i)
		seg := cm.gso
		if c.recvDropped(i) {
			continue
		}
		j := g.got
		g.got++
		g.bufs[i], g.bufs[j] = g.bufs[j], g.bufs[i]
		g.size[j] = int(h.Len)
		if seg <= 0 || seg >= g.size[j] {
			seg = g.size[j]
		} else {
			c.stats.groBuffers.Add(1)
		}
		g.seg[j] = seg
		g.from[j] = sockaddrAddrPort(&r.names[i], int(h.Hdr.Namelen))
		g.to[j] = cm.dst
		g.ip[j] = [2]uint8{cm.tos, cm.ttl}
	}
}

// splitGRO fills msgs with the next datagrams of the received buffers, as
// slices of them, and returns how many: at most BatchSize, as Conn.ReadBatch
// promises, although the buffers of one recvmmsg may hold 64 times more.
func (c *UDPConn) splitGRO(msgs []Message) int {
	msgs = msgs[:min(len(msgs), c.batch)]
	g := &c.grx
	n, bytes := 0, 0
	for n < len(msgs) && g.next < g.got {
		j := g.next
		end := min(g.off+g.seg[j], g.size[j])
		m := &msgs[n]
		m.Buf = g.bufs[j][g.off:end:end]
		m.N = end - g.off
		m.Addr = g.from[j]
		m.Local = g.to[j]
		m.TOS, m.TTL = g.ip[j][0], g.ip[j][1]
		bytes += m.N
		n++
		g.off = end
		if g.off >= g.size[j] {
			g.next++
			g.off = 0
		}
	}
	c.stats.packetsReceived.Add(uint64(n))
	c.stats.bytesReceived.Add(uint64(bytes))
	return n
}
