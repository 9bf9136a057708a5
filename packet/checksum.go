package packet

// UDPChecksum computes the UDP checksum (RFC 768 over IPv4; RFC 8200
// section 8.1 over IPv6) of the datagram udp (header and payload) under the
// IP header ip, whatever udp's checksum field holds. It is never 0, which
// would mean "no checksum".
func UDPChecksum(ip, udp []byte) uint16 {
	return udpChecksum(ip, udp[:UDPHeaderSize], udp[UDPHeaderSize:])
}

// UDPChecksum computes the UDP checksum of the datagram (see the function
// UDPChecksum) as it should be in UDPHeader.
func (d *IPDatagram) UDPChecksum() uint16 {
	return udpChecksum(d.IPHeader, d.UDPHeader, d.Payload)
}

// udpChecksum sums the pseudo-header of ip, the UDP header hdr but its
// checksum field, and payload.
func udpChecksum(ip, hdr, payload []byte) uint16 {
	var s uint32
	if ip[0]>>4 == 4 {
		s = onesSum(s, ip[12:20]) // source and destination
	} else {
		s = onesSum(s, ip[8:40])
	}
	s += 17 + uint32(UDPHeaderSize+len(payload)) // protocol and UDP length
	s = onesSum(s, hdr[:6])
	s = onesSum(s, payload)
	c := ^foldSum(s)
	if c == 0 {
		c = 0xFFFF
	}
	return c
}

// IPv4HeaderChecksum computes the header checksum of the IPv4 header ip
// (RFC 791), whatever its checksum field holds.
func IPv4HeaderChecksum(ip []byte) uint16 {
	s := onesSum(0, ip[:10])
	s = onesSum(s, ip[12:])
	return ^foldSum(s)
}

// onesSum adds b, as big-endian 16-bit words (an odd last byte padded with
// a zero), to the one's complement sum s, folding as it goes.
func onesSum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
		if s >= 1<<31 {
			s = s&0xFFFF + s>>16
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

// foldSum folds a one's complement sum to 16 bits.
func foldSum(s uint32) uint16 {
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	return uint16(s)
}
