package layers

import (
	"encoding/binary"
	"errors"

	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// Errors of Datagram, FixICRC and CheckICRC.
var (
	// ErrLinkType: the link type is not one Datagram knows.
	ErrLinkType = errors.New("layers: unsupported link type")
	// ErrNotIP: the frame does not carry IPv4 or IPv6.
	ErrNotIP = errors.New("layers: frame does not carry IPv4 or IPv6")
)

// Link types of https://www.tcpdump.org/linktypes.html that gopacket
// v1.1.19 does not name. (Its LinkType is 8 bits wide, so LINUX_SLL2, 276,
// cannot be passed at all.)
const (
	linkTypeRawDLT12 gplayers.LinkType = 12 // DLT_RAW on some systems
	linkTypeRawDLT14 gplayers.LinkType = 14 // DLT_RAW on OpenBSD
)

// ipPacket returns the IP packet inside a frame of the given link type.
func ipPacket(frame []byte, link gplayers.LinkType) ([]byte, error) {
	var off int
	switch link {
	case gplayers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14, gplayers.LinkTypeIPv4, gplayers.LinkTypeIPv6:
		return frame, nil
	case gplayers.LinkTypeNull, gplayers.LinkTypeLoop:
		// A 4-byte address family; the IP version nibble tells the rest.
		off = 4
	case gplayers.LinkTypeEthernet:
		if len(frame) < 14 {
			return nil, ErrNotIP
		}
		et, o := binary.BigEndian.Uint16(frame[12:]), 14
		// 802.1Q, 802.1ad and the old QinQ tag types.
		for (et == 0x8100 || et == 0x88A8 || et == 0x9100) && len(frame) >= o+4 {
			et, o = binary.BigEndian.Uint16(frame[o+2:]), o+4
		}
		if et != uint16(gplayers.EthernetTypeIPv4) && et != uint16(gplayers.EthernetTypeIPv6) {
			return nil, ErrNotIP
		}
		off = o
	case gplayers.LinkTypeLinuxSLL:
		if len(frame) < 16 {
			return nil, ErrNotIP
		}
		if et := binary.BigEndian.Uint16(frame[14:]); et != 0x0800 && et != 0x86DD {
			return nil, ErrNotIP
		}
		off = 16
	default:
		return nil, ErrLinkType
	}
	if len(frame) < off {
		return nil, ErrNotIP
	}
	return frame[off:], nil
}

// Datagram finds the IP and UDP headers in a frame of the given link type
// (Ethernet with or without VLAN tags, Linux cooked v1, BSD loopback,
// raw IP) and decodes them with packet.ParseIP. The result's
// slices point into frame. It does not check the UDP port.
func Datagram(frame []byte, link gplayers.LinkType) (packet.IPDatagram, error) {
	ip, err := ipPacket(frame, link)
	if err != nil {
		return packet.IPDatagram{}, err
	}
	return packet.ParseIP(ip)
}

// FixICRC computes the ICRC of the RoCEv2 datagram in frame (the UDP
// payload, BTH through ICRC) over the frame's IP and UDP headers as they
// are, and writes it into the datagram's last four bytes. If the UDP
// checksum is not zero it then recomputes it, since it covers the ICRC;
// a zero checksum (none, over IPv4) is left alone. Call it after
// gopacket.SerializeLayers, which cannot compute the ICRC: the BTH layer is
// serialized before the IP and UDP headers the ICRC covers.
func FixICRC(frame []byte, link gplayers.LinkType) error {
	d, err := Datagram(frame, link)
	if err != nil {
		return err
	}
	crc, err := d.ICRC()
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(d.Payload[len(d.Payload)-packet.ICRCSize:], crc)
	if d.Checksum != 0 {
		binary.BigEndian.PutUint16(d.UDPHeader[6:], udpChecksum(&d))
	}
	return nil
}

// CheckICRC reports whether the RoCEv2 datagram in frame carries the right
// ICRC: it returns nil if so, packet.ErrBadICRC if not, and the error of
// Datagram or packet.ErrTruncated if frame holds no datagram long enough.
func CheckICRC(frame []byte, link gplayers.LinkType) error {
	d, err := Datagram(frame, link)
	if err != nil {
		return err
	}
	crc, err := d.ICRC()
	if err != nil {
		return err
	}
	if crc != binary.LittleEndian.Uint32(d.Payload[len(d.Payload)-packet.ICRCSize:]) {
		return packet.ErrBadICRC
	}
	return nil
}

// udpChecksum computes the UDP checksum of d (RFC 768 over IPv4, RFC 8200
// section 8.1 over IPv6); it is never 0, which means none.
func udpChecksum(d *packet.IPDatagram) uint16 {
	var sum uint32
	ulen := packet.UDPHeaderSize + len(d.Payload)
	if d.IPHeader[0]>>4 == 4 {
		sum = sum16(sum, d.IPHeader[12:20]) // source and destination
	} else {
		sum = sum16(sum, d.IPHeader[8:40])
	}
	sum += 17 + uint32(ulen) // protocol and UDP length
	sum = sum16(sum, d.UDPHeader[:6])
	sum = sum16(sum, d.Payload)
	for sum > 0xFFFF {
		sum = sum>>16 + sum&0xFFFF
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xFFFF
	}
	return c
}

// sum16 adds b, as big-endian 16-bit words (an odd last byte padded with
// zero), to the one's complement sum s.
func sum16(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
		if s >= 1<<31 {
			s = s>>16 + s&0xFFFF
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}
