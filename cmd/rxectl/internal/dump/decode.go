package dump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/gorxe/gorxe/packet"
)

// EtherTypes rxectl follows.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	etherType8021Q = 0x8100 // customer VLAN tag
	etherTypeQinQ  = 0x88A8 // 802.1ad service tag
	etherTypeQinQ1 = 0x9100 // pre-standard QinQ tag
	etherTypeQinQ2 = 0x9200 // pre-standard QinQ tag
)

// Header lengths of the link layers.
const (
	ethernetHeaderLen = 14
	vlanTagLen        = 4
	sllHeaderLen      = 16
	sll2HeaderLen     = 20
	nullHeaderLen     = 4
)

// ipFromLink strips the link-layer header of a frame of link type lt and
// returns the IPv4 or IPv6 packet it carries; ok is false for any other
// frame (ARP, LLDP, a truncated link header, ...).
func ipFromLink(data []byte, lt LinkType) (ip []byte, ok bool) {
	switch lt {
	case linkEthernet:
		if len(data) < ethernetHeaderLen {
			return nil, false
		}
		return ipFromEtherType(data[ethernetHeaderLen:], binary.BigEndian.Uint16(data[12:]))
	case linkSLL:
		if len(data) < sllHeaderLen {
			return nil, false
		}
		return ipFromEtherType(data[sllHeaderLen:], binary.BigEndian.Uint16(data[14:]))
	case linkSLL2:
		if len(data) < sll2HeaderLen {
			return nil, false
		}
		return ipFromEtherType(data[sll2HeaderLen:], binary.BigEndian.Uint16(data[0:]))
	case linkRaw, linkRawDLT12, linkRawDLT14, linkIPv4, linkIPv6:
		return data, len(data) > 0
	case linkNull, linkLoop:
		if len(data) < nullHeaderLen {
			return nil, false
		}
		// The address family is in the capturing host's byte order for
		// NULL and in network order for LOOP; accept either.
		af := binary.BigEndian.Uint32(data)
		if af > 0xFFFF {
			af = binary.LittleEndian.Uint32(data)
		}
		switch af {
		case 2, // AF_INET everywhere
			10,             // AF_INET6 on Linux
			24, 28, 30, 23: // AF_INET6 on NetBSD/OpenBSD, FreeBSD, Darwin; Windows
			return data[nullHeaderLen:], true
		}
	}
	return nil, false
}

// ipFromEtherType skips 802.1Q and QinQ tags and returns the IP packet
// when the (inner) EtherType is IPv4 or IPv6.
func ipFromEtherType(b []byte, et uint16) ([]byte, bool) {
	for et == etherType8021Q || et == etherTypeQinQ || et == etherTypeQinQ1 || et == etherTypeQinQ2 {
		if len(b) < vlanTagLen {
			return nil, false
		}
		et = binary.BigEndian.Uint16(b[2:])
		b = b[vlanTagLen:]
	}
	if et == etherTypeIPv4 || et == etherTypeIPv6 {
		return b, true
	}
	return nil, false
}

// Kind classifies a decoded frame.
type Kind uint8

const (
	KindOther     Kind = iota // not RoCEv2: skipped silently
	KindRoCE                  // a RoCEv2 packet that packet.Parse accepts
	KindMalformed             // UDP to a RoCEv2 port that does not parse
)

// Frame is everything rxectl dump reports about one captured frame. Its
// slices point into the record's data: they are valid as long as that is.
type Frame struct {
	Num     int // 1-based, as Wireshark numbers frames
	CapLen  int // bytes captured
	OrigLen int // length on the wire

	Kind     Kind
	Src, Dst netip.AddrPort    // valid when known (always for KindRoCE)
	IP       []byte            // the IP packet, as captured
	Datagram packet.IPDatagram // the parsed IP/UDP headers (KindRoCE, some KindMalformed)
	Packet   packet.Packet     // the RoCEv2 packet (KindRoCE)
	Err      error             // why a KindMalformed frame is malformed
	WantICRC uint32            // the ICRC computed over the captured headers
	ICRCOK   bool              // the packet's ICRC equals WantICRC
}

