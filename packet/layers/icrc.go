package layers

import (
	"encoding/binary"

	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// Errors of Datagram, FixICRC and CheckICRC: packet's link-layer parser's.
var (
	// ErrLinkType: the link type is not one Datagram knows.
	ErrLinkType = packet.ErrLinkType
	// ErrNotIP: the frame does not carry IPv4 or IPv6.
	ErrNotIP = packet.ErrNotIP
)

// Datagram finds the IP and UDP headers in a frame of the given link type
// (Ethernet with or without VLAN and QinQ tags, Linux cooked v1, BSD
// loopback, raw IP; gopacket's 8-bit LinkType cannot name Linux cooked v2)
// and decodes them with packet.ParseFrame. The result's slices point into
// frame. It does not check the UDP port.
func Datagram(frame []byte, link gplayers.LinkType) (packet.IPDatagram, error) {
	return packet.ParseFrame(frame, packet.LinkType(link))
}

// FixICRC computes the ICRC of the RoCEv2 datagram in frame (the UDP
// payload, BTH through ICRC) over the frame's IP and UDP headers as they
// are, and writes it into the datagram's last four bytes. If the UDP
// checksum is not zero it then recomputes it, since it covers the ICRC;
// a zero checksum (none, over IPv4) is left alone. Call it after
// gopacket.SerializeLayers, which cannot compute the ICRC: the BTH layer is
// serialized before the IP and UDP headers the ICRC covers.
func FixICRC(frame []byte, link gplayers.LinkType) error {
	d, crc, err := datagramICRC(frame, link)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(d.Payload[len(d.Payload)-packet.ICRCSize:], crc)
	if d.Checksum != 0 {
		binary.BigEndian.PutUint16(d.UDPHeader[6:], d.UDPChecksum())
	}
	return nil
}

// CheckICRC reports whether the RoCEv2 datagram in frame carries the right
// ICRC: it returns nil if so, packet.ErrBadICRC if not, and the error of
// Datagram or packet.ErrTruncated if frame holds no datagram long enough.
func CheckICRC(frame []byte, link gplayers.LinkType) error {
	d, crc, err := datagramICRC(frame, link)
	if err != nil {
		return err
	}
	if crc != binary.LittleEndian.Uint32(d.Payload[len(d.Payload)-packet.ICRCSize:]) {
		return packet.ErrBadICRC
	}
	return nil
}

// datagramICRC finds the datagram in frame and computes its ICRC.
func datagramICRC(frame []byte, link gplayers.LinkType) (packet.IPDatagram, uint32, error) {
	d, err := Datagram(frame, link)
	if err != nil {
		return d, 0, err
	}
	crc, err := d.ICRC()
	return d, crc, err
}
