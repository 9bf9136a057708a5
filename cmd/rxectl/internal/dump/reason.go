package dump

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gorxe/gorxe/packet"
)

// parseReason returns err, the error packet.Parse gave for the RoCE bytes
// b, with what in b breaks its rule: the opcode that is unknown, the TVer
// that is not 0, the pad count or the length that does not fit the opcode
// (packet.Parse's checks, in its order).
func parseReason(err error, b []byte) error {
	if len(b) < packet.BTHSize+packet.ICRCSize {
		if errors.Is(err, packet.ErrTruncated) {
			return fmt.Errorf("%w: a RoCE packet takes at least %d bytes, a BTH and an ICRC", err, packet.BTHSize+packet.ICRCSize)
		}
		return err
	}
	op := packet.Opcode(b[0])
	info := op.Info()
	pad := int(b[1]>>4) & 3
	rest := len(b) - info.Length - packet.ICRCSize // payload and pad
	switch {
	case errors.Is(err, packet.ErrUnknownOpcode):
		// IBA 9.2, table 38: opcodes 0xC0-0xFF are manufacturer
		// specific; the others packet knows not are reserved.
		kind := "reserved"
		if op >= 0xC0 {
			kind = "manufacturer-specific"
		}
		return fmt.Errorf("%w: %#02x (%s)", err, byte(op), kind)
	case errors.Is(err, packet.ErrBadTransportVersion):
		return fmt.Errorf("%w: %d", err, b[1]&0x0F)
	case errors.Is(err, packet.ErrTruncated):
		return fmt.Errorf("%w: %v takes at least %d bytes", err, op, info.Length+packet.ICRCSize)
	case errors.Is(err, packet.ErrBadPadding) && info.Mask&packet.MaskPayload == 0:
		return fmt.Errorf("%w: %d on %v, which carries no payload", err, pad, op)
	case errors.Is(err, packet.ErrBadPadding):
		return fmt.Errorf("%w: %d, more than the %s between %v's headers and its ICRC", err, pad, count(rest, "byte"), op)
	case errors.Is(err, packet.ErrBadLength) && info.Mask&packet.MaskAtomicWrite != 0:
		return fmt.Errorf("%w: %v carries 8 payload bytes, not %d", err, op, rest-pad)
	case errors.Is(err, packet.ErrBadLength):
		return fmt.Errorf("%w: %v carries no payload, yet %s follow its headers", err, op, count(rest, "byte"))
	}
	return err
}

// ipReason returns err, the error packet.ParseIP gave for the IP packet
// ip, with which of its length fields does not fit the bytes the frame
// holds (packet.ParseIP's checks).
func ipReason(err error, ip []byte) error {
	if !errors.Is(err, packet.ErrBadIPHeader) || len(ip) < 1 {
		return err
	}
	var udp []byte
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < packet.IPv4HeaderSize {
			return fmt.Errorf("%w: %s of IPv4, shorter than its %d-byte header", err, count(len(ip), "byte"), packet.IPv4HeaderSize)
		}
		ihl := int(ip[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		switch {
		case ihl < packet.IPv4HeaderSize:
			return fmt.Errorf("%w: IPv4 header length %d, less than %d", err, ihl, packet.IPv4HeaderSize)
		case total < ihl:
			return fmt.Errorf("%w: IPv4 total length %d, less than its header length %d", err, total, ihl)
		case total > len(ip):
			return fmt.Errorf("%w: IPv4 total length %d, but the frame holds %s of IP", err, total, count(len(ip), "byte"))
		}
		udp = ip[ihl:total]
	case 6:
		if len(ip) < packet.IPv6HeaderSize {
			return fmt.Errorf("%w: %s of IPv6, shorter than its %d-byte header", err, count(len(ip), "byte"), packet.IPv6HeaderSize)
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if packet.IPv6HeaderSize+plen > len(ip) {
			return fmt.Errorf("%w: IPv6 payload length %d, but the frame holds %s after the IPv6 header", err, plen, count(len(ip)-packet.IPv6HeaderSize, "byte"))
		}
		src, dst := [16]byte(ip[8:24]), [16]byte(ip[24:40])
		if isV4Mapped(src) || isV4Mapped(dst) {
			return fmt.Errorf("%w: an IPv4-mapped IPv6 address (RFC 4291 2.5.5.2), which no IPv6 packet carries", err)
		}
		udp = ip[packet.IPv6HeaderSize : packet.IPv6HeaderSize+plen]
	default:
		return fmt.Errorf("%w: IP version %d", err, ip[0]>>4)
	}
	if len(udp) < packet.UDPHeaderSize {
		return fmt.Errorf("%w: %s of UDP, shorter than its %d-byte header", err, count(len(udp), "byte"), packet.UDPHeaderSize)
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	switch {
	case ulen < packet.UDPHeaderSize:
		return fmt.Errorf("%w: UDP length %d, less than its %d-byte header", err, ulen, packet.UDPHeaderSize)
	case ulen > len(udp):
		return fmt.Errorf("%w: UDP length %d, but the IP packet holds %s of UDP", err, ulen, count(len(udp), "byte"))
	}
	return err
}

// isV4Mapped reports whether a is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d).
func isV4Mapped(a [16]byte) bool {
	return a == [16]byte{10: 0xFF, 11: 0xFF, 12: a[12], 13: a[13], 14: a[14], 15: a[15]}
}