// Ports is the set of UDP destination ports decoded as RoCEv2.
type Ports []uint16

// has reports whether port is in the set.
func (p Ports) has(port uint16) bool { return slices.Contains(p, port) }

// errFragment: a RoCEv2 datagram must not be fragmented (IBA A17.4.1: DF).
var errFragment = errors.New("IP fragment of a RoCEv2 datagram")

// DecodeFrame decodes one frame of link type lt into f. It never panics on
// any input, and never keeps data beyond f's own lifetime.
func DecodeFrame(f *Frame, data []byte, lt LinkType, rocePorts Ports) {
	ip, ok := ipFromLink(data, lt)
	if !ok {
		f.Kind = KindOther
		return
	}
	f.IP = ip
	dg, err := packet.ParseIP(ip)
	if err != nil {
		// Look at the UDP ports by hand: a truncated or fragmented
		// datagram to a RoCEv2 port is malformed RoCE, anything else is
		// another protocol.
		src, dst, frag, ok := peekUDP(ip)
		if !ok || !rocePorts.has(dst.Port()) {
			f.Kind = KindOther
			return
		}
		f.Kind, f.Src, f.Dst = KindMalformed, src, dst
		switch {
		case frag:
			f.Err = errFragment
		case f.CapLen < f.OrigLen:
			f.Err = fmt.Errorf("%w (frame cut by the capture: %d of %d bytes)", err, f.CapLen, f.OrigLen)
		default:
			f.Err = err
		}
		return
	}
	if !rocePorts.has(dg.Pseudo.DstPort) {
		f.Kind = KindOther
		return
	}
	f.Datagram = dg
	f.Src = netip.AddrPortFrom(dg.Pseudo.Src, dg.Pseudo.SrcPort)
	f.Dst = netip.AddrPortFrom(dg.Pseudo.Dst, dg.Pseudo.DstPort)
	pkt, err := packet.Parse(dg.Payload)
	if err != nil {
		f.Kind, f.Err = KindMalformed, err
		return
	}
	f.Kind, f.Packet = KindRoCE, pkt
	want, err := dg.ICRC()
	if err != nil { // cannot happen after Parse; report rather than guess
		f.Kind, f.Err = KindMalformed, err
		return
	}
	f.WantICRC = want
	f.ICRCOK = want == pkt.ICRC()
}

// peekUDP reads the addresses and UDP ports of an IP packet that ParseIP
// rejected, from whatever bytes were captured. frag is true for the first
// fragment of a fragmented IPv4 datagram. ok is false when the packet is not
// UDP or its ports were not captured.
func peekUDP(ip []byte) (src, dst netip.AddrPort, frag, ok bool) {
	var s, d netip.Addr
	var udp []byte
	switch {
	case len(ip) >= packet.IPv4HeaderSize && ip[0]>>4 == 4:
		ihl := int(ip[0]&0x0F) * 4
		if ip[9] != 17 || ihl < packet.IPv4HeaderSize || len(ip) < ihl {
			return
		}
		fl := binary.BigEndian.Uint16(ip[6:])
		if fl&0x1FFF != 0 { // a later fragment: no UDP header
			return
		}
		frag = fl&0x2000 != 0
		s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		udp = ip[ihl:]
	case len(ip) >= packet.IPv6HeaderSize && ip[0]>>4 == 6:
		if ip[6] != 17 {
			return
		}
		s, d = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		udp = ip[packet.IPv6HeaderSize:]
	default:
		return
	}
	if len(udp) < 4 {
		return
	}
	src = netip.AddrPortFrom(s, binary.BigEndian.Uint16(udp))
	dst = netip.AddrPortFrom(d, binary.BigEndian.Uint16(udp[2:]))
	return src, dst, frag, true
}
