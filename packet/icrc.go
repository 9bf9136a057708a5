package packet

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"net/netip"
)

// The ICRC (IBA A17.4.4 for RoCEv2; rxe_icrc.c) is CRC-32/IEEE over:
// eight 0xFF bytes standing in for the LRH, the IP header with its variant
// fields set to ones (IPv4 TOS, TTL, header checksum; IPv6 traffic class,
// flow label, hop limit), the UDP header with its checksum set to ones, the
// BTH with byte 4 (FECN, BECN, Resv6a) set to ones, then the extension
// headers, payload and pad. It is sent least significant byte first.

// IPv4FlagDF is the Don't Fragment bit of the IPv4 flags/fragment word.
const IPv4FlagDF = 0x4000

// UDPPort is the RoCEv2 UDP destination port (IBA A17.2.2).
const UDPPort = 4791

// Header sizes of the encapsulation.
const (
	IPv4HeaderSize = 20
	IPv6HeaderSize = 40
	UDPHeaderSize  = 8
)

// PseudoHeader is what the ICRC covers of the IP and UDP headers, besides the
// lengths (derived from the RoCE packet's length). A UDP socket does not
// deliver these fields with the datagram, so the caller supplies them.
//
// IPv4 is used when Src and Dst are IPv4 (or IPv4-mapped IPv6) addresses,
// IPv6 otherwise. For IPv4, IPID and IPFlags are covered by the ICRC: an
// unconnected Linux UDP socket with IP_PMTUDISC_DO sends ID 0 with DF, the
// value our peers use; kernel rxe sends a non-zero ID (see RecoverIPv4ID).
type PseudoHeader struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	IPID             uint16 // IPv4 Identification
	IPFlags          uint16 // IPv4 flags and fragment offset, e.g. IPv4FlagDF
}

// Is4 reports whether the pseudo-header is IPv4.
func (ph *PseudoHeader) Is4() bool { return ph.Src.Unmap().Is4() }

// crcFF8 is the CRC-32 of eight 0xFF bytes: the masked LRH of IBA A17.4.4.
// Kernel rxe starts its register at 0xDEBB20E3, the unfinalised form of it.
const crcFF8 = 0x2144DF1C

// ErrPseudoHeader is returned for a pseudo-header whose addresses are not
// both IPv4 or both IPv6.
var ErrPseudoHeader = errors.New("packet: pseudo-header addresses of different families or invalid")

func (ph *PseudoHeader) valid() bool {
	s, d := ph.Src.Unmap(), ph.Dst.Unmap()
	return s.IsValid() && d.IsValid() && s.Is4() == d.Is4()
}

// ICRCStart returns the running CRC of a packet of n bytes (BTH through
// ICRC) after its pseudo-header and masked BTH, so that a sender can fold
// the rest of the headers and the payload in with ICRCUpdate as it copies
// them (one pass over the data). bth must hold the packet's BTH, and ph
// must be Valid (ICRC and Begin check it): for another ph the result is
// meaningless and ICRCStart may panic.
//
// The masked IP header, UDP header and BTH (IBA A17.4.4) are assembled in
// 64-bit words and fed to the CRC from registers: bytes written to a buffer
// and read back in words stall on store forwarding (a load spanning several
// narrower stores), which cost about as much per packet as folding a 4 KiB
// payload (docs/performance.md, "Payload copies in pieces under 2 KiB, and
// the ICRC's pseudo-header from registers").
func (ph *PseudoHeader) ICRCStart(bth []byte, n int) uint32 {
	_ = bth[BTHSize-1]
	return feedBTH(ph.headerRegister(n), bth, ph.Src.Unmap().Is4())
}

// headerRegister returns the CRC register (not inverted) after the eight
// 0xFF bytes, the masked IP header and the UDP header of a packet of n
// bytes (BTH through ICRC): everything of the pseudo-header before the BTH.
func (ph *PseudoHeader) headerRegister(n int) uint32 {
	src, dst := ph.Src.Unmap(), ph.Dst.Unmap()
	udpLen := uint16(UDPHeaderSize + n)
	ports := be16(ph.SrcPort) | be16(ph.DstPort)<<16
	r := ^uint32(crcFF8)
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		r = crcWord(r, 0x45|0xFF<<8|be16(uint16(IPv4HeaderSize)+udpLen)<<16|be16(ph.IPID)<<32|be16(ph.IPFlags)<<48)
		r = crcWord(r, 0xFF|17<<8|0xFFFF<<16|uint64(binary.LittleEndian.Uint32(s[:]))<<32)
		r = crcWord(r, uint64(binary.LittleEndian.Uint32(d[:]))|ports<<32)
		return crcWord32(r, uint32(be16(udpLen))|0xFFFF<<16)
	}
	s, d := src.As16(), dst.As16()
	r = crcWord(r, 0x6F|0xFFFFFF<<8|be16(udpLen)<<32|17<<48|0xFF<<56)
	r = crcWord(r, binary.LittleEndian.Uint64(s[:]))
	r = crcWord(r, binary.LittleEndian.Uint64(s[8:]))
	r = crcWord(r, binary.LittleEndian.Uint64(d[:]))
	r = crcWord(r, binary.LittleEndian.Uint64(d[8:]))
	return crcWord(r, ports|be16(udpLen)<<32|0xFFFF<<48)
}

