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

// Build writes a whole packet into b: the headers of h (with the BTH pad
// count computed from the payload length), the payload, zero pad bytes, and
// the ICRC computed over ph. With a nil ph the ICRC slot is zeroed, for a
// caller that computes it later. It returns the packet length. Build checks
// the opcode's payload rules as Parse does, so whatever it builds parses.
func Build(b []byte, h *Headers, payload []byte, ph *PseudoHeader) (int, error) {
	op := h.BTH.Opcode
	info := &opTable[op]
	if info.Length == 0 {
		return 0, ErrUnknownOpcode
	}
	if info.Mask&MaskPayload == 0 && len(payload) != 0 ||
		info.Mask&MaskAtomicWrite != 0 && len(payload) != 8 {
		return 0, ErrBadLength
	}
	if ph != nil && !ph.valid() {
		return 0, ErrPseudoHeader
	}
	n := PacketLen(op, len(payload))
	if len(b) < n {
		return 0, ErrBufferTooSmall
	}
	pad := PadLen(len(payload))
	off, _ := h.Encode(b)
	BTH(b).SetPadCnt(pad)
	off += copy(b[off:], payload)
	clear(b[off : off+pad])
	if ph == nil {
		clear(b[n-ICRCSize : n])
		return n, nil
	}
	crc := ph.ICRCStart(b[:BTHSize], n)
	crc = ICRCUpdate(crc, b[BTHSize:n-ICRCSize])
	binary.LittleEndian.PutUint32(b[n-ICRCSize:], crc)
	return n, nil
}
