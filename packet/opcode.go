package packet

import "strconv"

// Opcode is the 8-bit BTH OpCode (IBA 9.2.1, table 38). Bits 7..5 select the
// transport service (RC, UC, RD, UD, CNP, XRC) and bits 4..0 the operation.
type Opcode uint8

// Transport service prefixes of an Opcode (bits 7..5).
const (
	TransportRC  Opcode = 0x00 // reliable connected
	TransportUC  Opcode = 0x20 // unreliable connected
	TransportRD  Opcode = 0x40 // reliable datagram
	TransportUD  Opcode = 0x60 // unreliable datagram
	TransportCNP Opcode = 0x80 // RoCEv2 congestion notification (IBA A17.9.2)
	TransportXRC Opcode = 0xA0 // extended reliable connected

	transportMask Opcode = 0xE0
)

// Opcodes, named as in the kernel's include/rdma/ib_pack.h without the
// IB_OPCODE_ prefix (IBA 9.2.1 table 38, plus the memory placement
// extensions FLUSH and ATOMIC_WRITE, and the RoCEv2 CNP).
const (
	RCSendFirst              Opcode = 0x00
	RCSendMiddle             Opcode = 0x01
	RCSendLast               Opcode = 0x02
	RCSendLastWithImmediate  Opcode = 0x03
	RCSendOnly               Opcode = 0x04
	RCSendOnlyWithImmediate  Opcode = 0x05
	RCRDMAWriteFirst         Opcode = 0x06
	RCRDMAWriteMiddle        Opcode = 0x07
	RCRDMAWriteLast          Opcode = 0x08
	RCRDMAWriteLastWithImm   Opcode = 0x09
	RCRDMAWriteOnly          Opcode = 0x0A
	RCRDMAWriteOnlyWithImm   Opcode = 0x0B
	RCRDMAReadRequest        Opcode = 0x0C
	RCRDMAReadResponseFirst  Opcode = 0x0D
	RCRDMAReadResponseMiddle Opcode = 0x0E
	RCRDMAReadResponseLast   Opcode = 0x0F
	RCRDMAReadResponseOnly   Opcode = 0x10
	RCAcknowledge            Opcode = 0x11
	RCAtomicAcknowledge      Opcode = 0x12
	RCCompareSwap            Opcode = 0x13
	RCFetchAdd               Opcode = 0x14
	RCSendLastWithInvalidate Opcode = 0x16
	RCSendOnlyWithInvalidate Opcode = 0x17
	RCFlush                  Opcode = 0x1C
	RCAtomicWrite            Opcode = 0x1D
	UCSendFirst              Opcode = 0x20
	UCSendMiddle             Opcode = 0x21
	UCSendLast               Opcode = 0x22
	UCSendLastWithImmediate  Opcode = 0x23
	UCSendOnly               Opcode = 0x24
	UCSendOnlyWithImmediate  Opcode = 0x25
	UCRDMAWriteFirst         Opcode = 0x26
	UCRDMAWriteMiddle        Opcode = 0x27
	UCRDMAWriteLast          Opcode = 0x28
	UCRDMAWriteLastWithImm   Opcode = 0x29
	UCRDMAWriteOnly          Opcode = 0x2A
	UCRDMAWriteOnlyWithImm   Opcode = 0x2B
	RDSendFirst              Opcode = 0x40
	RDSendMiddle             Opcode = 0x41
	RDSendLast               Opcode = 0x42
	RDSendLastWithImmediate  Opcode = 0x43
	RDSendOnly               Opcode = 0x44
	RDSendOnlyWithImmediate  Opcode = 0x45
	RDRDMAWriteFirst         Opcode = 0x46
	RDRDMAWriteMiddle        Opcode = 0x47
	RDRDMAWriteLast          Opcode = 0x48
	RDRDMAWriteLastWithImm   Opcode = 0x49
	RDRDMAWriteOnly          Opcode = 0x4A
	RDRDMAWriteOnlyWithImm   Opcode = 0x4B
	RDRDMAReadRequest        Opcode = 0x4C
	RDRDMAReadResponseFirst  Opcode = 0x4D
	RDRDMAReadResponseMiddle Opcode = 0x4E
	RDRDMAReadResponseLast   Opcode = 0x4F
	RDRDMAReadResponseOnly   Opcode = 0x50
	RDAcknowledge            Opcode = 0x51
	RDAtomicAcknowledge      Opcode = 0x52
	RDCompareSwap            Opcode = 0x53
	RDFetchAdd               Opcode = 0x54
	RDFlush                  Opcode = 0x5C
	UDSendOnly               Opcode = 0x64
	UDSendOnlyWithImmediate  Opcode = 0x65
	CNP                      Opcode = 0x81
)

// Transport returns the transport service bits of op (one of the Transport*
// constants), except that every 0x80..0x9F opcode reports TransportCNP.
func (op Opcode) Transport() Opcode { return op & transportMask }