// feedBTH feeds the BTH with byte 4 (FECN, BECN, Resv6a) masked into the
// register r that headerRegister returned, and returns the running CRC.
// Over IPv4 the BTH starts 4 bytes into a word of the pseudo-header, over
// IPv6 on a word.
func feedBTH(r uint32, bth []byte, v4 bool) uint32 {
	b0 := binary.LittleEndian.Uint32(bth)
	b1 := binary.LittleEndian.Uint64(bth[4:])
	if v4 {
		return ^crcWord(crcWord32(r, b0), b1|0xFF)
	}
	return ^crcWord32(crcWord(r, uint64(b0)|b1<<32|0xFF<<32), uint32(b1>>32))
}

// ICRCPrefix remembers the CRC register after the masked IP and UDP
// headers of the last pseudo-header and packet length it was asked for.
// Those are the same for every full-size packet of a QP's message stream,
// so its Start, ICRC and RecoverIPv4ID feed only the BTH to the tables
// where PseudoHeader's methods feed the whole pseudo-header; the results
// are the same. The zero value is ready to use; a nil *ICRCPrefix
// remembers nothing. It is not safe for concurrent use: each sender (a
// transport engine) and each receiving goroutine keeps its own.
type ICRCPrefix struct {
	ph  PseudoHeader
	n   int
	reg uint32
	v4  bool
	set bool
}

// Start is ph.ICRCStart(bth, n), with the register for ph and n remembered.
func (c *ICRCPrefix) Start(ph *PseudoHeader, bth []byte, n int) uint32 {
	if c == nil {
		return ph.ICRCStart(bth, n)
	}
	_ = bth[BTHSize-1]
	if !c.set || c.n != n || c.ph != *ph {
		c.ph, c.n, c.reg, c.v4, c.set = *ph, n, ph.headerRegister(n), ph.Src.Unmap().Is4(), true
	}
	return feedBTH(c.reg, bth, c.v4)
}

// ICRC is ph.ICRC(pkt), with the register for ph and len(pkt) remembered.
func (c *ICRCPrefix) ICRC(ph *PseudoHeader, pkt []byte) (uint32, error) {
	if len(pkt) < BTHSize+ICRCSize {
		return 0, ErrTruncated
	}
	if !ph.valid() {
		return 0, ErrPseudoHeader
	}
	return c.icrc(ph, pkt), nil
}

// icrc is ICRC for a caller that has checked pkt's length and ph.
func (c *ICRCPrefix) icrc(ph *PseudoHeader, pkt []byte) uint32 {
	crc := c.Start(ph, pkt[:BTHSize], len(pkt))
	return ICRCUpdate(crc, pkt[BTHSize:len(pkt)-ICRCSize])
}

// be16 is v's big-endian (wire) byte order as the low 16 bits of a
// little-endian word.
func be16(v uint16) uint64 { return uint64(bits.ReverseBytes16(v)) }

// ICRC computes the ICRC of pkt (BTH through the 4-byte ICRC slot, whose
// content is ignored). It returns ErrPseudoHeader for an invalid
// pseudo-header and ErrTruncated for a packet shorter than BTH+ICRC.
func (ph *PseudoHeader) ICRC(pkt []byte) (uint32, error) {
	return (*ICRCPrefix)(nil).ICRC(ph, pkt)
}

// SetICRC computes the ICRC of pkt and writes it into its last four bytes.
func (ph *PseudoHeader) SetICRC(pkt []byte) error {
	crc, err := ph.ICRC(pkt)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCSize:], crc)
	return nil
}

// CheckICRC reports whether pkt's trailing ICRC matches; it returns
// ErrBadICRC on mismatch.
func (ph *PseudoHeader) CheckICRC(pkt []byte) error {
	crc, err := ph.ICRC(pkt)
	if err != nil {
		return err
	}
	if crc != binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCSize:]) {
		return ErrBadICRC
	}
	return nil
}

// Errors of ParseIP.
var (
	// ErrNotUDP: the IP packet does not carry UDP (or is a fragment).
	ErrNotUDP = errors.New("packet: not a UDP datagram")
	// ErrBadIPHeader: the IP or UDP header is malformed or truncated.
	ErrBadIPHeader = errors.New("packet: malformed IP/UDP header")
)

