package packet

import "encoding/binary"

// BTH is a view of a Base Transport Header (IBA 9.2), at least BTHSize long.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  Resv6a   |                 DestQP                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |                  PSN                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type BTH []byte

// QPNMask masks a 24-bit queue pair number.
const QPNMask = 0xFFFFFF

// DefaultPKey is the default partition key, full membership (IBA 10.9.1.2).
const DefaultPKey = 0xFFFF

// Opcode returns the OpCode field.
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SE returns the Solicited Event bit.
func (b BTH) SE() bool { return b[1]&0x80 != 0 }

// MigReq returns the MigReq bit.
func (b BTH) MigReq() bool { return b[1]&0x40 != 0 }

// PadCnt returns the pad count, 0..3.
func (b BTH) PadCnt() int { return int(b[1]>>4) & 3 }

// TVer returns the transport header version (0 for IBA 1.x).
func (b BTH) TVer() uint8 { return b[1] & 0x0F }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// FECN returns the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[4]&0x80 != 0 }

// BECN returns the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[4]&0x40 != 0 }

// DestQP returns the 24-bit destination QP number.
func (b BTH) DestQP() uint32 { return binary.BigEndian.Uint32(b[4:]) & QPNMask }

// AckReq returns the AckReq bit.
func (b BTH) AckReq() bool { return b[8]&0x80 != 0 }

// PSN returns the 24-bit packet sequence number.
func (b BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(b[8:]) & PSNMask) }

// SetOpcode sets the OpCode field.
func (b BTH) SetOpcode(op Opcode) { b[0] = byte(op) }

// SetPadCnt sets the pad count (0..3).
func (b BTH) SetPadCnt(n int) { b[1] = b[1]&^0x30 | byte(n&3)<<4 }

// SetDestQP sets the destination QP number, keeping FECN, BECN and Resv6a.
func (b BTH) SetDestQP(qpn uint32) {
	binary.BigEndian.PutUint32(b[4:], binary.BigEndian.Uint32(b[4:])&^QPNMask|qpn&QPNMask)
}

// SetAckReq sets or clears the AckReq bit.
func (b BTH) SetAckReq(v bool) { b[8] = setBit(b[8], 0x80, v) }

// SetPSN sets the PSN, keeping AckReq and Resv7.
func (b BTH) SetPSN(p PSN) {
	binary.BigEndian.PutUint32(b[8:], binary.BigEndian.Uint32(b[8:])&^PSNMask|uint32(p)&PSNMask)
}

// SetFECN sets or clears the FECN bit.
func (b BTH) SetFECN(v bool) { b[4] = setBit(b[4], 0x80, v) }

// SetBECN sets or clears the BECN bit.
func (b BTH) SetBECN(v bool) { b[4] = setBit(b[4], 0x40, v) }

func setBit(x, bit byte, v bool) byte {
	if v {
		return x | bit
	}
	return x &^ bit
}

// BTHFields holds the fields of a BTH, for encoding.
type BTHFields struct {
	Opcode Opcode
	SE     bool
	MigReq bool
	PadCnt uint8 // 0..3; Build computes it from the payload length
	TVer   uint8 // 0..15; must be 0 on the wire today
	PKey   uint16
	FECN   bool
	BECN   bool
	Resv6a uint8 // 6 bits, sent as 0
	DestQP uint32
	AckReq bool
	Resv7  uint8 // 7 bits, sent as 0
	PSN    PSN
}

// Encode writes f into b (at least BTHSize bytes).
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHSize-1]
	b[0] = byte(f.Opcode)
	b[1] = boolBit(f.SE, 0x80) | boolBit(f.MigReq, 0x40) | (f.PadCnt&3)<<4 | f.TVer&0x0F
	binary.BigEndian.PutUint16(b[2:], f.PKey)
	binary.BigEndian.PutUint32(b[4:], f.DestQP&QPNMask)
	b[4] = boolBit(f.FECN, 0x80) | boolBit(f.BECN, 0x40) | f.Resv6a&0x3F
	binary.BigEndian.PutUint32(b[8:], uint32(f.PSN)&PSNMask)
	b[8] = boolBit(f.AckReq, 0x80) | f.Resv7&0x7F
}

// Fields decodes b into a BTHFields.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), PadCnt: uint8(b.PadCnt()),
		TVer: b.TVer(), PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(), Resv6a: b[4] & 0x3F,
		DestQP: b.DestQP(), AckReq: b.AckReq(), Resv7: b[8] & 0x7F, PSN: b.PSN(),
	}
}

func boolBit(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}

// RETH is a view of an RDMA Extended Transport Header (IBA 9.3.3): the
// target virtual address, R_Key and DMA length of an RDMA WRITE, READ,
// FLUSH or ATOMIC_WRITE. The DMA length is that of the whole message.
type RETH []byte

// VA returns the virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r) }

