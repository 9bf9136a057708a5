package packet

import (
	"encoding/binary"
	"errors"
)

// Errors returned by Parse. Each is a distinct sentinel so callers can count
// drops by cause without allocating.
var (
	// ErrTruncated: the packet is shorter than its opcode's headers, pad and
	// ICRC require.
	ErrTruncated = errors.New("packet: truncated")
	// ErrBadTransportVersion: BTH TVer is not 0 (rxe hdr_check drops it).
	// Begin and Build return it too, for headers with a TVer not 0.
	ErrBadTransportVersion = errors.New("packet: transport header version not 0")
	// ErrUnknownOpcode: the opcode is reserved or of a transport this
	// package does not decode (XRC, manufacturer specific).
	ErrUnknownOpcode = errors.New("packet: unknown opcode")
	// ErrBadPadding: the pad count is larger than the payload area, or not
	// zero on an opcode that carries no payload.
	ErrBadPadding = errors.New("packet: bad pad count")
	// ErrBadLength: the payload length is impossible for the opcode (a
	// payload on an opcode without one, or an ATOMIC_WRITE that does not
	// carry exactly 8 bytes).
	ErrBadLength = errors.New("packet: bad payload length for opcode")
	// ErrBadICRC: the ICRC does not match.
	ErrBadICRC = errors.New("packet: bad ICRC")
)

// Packet is a parsed RoCEv2 packet: the bytes from the BTH through the ICRC,
// checked for structure. It is a small value and points into the buffer it
// was parsed from; the header accessors return views into that buffer.
// Accessors for headers the opcode does not carry return nil.
type Packet struct {
	b  []byte
	op Opcode
}

// Parse checks the structure of a RoCEv2 packet b (BTH through ICRC, as a
// UDP socket delivers it): length, transport version, a known opcode, pad
// count and the opcode's payload rules. It does not verify the ICRC (that
// needs the pseudo-header: see CheckICRC) nor anything that depends on the
// QP, such as the path MTU. It never allocates.
func Parse(b []byte) (Packet, error) {
	if len(b) < BTHSize+ICRCSize {
		return Packet{}, ErrTruncated
	}
	op := Opcode(b[0])
	if b[1]&0x0F != 0 {
		return Packet{}, ErrBadTransportVersion
	}
	info := &opTable[op]
	if info.Length == 0 {
		return Packet{}, ErrUnknownOpcode
	}
	rest := len(b) - info.Length - ICRCSize // payload + pad
	if rest < 0 {
		return Packet{}, ErrTruncated
	}
	pad := int(b[1]>>4) & 3
	if info.Mask&MaskPayload == 0 {
		if pad != 0 {
			return Packet{}, ErrBadPadding
		}
		if rest != 0 {
			return Packet{}, ErrBadLength
		}
	} else if pad > rest {
		return Packet{}, ErrBadPadding
	}
	if info.Mask&MaskAtomicWrite != 0 && rest-pad != 8 {
		return Packet{}, ErrBadLength
	}
	return Packet{b: b, op: op}, nil
}

// Bytes returns the whole packet, BTH through ICRC.
func (p Packet) Bytes() []byte { return p.b }

// Len returns the packet length, BTH through ICRC.
func (p Packet) Len() int { return len(p.b) }

// Opcode returns the opcode.
func (p Packet) Opcode() Opcode { return p.op }

// Info returns the opcode table entry.
func (p Packet) Info() *OpInfo { return &opTable[p.op] }

// Mask returns the opcode's mask.
func (p Packet) Mask() Mask { return opTable[p.op].Mask }

// BTH returns the base transport header.
func (p Packet) BTH() BTH { return BTH(p.b[:BTHSize]) }

// PSN returns the BTH PSN.
func (p Packet) PSN() PSN { return p.BTH().PSN() }

// DestQP returns the BTH destination QP.
func (p Packet) DestQP() uint32 { return p.BTH().DestQP() }

// AckReq returns the BTH AckReq bit.
func (p Packet) AckReq() bool { return p.BTH().AckReq() }

