package netdev

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketSetup configures a fresh UDP socket before bind and records what the
// kernel granted.
type socketSetup struct {
	v6, wildcard bool
	reusePort    bool // SO_REUSEPORT (ListenUDPGroup)
	multicast    bool // SO_REUSEADDR and no IP_MULTICAST_ALL (ListenMulticastUDP)
	opts         Options
	got          BufferSizes
	gso, gro     bool // UDP_SEGMENT is available; UDP_GRO is on
	paged        bool // UDP_SEGMENT is available, with or without Options.NoGSO
}

// intOpt is an integer socket option to set: its name for errors, its
// level, option and value.
type intOpt struct {
	name              string
	level, opt, value int
}

// setIntOpts sets the options of list on fd in order and returns the
// first failure, naming the option and value.
func setIntOpts(fd int, list []intOpt) error {
	for _, o := range list {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.value); err != nil {
			return fmt.Errorf("setsockopt %s=%d: %w", o.name, o.value, err)
		}
	}
	return nil
}

func (s *socketSetup) apply(fd int) error {
	var err error
	rforce, sforce := unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE
	if s.opts.NoForce {
		rforce, sforce = -1, -1
	}
	s.got.RecvAsked, s.got.SendAsked = max(s.opts.recvBuffer(), 0), max(s.opts.sendBuffer(), 0)
	s.got.Recv, s.got.RecvForced, err = setBuffer(fd, rforce, unix.SO_RCVBUF, s.opts.recvBuffer())
	if err != nil {
		return err
	}
	s.got.Send, s.got.SendForced, err = setBuffer(fd, sforce, unix.SO_SNDBUF, s.opts.sendBuffer())
	if err != nil {
		return err
	}
	var list []intOpt
	if s.v6 {
		list = []intOpt{
			{"IPV6_MTU_DISCOVER", unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO},
			{"IPV6_RECVERR", unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1},
			{"UDP_NO_CHECK6_RX", unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1},
		}
		if s.opts.TOS != 0 {
			list = append(list, intOpt{"IPV6_TCLASS", unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(s.opts.TOS)})
		}
		if s.wildcard {
			list = append(list, intOpt{"IPV6_RECVPKTINFO", unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1})
		}
	} else {
		list = []intOpt{
			{"IP_MTU_DISCOVER", unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO},
			{"IP_RECVERR", unix.IPPROTO_IP, unix.IP_RECVERR, 1},
		}
		if s.opts.TOS != 0 {
			list = append(list, intOpt{"IP_TOS", unix.IPPROTO_IP, unix.IP_TOS, int(s.opts.TOS)})
		}
		if s.wildcard {
			list = append(list, intOpt{"IP_PKTINFO", unix.IPPROTO_IP, unix.IP_PKTINFO, 1})
		}
	}
	list = append(list, intOpt{"SO_RXQ_OVFL", unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1})
	if s.reusePort {
		list = append(list, intOpt{"SO_REUSEPORT", unix.SOL_SOCKET, unix.SO_REUSEPORT, 1})
	}
	if s.multicast {
		// Several sockets of this host bind the same group and port (one
		// per device), and each receives its own copy of every datagram
		// (SO_REUSEADDR); a socket receives only the groups it joined,
		// not every group some socket of the host joined (the kernel's
		// default, IP_MULTICAST_ALL 1).
		list = append(list, intOpt{"SO_REUSEADDR", unix.SOL_SOCKET, unix.SO_REUSEADDR, 1})
		if s.v6 {
			list = append(list, intOpt{"IPV6_MULTICAST_ALL", unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_ALL, 0})
		} else {
			list = append(list, intOpt{"IP_MULTICAST_ALL", unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0})
		}
	}
	if err := setIntOpts(fd, list); err != nil {
		return fmt.Errorf("netdev: %w", err)
	}
	s.gso, s.gro = probeOffloads(fd, !s.opts.NoGSO, !s.opts.NoGRO)
	s.paged = probePaged(fd)
	return nil
}

// setBuffer asks for a socket buffer of size bytes, with the FORCE option
// first (it needs CAP_NET_ADMIN and ignores rmem_max/wmem_max; forceOpt < 0
// skips it) and the plain one as fallback (silently capped by the kernel).
// size <= 0 keeps the
// kernel's default; a size beyond an int32 (setsockopt's int) asks for the
// largest, which the kernel bounds anyway (sock_setsockopt: INT_MAX / 2,
// or net.core.rmem_max / wmem_max), instead of for its low 32 bits. It
// returns the size getsockopt reports afterwards (Linux doubles the
// request to account for bookkeeping).
func setBuffer(fd, forceOpt, plainOpt, size int) (got int, forced bool, err error) {
	size = min(size, math.MaxInt32)
	if size > 0 {
		if forceOpt >= 0 && unix.SetsockoptInt(fd, unix.SOL_SOCKET, forceOpt, size) == nil {
			forced = true
		} else if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, plainOpt, size); err != nil {
			return 0, false, fmt.Errorf("netdev: setsockopt buffer size %d: %w", size, err)
		}
	}
	got, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, plainOpt)
	if err != nil {
		return 0, false, fmt.Errorf("netdev: getsockopt buffer size: %w", err)
	}
	return got, forced, nil
}