// RKey returns the remote key.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// DMALen returns the DMA length in bytes.
func (r RETH) DMALen() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// RETHFields holds the fields of a RETH.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// Encode writes f into r.
func (r RETH) Encode(f *RETHFields) {
	_ = r[RETHSize-1]
	binary.BigEndian.PutUint64(r, f.VA)
	binary.BigEndian.PutUint32(r[8:], f.RKey)
	binary.BigEndian.PutUint32(r[12:], f.DMALen)
}

// Fields decodes r.
func (r RETH) Fields() RETHFields {
	return RETHFields{VA: r.VA(), RKey: r.RKey(), DMALen: r.DMALen()}
}

// AtomicETH is a view of an Atomic Extended Transport Header (IBA 9.3.4).
// Note the order on the wire: swap (or add) data before compare data.
type AtomicETH []byte

// VA returns the virtual address (8-byte aligned in a valid request).
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a) }

// RKey returns the remote key.
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[8:]) }

// SwapAdd returns the swap (COMPARE_SWAP) or add (FETCH_ADD) operand.
func (a AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(a[12:]) }

// Compare returns the compare operand (COMPARE_SWAP only).
func (a AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(a[20:]) }

// AtomicETHFields holds the fields of an AtomicETH.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// Encode writes f into a.
func (a AtomicETH) Encode(f *AtomicETHFields) {
	_ = a[AtomicETHSize-1]
	binary.BigEndian.PutUint64(a, f.VA)
	binary.BigEndian.PutUint32(a[8:], f.RKey)
	binary.BigEndian.PutUint64(a[12:], f.SwapAdd)
	binary.BigEndian.PutUint64(a[20:], f.Compare)
}

// Fields decodes a.
func (a AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: a.VA(), RKey: a.RKey(), SwapAdd: a.SwapAdd(), Compare: a.Compare()}
}

// AETH is a view of an ACK Extended Transport Header (IBA 9.3.5): the
// syndrome and the responder's 24-bit message sequence number.
type AETH []byte

// Syndrome returns the syndrome byte.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// MSN returns the message sequence number.
func (a AETH) MSN() uint32 { return binary.BigEndian.Uint32(a) & 0xFFFFFF }

// Encode writes a syndrome and MSN into a.
func (a AETH) Encode(s Syndrome, msn uint32) {
	binary.BigEndian.PutUint32(a, uint32(s)<<24|msn&0xFFFFFF)
}

// AtomicAckETH is a view of an Atomic Acknowledge Extended Transport Header
// (IBA 9.3.6): the original remote value.
type AtomicAckETH []byte

// Orig returns the original remote data.
func (a AtomicAckETH) Orig() uint64 { return binary.BigEndian.Uint64(a) }

// SetOrig sets the original remote data.
func (a AtomicAckETH) SetOrig(v uint64) { binary.BigEndian.PutUint64(a, v) }

// ImmDt is a view of the Immediate Data header (IBA 9.3.7). The value is
// opaque: Imm returns it as a big-endian 32-bit number, the way every
// decoder displays it; the bytes are passed to the receiver unchanged.
type ImmDt []byte

// Imm returns the immediate data.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i) }

// SetImm sets the immediate data.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i, v) }

// IETH is a view of the Invalidate Extended Transport Header (IBA 9.3.8).
type IETH []byte

// RKey returns the R_Key to invalidate.
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i) }

// SetRKey sets the R_Key to invalidate.
func (i IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(i, v) }

// DETH is a view of a Datagram Extended Transport Header (IBA 9.3.2).
type DETH []byte

// QKey returns the queue key.
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d) }

// SrcQP returns the 24-bit source QP number.
func (d DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(d[4:]) & QPNMask }

// Encode writes the Q_Key and source QP into d.
func (d DETH) Encode(qkey, srcQP uint32) {
	binary.BigEndian.PutUint32(d, qkey)
	binary.BigEndian.PutUint32(d[4:], srcQP&QPNMask)
}

// RDETH is a view of a Reliable Datagram Extended Transport Header
// (IBA 9.3.1).
type RDETH []byte

// EEC returns the 24-bit end-to-end context.
func (r RDETH) EEC() uint32 { return binary.BigEndian.Uint32(r) & 0xFFFFFF }

// SetEEC sets the end-to-end context.
func (r RDETH) SetEEC(v uint32) { binary.BigEndian.PutUint32(r, v&0xFFFFFF) }

// FETH is a view of the FLUSH Extended Transport Header (IBA memory
// placement extensions, as in rxe_hdr.h): bits 5..4 selectivity level,
// bits 3..0 placement type.
type FETH []byte

// Value returns the raw 32-bit FETH word.
func (f FETH) Value() uint32 { return binary.BigEndian.Uint32(f) }

// SelectivityLevel returns 0 (memory range) or 1 (whole memory region).
func (f FETH) SelectivityLevel() uint8 { return uint8(f.Value()>>4) & 3 }

// PlacementType returns the placement type bits (bit 0 global visibility,
// bit 1 persistence).
func (f FETH) PlacementType() uint8 { return uint8(f.Value()) & 0x0F }

// SetValue sets the raw FETH word.
func (f FETH) SetValue(v uint32) { binary.BigEndian.PutUint32(f, v) }
