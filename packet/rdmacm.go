package packet

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IP-based connection management (IBTA Annex A11, "RDMA IP CM Service"):
// RDMA CM names a service by an IP protocol and port, which it maps to an
// IB service ID, and puts the IP addresses and ports of both ends at the
// start of the REQ's private data.

// IP protocol numbers of the service-ID's protocol byte (A11.2.1); RDMA CM
// calls the whole 16-bit value 0x01pp its port space.
const (
	RDMACMProtoTCP  = 0x06 // RDMA_PS_TCP: connected QPs (RC, UC)
	RDMACMProtoUDP  = 0x11 // RDMA_PS_UDP: UD QPs via SIDR
	RDMACMProtoSCTP = 0x84
)

// rdmaCMServicePrefix is the fixed top 40 bits of an IP CM service ID
// (A11.2.1): 0x0000000001.
const rdmaCMServicePrefix = 0x0000000001 << 24

// RDMACMServiceID returns the service ID of IP protocol proto and port
// (A11.2.1): 0x0000000001, then the protocol byte, then the port.
func RDMACMServiceID(proto uint8, port uint16) uint64 {
	return rdmaCMServicePrefix | uint64(proto)<<16 | uint64(port)
}

// ParseRDMACMServiceID splits an IP CM service ID into its protocol and
// port; ok is false when id does not carry the A11 prefix.
func ParseRDMACMServiceID(id uint64) (proto uint8, port uint16, ok bool) {
	if id>>24 != rdmaCMServicePrefix>>24 {
		return 0, 0, false
	}
	return uint8(id >> 16), uint16(id), true
}

// CMIPHeaderSize is the size of the IP addressing header at the start of a
// REQ's private data (A11.2.2.1): version, IP version, source port, source
// and destination addresses of 16 bytes each.
const CMIPHeaderSize = 36

// CMIPPrivateDataSize is how many bytes of the REQ's private data remain for
// the consumer after the IP header: 92 − 36 = 56.
const CMIPPrivateDataSize = REQPrivateDataSize - CMIPHeaderSize

// ErrCMIPHeader: the REQ's private data does not begin with a valid IP CM
// header (major version not 0, or IP version not 4 or 6).
var ErrCMIPHeader = errors.New("packet: bad RDMA IP CM private data header")

// CMIPHeader is the IP addressing header of a REQ's private data (IBTA
// Annex A11.2.2.1). Src is the active side (the REQ's sender), Dst the
// passive side. For IPv4 each address takes the last 4 bytes of its 16-byte
// field, the first 12 bytes being zero.
type CMIPHeader struct {
	MajorVersion uint8 // 4 bits, 0
	MinorVersion uint8 // 4 bits, 0
	IPVersion    uint8 // 4 bits: 4 or 6
	SrcPort      uint16
	Src, Dst     netip.Addr
}

// Decode fills h from the first CMIPHeaderSize bytes of b.
func (h *CMIPHeader) Decode(b []byte) error {
	if len(b) < CMIPHeaderSize {
		return ErrMADTruncated
	}
	h.MajorVersion = getBits(b[0], 0, 4)
	h.MinorVersion = getBits(b[0], 4, 4)
	h.IPVersion = getBits(b[1], 0, 4)
	h.SrcPort = binary.BigEndian.Uint16(b[2:])
	if h.MajorVersion != 0 {
		return ErrCMIPHeader
	}
	switch h.IPVersion {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(b[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(b[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return ErrCMIPHeader
	}
	return nil
}

// Encode writes h into b[:CMIPHeaderSize] (A11.2.2.1). The header is IPv4
// (IP version 4, each address in the last 4 bytes of its field) when Src
// and Dst are both IPv4 or IPv4-mapped IPv6 addresses, and IPv6 otherwise,
// an IPv4 address then written in its IPv4-mapped form; IPVersion is not
// read. So Encode accepts whatever Decode returns, including an IPv6
// header that pairs an IPv4-mapped address with an IPv6 one.
func (h *CMIPHeader) Encode(b []byte) {
	b = b[:CMIPHeaderSize]
	clearBytes(b)
	b[0] = putBits(putBits(0, 0, 4, h.MajorVersion), 4, 4, h.MinorVersion)
	binary.BigEndian.PutUint16(b[2:], h.SrcPort)
	src, dst := h.Src.Unmap(), h.Dst.Unmap()
	if src.Is4() && dst.Is4() {
		b[1] = putBits(0, 0, 4, 4)
		s, d := src.As4(), dst.As4()
		copy(b[16:20], s[:])
		copy(b[32:36], d[:])
		return
	}
	b[1] = putBits(0, 0, 4, 6)
	s, d := src.As16(), dst.As16()
	copy(b[4:20], s[:])
	copy(b[20:36], d[:])
}

// GIDFromAddr returns the RoCEv2 GID of an IP address: the IPv6 address
// itself, or for IPv4 the IPv4-mapped IPv6 address ::ffff:a.b.c.d (IBA
// Annex A17.4.5.1).
func GIDFromAddr(a netip.Addr) [16]byte { return a.As16() }

// AddrFromGID returns the IP address a RoCEv2 GID stands for: IPv4 for an
// IPv4-mapped GID, IPv6 otherwise.
func AddrFromGID(g [16]byte) netip.Addr { return netip.AddrFrom16(g).Unmap() }