// Valid reports whether op is an opcode this package knows.
func (op Opcode) Valid() bool { return opTable[op].Length != 0 }

// Info returns the opcode table entry of op. For an unknown opcode the
// entry's Length is zero and Name is empty.
func (op Opcode) Info() *OpInfo { return &opTable[op] }

// String returns the kernel's name of op without the IB_OPCODE_ prefix, for
// example "RC_RDMA_READ_RESPONSE_MIDDLE", or "OPCODE_0xNN" if unknown.
func (op Opcode) String() string {
	if n := opTable[op].Name; n != "" {
		return n
	}
	return "OPCODE_0x" + strconv.FormatUint(uint64(op)|0x100, 16)[1:]
}

// Mask describes an opcode: the headers it carries, where it sits in a
// message, and what it does. It mirrors the RXE_*_MASK bits of the kernel's
// rxe_opcode.h.
type Mask uint32

// Header bits of a Mask: which extension headers follow the BTH.
const (
	MaskRDETH Mask = 1 << iota
	MaskDETH
	MaskFETH
	MaskRETH
	MaskAtomicETH
	MaskAETH
	MaskAtomicAckETH
	MaskImmDt
	MaskIETH
	MaskCNP // the 16 reserved bytes of a CNP

	// MaskPayload: the opcode carries a payload (possibly empty).
	MaskPayload
	// MaskRead: an RDMA READ request.
	MaskRead
	// MaskWrite: an RDMA WRITE (or ATOMIC_WRITE) request.
	MaskWrite
	// MaskSend: a SEND request.
	MaskSend
	// MaskAtomic: a COMPARE_SWAP or FETCH_ADD request.
	MaskAtomic
	// MaskFlush: a FLUSH request.
	MaskFlush
	// MaskAtomicWrite: an ATOMIC_WRITE request.
	MaskAtomicWrite
	// MaskReq: the packet travels from requester to responder.
	MaskReq
	// MaskAck: the packet is a response (ACK, read response, atomic ACK).
	MaskAck
	// MaskRWR: the packet consumes a receive WQE at the responder (the
	// first packet of a SEND, a WRITE with immediate's last packet).
	MaskRWR
	// MaskComp: the packet completes a message at the responder.
	MaskComp
	// MaskStart: first packet of a message (FIRST or ONLY).
	MaskStart
	// MaskMiddle: a MIDDLE packet.
	MaskMiddle
	// MaskEnd: last packet of a message (LAST or ONLY).
	MaskEnd
)

// Header sizes in bytes (IBA 9.2 - 9.3).
const (
	BTHSize          = 12
	RDETHSize        = 4
	DETHSize         = 8
	RETHSize         = 16
	AtomicETHSize    = 28
	AETHSize         = 4
	AtomicAckETHSize = 8
	ImmDtSize        = 4
	IETHSize         = 4
	FETHSize         = 4
	CNPSize          = 16
	ICRCSize         = 4
)

// Hdr names one extension header; it indexes OpInfo.Offset.
type Hdr uint8

// Extension headers, in the order they appear after the BTH (IBA 9.2).
const (
	HdrRDETH Hdr = iota
	HdrDETH
	HdrFETH
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH
	HdrCNP
	NumHdrs
)

var hdrSizes = [NumHdrs]int{RDETHSize, DETHSize, FETHSize, RETHSize, AtomicETHSize, AETHSize, AtomicAckETHSize, ImmDtSize, IETHSize, CNPSize}

// Size returns the length in bytes of header h.
func (h Hdr) Size() int { return hdrSizes[h] }

// Mask returns the Mask bit that says an opcode carries h.
func (h Hdr) Mask() Mask { return 1 << h }

// OpInfo is one entry of the opcode table, like rxe_opcode_info.
type OpInfo struct {
	// Name is the kernel's opcode name without the IB_OPCODE_ prefix.
	Name string
	// Mask lists the headers and properties of the opcode.
	Mask Mask
	// Length is the length of BTH plus all extension headers, i.e. the
	// offset of the payload. Zero for an unknown opcode.
	Length int
	// Offset gives, for each header the opcode carries, its offset from the
	// start of the BTH; zero for headers it does not carry.
	Offset [NumHdrs]uint8
}

// Has reports whether the opcode carries header h.
func (i *OpInfo) Has(h Hdr) bool { return i.Mask&h.Mask() != 0 }

// Is reports whether all bits of m are set in the opcode's mask.
func (i *OpInfo) Is(m Mask) bool { return i.Mask&m == m }

var opTable [256]OpInfo

func def(op Opcode, name string, m Mask) {
	info := OpInfo{Name: name, Mask: m}
	off := BTHSize
	for h := Hdr(0); h < NumHdrs; h++ {
		if m&h.Mask() != 0 {
			info.Offset[h] = uint8(off)
			off += h.Size()
		}
	}
	info.Length = off
	opTable[op] = info
}

