package packet

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
)

// LinkType is a pcap LINKTYPE_ value (https://www.tcpdump.org/linktypes.html),
// the link layer of a captured frame. It is 16 bits wide (LINUX_SLL2 is
// 276).
type LinkType uint16

// Link types that ParseFrame and IPFromLink decode.
const (
	LinkNull     LinkType = 0   // BSD loopback, host-order address family
	LinkEthernet LinkType = 1   // Ethernet, with 802.1Q / 802.1ad / QinQ tags
	LinkRawDLT12 LinkType = 12  // DLT_RAW as some systems wrote it
	LinkRawDLT14 LinkType = 14  // DLT_RAW on OpenBSD
	LinkRaw      LinkType = 101 // raw IPv4 or IPv6
	LinkLoop     LinkType = 108 // OpenBSD loopback, network-order family
	LinkSLL      LinkType = 113 // Linux cooked capture v1
	LinkIPv4     LinkType = 228 // raw IPv4
	LinkIPv6     LinkType = 229 // raw IPv6
	LinkSLL2     LinkType = 276 // Linux cooked capture v2
)

// String is the link type's pcap name (EN10MB, LINUX_SLL2, ...), or
// "link type N" for one this package does not decode.
func (lt LinkType) String() string {
	switch lt {
	case LinkNull:
		return "NULL"
	case LinkEthernet:
		return "EN10MB"
	case LinkRaw, LinkRawDLT12, LinkRawDLT14:
		return "RAW"
	case LinkLoop:
		return "LOOP"
	case LinkSLL:
		return "LINUX_SLL"
	case LinkIPv4:
		return "IPV4"
	case LinkIPv6:
		return "IPV6"
	case LinkSLL2:
		return "LINUX_SLL2"
	}
	return "link type " + strconv.Itoa(int(lt))
}

// Supported reports whether IPFromLink decodes frames of link type lt.
func (lt LinkType) Supported() bool {
	switch lt {
	case LinkNull, LinkEthernet, LinkRaw, LinkRawDLT12, LinkRawDLT14, LinkLoop, LinkSLL, LinkIPv4, LinkIPv6, LinkSLL2:
		return true
	}
	return false
}

// Errors of IPFromLink and ParseFrame.
var (
	// ErrLinkType: the link type is not one IPFromLink decodes.
	ErrLinkType = errors.New("packet: unsupported link type")
	// ErrNotIP: the frame does not carry IPv4 or IPv6 (ARP, LLDP, an
	// 802.3 length field, a truncated link header, ...).
	ErrNotIP = errors.New("packet: frame does not carry IPv4 or IPv6")
)

// ipv4FlagMF is the More Fragments bit of the IPv4 flags/fragment word.
const ipv4FlagMF = 0x2000

// EtherTypes the link-layer parser follows.
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
	sllHeaderLen      = 16 // protocol type at 14
	sll2HeaderLen     = 20 // protocol type at 0
	nullHeaderLen     = 4
)

// IPFromLink strips the link-layer header of a frame of link type lt and
// returns the IPv4 or IPv6 packet it carries (a subslice of frame).
func IPFromLink(frame []byte, lt LinkType) ([]byte, error) {
	switch lt {
	case LinkEthernet:
		if len(frame) < ethernetHeaderLen {
			return nil, ErrNotIP
		}
		return ipFromEtherType(frame[ethernetHeaderLen:], binary.BigEndian.Uint16(frame[12:]))
	case LinkSLL:
		if len(frame) < sllHeaderLen {
			return nil, ErrNotIP
		}
		return ipFromEtherType(frame[sllHeaderLen:], binary.BigEndian.Uint16(frame[14:]))
	case LinkSLL2:
		if len(frame) < sll2HeaderLen {
			return nil, ErrNotIP
		}
		return ipFromEtherType(frame[sll2HeaderLen:], binary.BigEndian.Uint16(frame))
	case LinkRaw, LinkRawDLT12, LinkRawDLT14, LinkIPv4, LinkIPv6:
		if len(frame) == 0 {
			return nil, ErrNotIP
		}
		return frame, nil
	case LinkNull, LinkLoop:
		return ipFromNull(frame)
	}
	return nil, ErrLinkType
}