// Control-message layout. The cmsghdr's length field is a size_t; the
// header is read and written with binary.NativeEndian rather than through a
// pointer so that no alignment is assumed.
const (
	cmsgLenSize  = int(unsafe.Sizeof(unix.Cmsghdr{}.Len))
	cmsgHdrSpace = unix.SizeofCmsghdr // already a multiple of the alignment
)

var (
	// cmsgDataOff is where a control message's data starts.
	cmsgDataOff = unix.CmsgLen(0)
	// recvOOBSize fits IPV6_PKTINFO (the larger pktinfo), SO_RXQ_OVFL,
	// UDP_GRO and the traffic class and TTL (UDPConn.ReportIPFields, ints
	// but IPv4's one-byte TOS): every control message the socket asks for,
	// all at once (TestRecvControlFits), so the kernel does not truncate
	// them (MSG_CTRUNC; UDPConn.recvDropped).
	recvOOBSize = unix.CmsgSpace(unix.SizeofInet6Pktinfo) + 4*unix.CmsgSpace(4)
	// sendOOBSize fits one IP_PKTINFO or IPV6_PKTINFO.
	sendOOBSize = unix.CmsgSpace(unix.SizeofInet6Pktinfo)
	// gsoOOBSize fits UDP_SEGMENT (a 16-bit segment size).
	gsoOOBSize = unix.CmsgSpace(2)
	// tosOOBSize fits IP_TOS or IPV6_TCLASS (an int).
	tosOOBSize = unix.CmsgSpace(4)
)

// cmsg is one parsed control message.
type cmsg struct {
	level, typ int32
	data       []byte
}

// nextCmsg splits the first control message off b. ok is false when b holds
// no complete message.
func nextCmsg(b []byte) (m cmsg, rest []byte, ok bool) {
	if len(b) < cmsgHdrSpace {
		return cmsg{}, nil, false
	}
	var l int
	if cmsgLenSize == 8 {
		l = int(binary.NativeEndian.Uint64(b))
	} else {
		l = int(binary.NativeEndian.Uint32(b))
	}
	if l < cmsgDataOff || l > len(b) {
		return cmsg{}, nil, false
	}
	m = cmsg{
		level: int32(binary.NativeEndian.Uint32(b[cmsgLenSize:])),
		typ:   int32(binary.NativeEndian.Uint32(b[cmsgLenSize+4:])),
		data:  b[cmsgDataOff:l],
	}
	next := unix.CmsgSpace(l - cmsgDataOff)
	if next >= len(b) {
		return m, nil, true
	}
	return m, b[next:], true
}

// putCmsgHdr writes a control-message header for dataLen bytes of data at
// the start of b and returns the data area.
func putCmsgHdr(b []byte, level, typ int32, dataLen int) []byte {
	l := unix.CmsgLen(dataLen)
	if cmsgLenSize == 8 {
		binary.NativeEndian.PutUint64(b, uint64(l))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(l))
	}
	binary.NativeEndian.PutUint32(b[cmsgLenSize:], uint32(level))
	binary.NativeEndian.PutUint32(b[cmsgLenSize+4:], uint32(typ))
	data := b[cmsgDataOff:l]
	clear(data)
	return data
}

// recvCmsgs is what the control messages of one received datagram say.
type recvCmsgs struct {
	dst       netip.Addr // from IP_PKTINFO or IPV6_PKTINFO; invalid if absent
	drops     uint32     // the socket's receive-drop counter (SO_RXQ_OVFL)
	haveDrops bool       // SO_RXQ_OVFL was present
	gso       int        // a GRO-coalesced buffer's segment size (UDP_GRO); 0 if absent
	tos, ttl  uint8      // IP_TOS / IPV6_TCLASS and IP_TTL / IPV6_HOPLIMIT; 0 if absent
}