// IPDatagram describes an IPv4 or IPv6 packet carrying UDP, as read from a
// capture or a raw socket.
type IPDatagram struct {
	// Pseudo holds addresses, ports, and the IPv4 ID and flags.
	Pseudo PseudoHeader
	// IPHeader is the IP header as captured (with IPv4 options, if any).
	IPHeader []byte
	// UDPHeader is the 8-byte UDP header.
	UDPHeader []byte
	// Payload is the UDP payload, limited by the UDP length field; for a
	// RoCEv2 datagram, BTH through ICRC.
	Payload []byte
	// Checksum is the UDP checksum field (0 when none was computed).
	Checksum uint16
}

// ParseIP decodes an IPv4 or IPv6 header followed by a UDP header. It does
// not check IP or UDP checksums (IBA A17.4.2: RoCE receivers need not).
// It rejects with ErrBadIPHeader an IPv6 header whose source or
// destination is an IPv4-mapped address (RFC 4291 2.5.5.2; Linux drops
// such packets): the datagram's PseudoHeader would stand for IPv4 and
// give an ICRC other than the one over the IPv6 header (IBA A17.4.4).
func ParseIP(b []byte) (IPDatagram, error) {
	var d IPDatagram
	if len(b) < 1 {
		return d, ErrBadIPHeader
	}
	var udp []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < IPv4HeaderSize {
			return d, ErrBadIPHeader
		}
		ihl := int(b[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if ihl < IPv4HeaderSize || total < ihl || total > len(b) {
			return d, ErrBadIPHeader
		}
		if b[9] != 17 {
			return d, ErrNotUDP
		}
		flags := binary.BigEndian.Uint16(b[6:])
		if flags&0x3FFF != 0 { // MF set or a non-zero fragment offset
			return d, ErrNotUDP
		}
		d.Pseudo.Src = netip.AddrFrom4([4]byte(b[12:16]))
		d.Pseudo.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		d.Pseudo.IPID = binary.BigEndian.Uint16(b[4:])
		d.Pseudo.IPFlags = flags
		d.IPHeader = b[:ihl]
		udp = b[ihl:total]
	case 6:
		if len(b) < IPv6HeaderSize {
			return d, ErrBadIPHeader
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if IPv6HeaderSize+plen > len(b) {
			return d, ErrBadIPHeader
		}
		if b[6] != 17 {
			return d, ErrNotUDP
		}
		d.Pseudo.Src = netip.AddrFrom16([16]byte(b[8:24]))
		d.Pseudo.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		if d.Pseudo.Src.Is4In6() || d.Pseudo.Dst.Is4In6() {
			return IPDatagram{}, ErrBadIPHeader
		}
		d.IPHeader = b[:IPv6HeaderSize]
		udp = b[IPv6HeaderSize : IPv6HeaderSize+plen]
	default:
		return d, ErrBadIPHeader
	}
	if len(udp) < UDPHeaderSize {
		return d, ErrBadIPHeader
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < UDPHeaderSize || ulen > len(udp) {
		return d, ErrBadIPHeader
	}
	d.Pseudo.SrcPort = binary.BigEndian.Uint16(udp)
	d.Pseudo.DstPort = binary.BigEndian.Uint16(udp[2:])
	d.Checksum = binary.BigEndian.Uint16(udp[6:])
	d.UDPHeader = udp[:UDPHeaderSize]
	d.Payload = udp[UDPHeaderSize:ulen]
	return d, nil
}

// ICRC computes the ICRC of the datagram's RoCE payload over the IP header
// exactly as captured (so IPv4 options, if any, are covered as sent).
func (d *IPDatagram) ICRC() (uint32, error) {
	pkt := d.Payload
	if len(pkt) < BTHSize+ICRCSize {
		return 0, ErrTruncated
	}
	if len(d.IPHeader) < IPv4HeaderSize || len(d.IPHeader) > 60 || len(d.UDPHeader) != UDPHeaderSize {
		return 0, ErrBadIPHeader
	}
	var hdr [60 + UDPHeaderSize + BTHSize]byte
	n := copy(hdr[:], d.IPHeader)
	if d.IPHeader[0]>>4 == 4 {
		hdr[1] = 0xFF
		hdr[8] = 0xFF
		hdr[10], hdr[11] = 0xFF, 0xFF
	} else {
		hdr[0] |= 0x0F
		hdr[1], hdr[2], hdr[3] = 0xFF, 0xFF, 0xFF
		hdr[7] = 0xFF
	}
	n += copy(hdr[n:], d.UDPHeader)
	hdr[n-2], hdr[n-1] = 0xFF, 0xFF
	n += copy(hdr[n:], pkt[:BTHSize])
	hdr[n-BTHSize+4] = 0xFF
	crc := updateSmall(crcFF8, hdr[:n])
	return ICRCUpdate(crc, pkt[BTHSize:len(pkt)-ICRCSize]), nil
}

// ICRCOK reports whether the datagram's RoCE payload carries a valid ICRC.
func (d *IPDatagram) ICRCOK() bool {
	crc, err := d.ICRC()
	return err == nil && crc == binary.LittleEndian.Uint32(d.Payload[len(d.Payload)-ICRCSize:])
}
