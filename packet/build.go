package packet

import (
	"encoding/binary"
	"errors"
)

// DETHFields holds the fields of a DETH.
type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

// AETHFields holds the fields of an AETH.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32
}

// Headers holds the fields of every header a packet may carry; Encode writes
// those the opcode (BTH.Opcode) calls for and ignores the rest. It is a
// plain value: requesters and responders keep one per QP and reuse it.
type Headers struct {
	BTH       BTHFields
	RDETH     uint32 // end-to-end context (RD)
	DETH      DETHFields
	FETH      uint32 // raw FETH word (FLUSH)
	RETH      RETHFields
	AtomicETH AtomicETHFields
	AETH      AETHFields
	AtomicAck uint64 // AtomicAckETH original remote data
	Imm       uint32 // ImmDt
	IETH      uint32 // R_Key to invalidate
}

// ErrBufferTooSmall is returned when an encoder's buffer cannot hold the
// packet.
var ErrBufferTooSmall = errors.New("packet: buffer too small")

// PadLen returns the number of pad bytes after a payload of n bytes
// (IBA 9.2: the payload plus pad is a multiple of four bytes).
func PadLen(n int) int { return -n & 3 }

// PacketLen returns the length of a packet of opcode op with n payload
// bytes: headers, payload, pad and ICRC. It returns 0 for an unknown opcode.
func PacketLen(op Opcode, n int) int {
	l := opTable[op].Length
	if l == 0 {
		return 0
	}
	return l + n + PadLen(n) + ICRCSize
}

// Encode writes the BTH and the extension headers of h.BTH.Opcode into b and
// returns the number of bytes written (the payload offset). The BTH pad
// count is written as given in h.BTH.PadCnt.
func (h *Headers) Encode(b []byte) (int, error) {
	info := &opTable[h.BTH.Opcode]
	if info.Length == 0 {
		return 0, ErrUnknownOpcode
	}
	if len(b) < info.Length {
		return 0, ErrBufferTooSmall
	}
	BTH(b).Encode(&h.BTH)
	m := info.Mask
	if m&MaskRDETH != 0 {
		RDETH(b[info.Offset[HdrRDETH]:]).SetEEC(h.RDETH)
	}
	if m&MaskDETH != 0 {
		DETH(b[info.Offset[HdrDETH]:]).Encode(h.DETH.QKey, h.DETH.SrcQP)
	}
	if m&MaskFETH != 0 {
		FETH(b[info.Offset[HdrFETH]:]).SetValue(h.FETH)
	}
	if m&MaskRETH != 0 {
		RETH(b[info.Offset[HdrRETH]:]).Encode(&h.RETH)
	}
	if m&MaskAtomicETH != 0 {
		AtomicETH(b[info.Offset[HdrAtomicETH]:]).Encode(&h.AtomicETH)
	}
	if m&MaskAETH != 0 {
		AETH(b[info.Offset[HdrAETH]:]).Encode(h.AETH.Syndrome, h.AETH.MSN)
	}
	if m&MaskAtomicAckETH != 0 {
		AtomicAckETH(b[info.Offset[HdrAtomicAckETH]:]).SetOrig(h.AtomicAck)
	}
	if m&MaskImmDt != 0 {
		ImmDt(b[info.Offset[HdrImmDt]:]).SetImm(h.Imm)
	}
	if m&MaskIETH != 0 {
		IETH(b[info.Offset[HdrIETH]:]).SetRKey(h.IETH)
	}
	if m&MaskCNP != 0 {
		clear(b[info.Offset[HdrCNP] : int(info.Offset[HdrCNP])+CNPSize])
	}
	return info.Length, nil
}

// Frame is a packet being built in place in a caller's buffer, the one
// way both transport engines write packets: Begin writes the headers, and
// the caller either fills Payload and calls Seal, which writes the pad
// bytes and the ICRC, or copies the payload in with ICRCCopy from
// StartICRC's register and calls SealICRC (the engines: one read of the
// payload, copied straight from a memory region). A Frame is a small
// value; building allocates nothing.
type Frame struct {
	b   []byte // the packet, BTH through ICRC
	off int    // payload offset
	n   int    // payload length
	ph  *PseudoHeader
}