// The table below is written from IBA 9.2.1 table 38 and the header lists of
// 9.3; it agrees with rxe_opcode.c for RC, UC and UD, and with ib_pack.h for
// the RD names (ib_pack.h has no RD RESYNC).
func init() {
	const (
		pay  = MaskPayload
		req  = MaskReq
		ack  = MaskAck
		st   = MaskStart
		mid  = MaskMiddle
		end  = MaskEnd
		only = MaskStart | MaskEnd
	)
	type row struct {
		op   Opcode
		name string
		m    Mask
	}
	// Operations shared by RC, UC and RD (offset within the transport).
	common := []row{
		{0x00, "SEND_FIRST", req | pay | MaskSend | MaskRWR | st},
		{0x01, "SEND_MIDDLE", req | pay | MaskSend | mid},
		{0x02, "SEND_LAST", req | pay | MaskSend | MaskComp | end},
		{0x03, "SEND_LAST_WITH_IMMEDIATE", req | pay | MaskSend | MaskImmDt | MaskComp | end},
		{0x04, "SEND_ONLY", req | pay | MaskSend | MaskRWR | MaskComp | only},
		{0x05, "SEND_ONLY_WITH_IMMEDIATE", req | pay | MaskSend | MaskImmDt | MaskRWR | MaskComp | only},
		{0x06, "RDMA_WRITE_FIRST", req | pay | MaskWrite | MaskRETH | st},
		{0x07, "RDMA_WRITE_MIDDLE", req | pay | MaskWrite | mid},
		{0x08, "RDMA_WRITE_LAST", req | pay | MaskWrite | end},
		{0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", req | pay | MaskWrite | MaskImmDt | MaskRWR | MaskComp | end},
		{0x0A, "RDMA_WRITE_ONLY", req | pay | MaskWrite | MaskRETH | only},
		{0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", req | pay | MaskWrite | MaskRETH | MaskImmDt | MaskRWR | MaskComp | only},
	}
	// Operations of RC and RD only.
	reliable := []row{
		{0x0C, "RDMA_READ_REQUEST", req | MaskRead | MaskRETH | only},
		{0x0D, "RDMA_READ_RESPONSE_FIRST", ack | pay | MaskAETH | st},
		{0x0E, "RDMA_READ_RESPONSE_MIDDLE", ack | pay | mid},
		{0x0F, "RDMA_READ_RESPONSE_LAST", ack | pay | MaskAETH | end},
		{0x10, "RDMA_READ_RESPONSE_ONLY", ack | pay | MaskAETH | only},
		{0x11, "ACKNOWLEDGE", ack | MaskAETH | only},
		{0x12, "ATOMIC_ACKNOWLEDGE", ack | MaskAETH | MaskAtomicAckETH | only},
		{0x13, "COMPARE_SWAP", req | MaskAtomic | MaskAtomicETH | only},
		{0x14, "FETCH_ADD", req | MaskAtomic | MaskAtomicETH | only},
		{0x1C, "FLUSH", req | MaskFlush | MaskFETH | MaskRETH | only},
	}
	for _, r := range common {
		def(TransportRC|r.op, "RC_"+r.name, r.m)
		def(TransportUC|r.op, "UC_"+r.name, r.m)
		// RD requests carry RDETH and DETH (IBA 9.3.2).
		def(TransportRD|r.op, "RD_"+r.name, r.m|MaskRDETH|MaskDETH)
	}
	for _, r := range reliable {
		def(TransportRC|r.op, "RC_"+r.name, r.m)
		m := r.m | MaskRDETH
		if m&MaskReq != 0 {
			m |= MaskDETH
		}
		def(TransportRD|r.op, "RD_"+r.name, m)
	}
	// RESYNC (operation 10101b) exists in RD only: BTH, RDETH, DETH and
	// no payload (IBA 9.2.1 table 38, the header lists of 9.3). The
	// kernel has no RD RESYNC; in RC and UC the operation is reserved.
	def(TransportRD|0x15, "RD_RESYNC", req|MaskRDETH|MaskDETH|only)
	def(RCSendLastWithInvalidate, "RC_SEND_LAST_WITH_INVALIDATE", req|pay|MaskSend|MaskIETH|MaskComp|end)
	def(RCSendOnlyWithInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", req|pay|MaskSend|MaskIETH|MaskRWR|MaskComp|only)
	def(RCAtomicWrite, "RC_ATOMIC_WRITE", req|pay|MaskWrite|MaskAtomicWrite|MaskRETH|only)
	def(UDSendOnly, "UD_SEND_ONLY", req|pay|MaskSend|MaskDETH|MaskRWR|MaskComp|only)
	def(UDSendOnlyWithImmediate, "UD_SEND_ONLY_WITH_IMMEDIATE", req|pay|MaskSend|MaskDETH|MaskImmDt|MaskRWR|MaskComp|only)
	def(CNP, "CNP", MaskCNP)
}