// parseRecvCmsgs reads the control messages of one received datagram.
func parseRecvCmsgs(oob []byte) (c recvCmsgs) {
	for len(oob) > 0 {
		m, rest, ok := nextCmsg(oob)
		if !ok {
			break
		}
		switch {
		case m.level == unix.IPPROTO_IP && m.typ == unix.IP_PKTINFO && len(m.data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo { int ipi_ifindex; in_addr ipi_spec_dst; in_addr ipi_addr; };
			// ipi_addr is the destination address in the IP header.
			c.dst = netip.AddrFrom4([4]byte(m.data[8:12]))
		case m.level == unix.IPPROTO_IPV6 && m.typ == unix.IPV6_PKTINFO && len(m.data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo { in6_addr ipi6_addr; int ipi6_ifindex; };
			c.dst = netip.AddrFrom16([16]byte(m.data[0:16]))
		case m.level == unix.SOL_SOCKET && m.typ == unix.SO_RXQ_OVFL && len(m.data) >= 4:
			c.drops, c.haveDrops = binary.NativeEndian.Uint32(m.data), true
		case m.level == unix.SOL_UDP && m.typ == unix.UDP_GRO && len(m.data) >= 4:
			// udp_cmsg_recv puts the skb's gso_size as an int.
			c.gso = int(int32(binary.NativeEndian.Uint32(m.data)))
		case m.level == unix.SOL_UDP && m.typ == unix.UDP_GRO && len(m.data) >= 2:
			c.gso = int(binary.NativeEndian.Uint16(m.data))
		case m.level == unix.IPPROTO_IP && m.typ == unix.IP_TOS && len(m.data) >= 1:
			// ip_cmsg_recv_tos: the header's TOS byte itself.
			c.tos = m.data[0]
		case m.level == unix.IPPROTO_IP && m.typ == unix.IP_TTL && len(m.data) >= 4:
			// ip_cmsg_recv_ttl: the TTL as an int.
			c.ttl = uint8(binary.NativeEndian.Uint32(m.data))
		case m.level == unix.IPPROTO_IPV6 && m.typ == unix.IPV6_TCLASS && len(m.data) >= 4:
			c.tos = uint8(binary.NativeEndian.Uint32(m.data))
		case m.level == unix.IPPROTO_IPV6 && m.typ == unix.IPV6_HOPLIMIT && len(m.data) >= 4:
			c.ttl = uint8(binary.NativeEndian.Uint32(m.data))
		}
		oob = rest
	}
	return c
}

// putSegmentCmsg writes a UDP_SEGMENT control message (the segment size of a
// GSO send) into b (at least gsoOOBSize bytes) and returns its length.
func putSegmentCmsg(b []byte, size int) int {
	data := putCmsgHdr(b, unix.SOL_UDP, unix.UDP_SEGMENT, 2)
	binary.NativeEndian.PutUint16(data, uint16(size))
	return gsoOOBSize
}

// putTOSCmsg writes an IP_TOS (v4) or IPV6_TCLASS control message giving
// the datagram the traffic class tos into b (at least tosOOBSize bytes)
// and returns its length. Both take an int (ip_cmsg_send,
// ip6_datagram_send_ctl).
func putTOSCmsg(b []byte, tos uint8, v6 bool) int {
	var level, typ int32 = unix.IPPROTO_IP, unix.IP_TOS
	if v6 {
		level, typ = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	data := putCmsgHdr(b, level, typ, 4)
	binary.NativeEndian.PutUint32(data, uint32(tos))
	return tosOOBSize
}

// putSourceCmsg writes an IP_PKTINFO (v4) or IPV6_PKTINFO control message
// selecting src as the source address into b (at least sendOOBSize bytes)
// and returns its length.
func putSourceCmsg(b []byte, src netip.Addr) int {
	if src.Is4() {
		data := putCmsgHdr(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
		a := src.As4()
		copy(data[4:8], a[:]) // ipi_spec_dst: the source address to use
		return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	}
	data := putCmsgHdr(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo)
	a := src.As16()
	copy(data[0:16], a[:])
	return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
}

// errQueueOrigin returns the origin (SO_EE_ORIGIN_*) of the extended error
// carried by an error-queue read's control messages, or -1 if there is none.
func errQueueOrigin(oob []byte) int {
	for len(oob) > 0 {
		m, rest, ok := nextCmsg(oob)
		if !ok {
			break
		}
		if (m.level == unix.IPPROTO_IP && m.typ == unix.IP_RECVERR ||
			m.level == unix.IPPROTO_IPV6 && m.typ == unix.IPV6_RECVERR) &&
			len(m.data) >= int(unsafe.Sizeof(unix.SockExtendedErr{})) {
			// struct sock_extended_err { u32 ee_errno; u8 ee_origin; ... }
			return int(m.data[4])
		}
		oob = rest
	}
	return -1
}

// maxErrQueueDrain bounds one drain of the error queue.
const maxErrQueueDrain = 256

// drainErrQueue empties the socket's error queue (MSG_ERRQUEUE) without
// blocking and returns how many entries came from ICMP or ICMPv6 errors and
// how many were local (for example EMSGSIZE for an oversized datagram).
// Each entry is charged to the receive buffer until read, so leaving them
// there would shrink the room for datagrams. Draining also clears the
// pending socket error (sock_dequeue_err_skb).
//
// It runs the system calls in RawConn.Control, which does not take the
// descriptor's read lock, so it never waits behind a ReadBatch parked in the
// poller. The drain ends at EAGAIN (the queue is empty) or any other
// error, and retries EINTR. On a closed socket Control fails without
// running it, and nothing is counted: a closed socket has no queue left to
// free, and its callers return the close on their next call.
func drainErrQueue(rc interface{ Control(func(uintptr)) error }) (icmp, local int) {
	var buf [64]byte
	var oob [128]byte
	_ = rc.Control(func(fd uintptr) {
		for range maxErrQueueDrain {
			_, oobn, _, _, err := unix.Recvmsg(int(fd), buf[:], oob[:], unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			switch errQueueOrigin(oob[:oobn]) {
			case unix.SO_EE_ORIGIN_ICMP, unix.SO_EE_ORIGIN_ICMP6:
				icmp++
			default:
				local++
			}
		}
	})
	return icmp, local
}