// Begin checks a packet of opcode h.BTH.Opcode with n payload bytes as
// Parse would (the opcode is known, the transport header version is 0, the
// opcode carries a payload if n > 0, exactly 8 bytes for ATOMIC_WRITE),
// checks that b holds it and that ph is valid (nil: the ICRC slot is
// zeroed, for a caller that computes it later), and writes the headers of h
// into b with the BTH pad count computed from n.
func Begin(b []byte, h *Headers, n int, ph *PseudoHeader) (Frame, error) {
	info := &opTable[h.BTH.Opcode]
	if info.Length == 0 {
		return Frame{}, ErrUnknownOpcode
	}
	// TVer is 4 bits on the wire (IBA 9.2.5); a receiver drops a packet
	// whose TVer is not 0 (Parse, rxe hdr_check), so none is built.
	if h.BTH.TVer&0x0F != 0 {
		return Frame{}, ErrBadTransportVersion
	}
	if n < 0 || info.Mask&MaskPayload == 0 && n != 0 ||
		info.Mask&MaskAtomicWrite != 0 && n != 8 {
		return Frame{}, ErrBadLength
	}
	if ph != nil && !ph.valid() {
		return Frame{}, ErrPseudoHeader
	}
	total := PacketLen(h.BTH.Opcode, n)
	if len(b) < total {
		return Frame{}, ErrBufferTooSmall
	}
	off, _ := h.Encode(b)
	BTH(b).SetPadCnt(PadLen(n))
	return Frame{b: b[:total], off: off, n: n, ph: ph}, nil
}

// Payload returns the payload bytes of the packet, for the caller to fill
// before Seal.
func (f Frame) Payload() []byte { return f.b[f.off : f.off+f.n] }

// Seal writes the zero pad bytes and the ICRC (IBA 9.2, Annex A17.4) and
// returns the packet length, BTH through ICRC.
func (f Frame) Seal() int { return f.SealICRC(ICRCUpdate(f.StartICRC(nil), f.Payload())) }

// StartICRC begins the ICRC of a packet whose payload the caller copies in
// with ICRCCopy, in order, chaining the register from the one StartICRC
// returns: it covers the pseudo-header (started by c, a sender's own
// ICRCPrefix, or from scratch when c is nil), the
// BTH and the headers after it. SealICRC then finishes the packet with the
// register after the last payload byte. The payload is then read once, as
// it is copied, instead of once by the copy and again by Seal.
func (f Frame) StartICRC(c *ICRCPrefix) uint32 {
	if f.ph == nil {
		return 0
	}
	crc := c.Start(f.ph, f.b[:BTHSize], len(f.b))
	return ICRCUpdate(crc, f.b[BTHSize:f.off])
}

// SealICRC writes the zero pad bytes and the ICRC, as Seal does, from crc,
// the register after the payload (StartICRC's, carried through ICRCCopy
// over every payload byte in order), and returns the packet length.
func (f Frame) SealICRC(crc uint32) int {
	end := f.off + f.n
	icrc := len(f.b) - ICRCSize
	clear(f.b[end:icrc])
	if f.ph == nil {
		clear(f.b[icrc:])
		return len(f.b)
	}
	crc = ICRCUpdate(crc, f.b[end:icrc])
	binary.LittleEndian.PutUint32(f.b[icrc:], crc)
	return len(f.b)
}

// Valid reports whether ph can cover a packet: both addresses valid and
// of one family.
func (ph *PseudoHeader) Valid() bool { return ph.valid() }

// Build writes a whole packet into b: the headers of h (with the BTH pad
// count computed from the payload length), the payload, zero pad bytes, and
// the ICRC computed over ph. With a nil ph the ICRC slot is zeroed, for a
// caller that computes it later. It returns the packet length. Build checks
// the opcode's payload rules as Parse does, so whatever it builds parses.
func Build(b []byte, h *Headers, payload []byte, ph *PseudoHeader) (int, error) {
	f, err := Begin(b, h, len(payload), ph)
	if err != nil {
		return 0, err
	}
	copy(f.Payload(), payload)
	return f.Seal(), nil
}