// ipFromNull returns the IP packet of a BSD loopback frame. The address
// family is in the capturing host's byte order for NULL and in network
// order for LOOP; either is accepted.
func ipFromNull(frame []byte) ([]byte, error) {
	if len(frame) < nullHeaderLen {
		return nil, ErrNotIP
	}
	af := binary.BigEndian.Uint32(frame)
	if af > 0xFFFF {
		af = binary.LittleEndian.Uint32(frame)
	}
	switch af {
	case 2, // AF_INET everywhere
		10,             // AF_INET6 on Linux
		24, 28, 30, 23: // AF_INET6 on NetBSD/OpenBSD, FreeBSD, Darwin; Windows
		return frame[nullHeaderLen:], nil
	}
	return nil, ErrNotIP
}

// ipFromEtherType skips 802.1Q and QinQ tags and returns the IP packet
// when the (inner) EtherType is IPv4 or IPv6.
func ipFromEtherType(b []byte, et uint16) ([]byte, error) {
	for et == etherType8021Q || et == etherTypeQinQ || et == etherTypeQinQ1 || et == etherTypeQinQ2 {
		if len(b) < vlanTagLen {
			return nil, ErrNotIP
		}
		et = binary.BigEndian.Uint16(b[2:])
		b = b[vlanTagLen:]
	}
	if et == etherTypeIPv4 || et == etherTypeIPv6 {
		return b, nil
	}
	return nil, ErrNotIP
}

// ParseFrame finds the IP and UDP headers in a frame of link type lt and
// decodes them with ParseIP. The result's slices point into frame. It
// does not check the UDP port.
func ParseFrame(frame []byte, lt LinkType) (IPDatagram, error) {
	ip, err := IPFromLink(frame, lt)
	if err != nil {
		return IPDatagram{}, err
	}
	return ParseIP(ip)
}

// PeekUDP reads the addresses and UDP ports of an IP packet that ParseIP
// rejects (cut short by a capture, fragmented, or IPv6 with extension
// headers), from whatever bytes there are. firstFragment is true for the
// first fragment of a fragmented datagram. ok is false when the packet is not UDP or its ports are
// missing (a later fragment carries none).
func PeekUDP(ip []byte) (src, dst netip.AddrPort, firstFragment, ok bool) {
	var s, d netip.Addr
	var udp []byte
	switch {
	case len(ip) >= IPv4HeaderSize && ip[0]>>4 == 4:
		ihl := int(ip[0]&0x0F) * 4
		if ip[9] != 17 || ihl < IPv4HeaderSize || len(ip) < ihl {
			return
		}
		fl := binary.BigEndian.Uint16(ip[6:])
		if fl&0x1FFF != 0 { // a later fragment: no UDP header
			return
		}
		firstFragment = fl&ipv4FlagMF != 0
		s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		udp = ip[ihl:]
	case len(ip) >= IPv6HeaderSize && ip[0]>>4 == 6:
		// Past any extension headers (Hop-by-Hop 0, Routing 43,
		// Fragment 44, Destination Options 60; RFC 8200 4.1), which
		// ParseIP does not take.
		nh, off := ip[6], IPv6HeaderSize
		for nh == 0 || nh == 43 || nh == 44 || nh == 60 {
			if len(ip) < off+8 {
				return
			}
			if nh == 44 {
				if binary.BigEndian.Uint16(ip[off+2:])&0xFFF8 != 0 { // a later fragment: no UDP header
					return
				}
				firstFragment = ip[off+3]&1 != 0
				nh, off = ip[off], off+8
				continue
			}
			nh, off = ip[off], off+8+int(ip[off+1])*8
		}
		if nh != 17 || len(ip) < off {
			return
		}
		s, d = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		udp = ip[off:]
	default:
		return
	}
	if len(udp) < 4 {
		return
	}
	src = netip.AddrPortFrom(s, binary.BigEndian.Uint16(udp))
	dst = netip.AddrPortFrom(d, binary.BigEndian.Uint16(udp[2:]))
	return src, dst, firstFragment, true
}