// PadCnt returns the BTH pad count.
func (p Packet) PadCnt() int { return p.BTH().PadCnt() }

// Header returns the bytes of extension header h, or nil if the opcode does
// not carry it.
func (p Packet) Header(h Hdr) []byte {
	info := &opTable[p.op]
	if info.Mask&h.Mask() == 0 {
		return nil
	}
	off := int(info.Offset[h])
	return p.b[off : off+h.Size() : off+h.Size()]
}

// RDETH returns the RDETH, or nil.
func (p Packet) RDETH() RDETH { return RDETH(p.Header(HdrRDETH)) }

// DETH returns the DETH, or nil.
func (p Packet) DETH() DETH { return DETH(p.Header(HdrDETH)) }

// FETH returns the FETH, or nil.
func (p Packet) FETH() FETH { return FETH(p.Header(HdrFETH)) }

// RETH returns the RETH, or nil.
func (p Packet) RETH() RETH { return RETH(p.Header(HdrRETH)) }

// AtomicETH returns the AtomicETH, or nil.
func (p Packet) AtomicETH() AtomicETH { return AtomicETH(p.Header(HdrAtomicETH)) }

// AETH returns the AETH, or nil.
func (p Packet) AETH() AETH { return AETH(p.Header(HdrAETH)) }

// AtomicAckETH returns the AtomicAckETH, or nil.
func (p Packet) AtomicAckETH() AtomicAckETH { return AtomicAckETH(p.Header(HdrAtomicAckETH)) }

// ImmDt returns the immediate data header, or nil.
func (p Packet) ImmDt() ImmDt { return ImmDt(p.Header(HdrImmDt)) }

// IETH returns the IETH, or nil.
func (p Packet) IETH() IETH { return IETH(p.Header(HdrIETH)) }

// HeaderLen returns the length of BTH plus extension headers.
func (p Packet) HeaderLen() int { return opTable[p.op].Length }

// Payload returns the payload without pad bytes and ICRC.
func (p Packet) Payload() []byte {
	start := opTable[p.op].Length
	end := len(p.b) - ICRCSize - p.PadCnt()
	return p.b[start:end:end]
}

// PayloadLen returns the payload length without pad.
func (p Packet) PayloadLen() int {
	return len(p.b) - ICRCSize - p.PadCnt() - opTable[p.op].Length
}

// ICRC returns the ICRC carried by the packet, read little-endian from its
// last four bytes (the value a CRC-32 computation yields; see icrc.go).
func (p Packet) ICRC() uint32 { return binary.LittleEndian.Uint32(p.b[len(p.b)-ICRCSize:]) }

// Headers decodes every header of the packet into a Headers value (fields of
// headers the opcode does not carry are zero). Reserved bits outside the
// BTH are not kept: encoding the result writes them as zero.
func (p Packet) Headers() Headers {
	h := Headers{BTH: p.BTH().Fields()}
	m := p.Mask()
	if m&MaskRDETH != 0 {
		h.RDETH = p.RDETH().EEC()
	}
	if m&MaskDETH != 0 {
		d := p.DETH()
		h.DETH = DETHFields{QKey: d.QKey(), SrcQP: d.SrcQP()}
	}
	if m&MaskFETH != 0 {
		h.FETH = p.FETH().Value()
	}
	if m&MaskRETH != 0 {
		h.RETH = p.RETH().Fields()
	}
	if m&MaskAtomicETH != 0 {
		h.AtomicETH = p.AtomicETH().Fields()
	}
	if m&MaskAETH != 0 {
		a := p.AETH()
		h.AETH = AETHFields{Syndrome: a.Syndrome(), MSN: a.MSN()}
	}
	if m&MaskAtomicAckETH != 0 {
		h.AtomicAck = p.AtomicAckETH().Orig()
	}
	if m&MaskImmDt != 0 {
		h.Imm = p.ImmDt().Imm()
	}
	if m&MaskIETH != 0 {
		h.IETH = p.IETH().RKey()
	}
	return h
}
