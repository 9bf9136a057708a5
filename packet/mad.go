package packet

import (
	"encoding/binary"
	"errors"
)

// MAD sizes (IBA 13.4.2): every MAD a GSI QP sends or receives is 256 bytes,
// a 24-byte common header followed by the management class's data.
const (
	MADSize       = 256
	MADHeaderSize = 24
	// CMDataSize is the size of a communication-management message: the
	// MAD's data area (IBA 16.7.1).
	CMDataSize = MADSize - MADHeaderSize
)

// Management class values used on QP1 (IBA 13.4.4).
const (
	MgmtClassCM    = 0x07 // communication management (IBA 12, 16.7)
	MADBaseVersion = 1
	// CMClassVersion is the CM class version of IBA 1.2 and later, the one
	// kernel ib_cm sends and requires.
	CMClassVersion = 2
)

// MAD methods (IBA 13.4.5). The top bit of the method byte is the response
// bit R.
const (
	MethodGet     = 0x01
	MethodSet     = 0x02
	MethodSend    = 0x03
	MethodGetResp = 0x81
	MethodRespBit = 0x80
)

// GSIQPN is QP1, the General Services Interface QP that carries MADs
// (IBA 13.5.1).
const GSIQPN = 1

// GSIQKey is the well-known Q_Key of QP1 (IBA 13.5.1): a controlled Q_Key
// (its top bit set), so a consumer cannot send with it from an ordinary UD QP.
const GSIQKey = 0x80010000

// QKeyControlled is the high-order bit of a Q_Key: a Q_Key with it set is
// controlled, and a work request may not supply it; the QP's own Q_Key is
// used instead (IBA 10.2.5, C10-15).
const QKeyControlled = 0x80000000

// CMAttr is a communication-management attribute ID (IBA 16.7.2, table 229):
// which CM message a MAD carries.
type CMAttr uint16

// The CM attributes.
const (
	AttrClassPortInfo CMAttr = 0x0001
	AttrREQ           CMAttr = 0x0010
	AttrMRA           CMAttr = 0x0011
	AttrREJ           CMAttr = 0x0012
	AttrREP           CMAttr = 0x0013
	AttrRTU           CMAttr = 0x0014
	AttrDREQ          CMAttr = 0x0015
	AttrDREP          CMAttr = 0x0016
	AttrSIDRREQ       CMAttr = 0x0017
	AttrSIDRREP       CMAttr = 0x0018
	AttrLAP           CMAttr = 0x0019
	AttrAPR           CMAttr = 0x001A
)

var cmAttrNames = map[CMAttr]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

// String returns the message name, as in IBA table 229.
func (a CMAttr) String() string {
	if s, ok := cmAttrNames[a]; ok {
		return s
	}
	return "CMAttr(0x" + hex16(uint16(a)) + ")"
}

func hex16(v uint16) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>12], digits[v>>8&15], digits[v>>4&15], digits[v&15]})
}

// Errors returned by the MAD decoders.
var (
	// ErrMADTruncated: fewer bytes than a MAD (or the message) needs.
	ErrMADTruncated = errors.New("packet: MAD truncated")
	// ErrMADVersion: the base version is not 1 (IBA 13.4.2).
	ErrMADVersion = errors.New("packet: MAD base version not 1")
	// ErrNotCM: the management class is not CM or its class version is not 2.
	ErrNotCM = errors.New("packet: not a CM class version 2 MAD")
)

// MADHeader is the common MAD header (IBA 13.4.2, table 145).
type MADHeader struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8 // including the response bit R (0x80)
	Status        uint16
	ClassSpecific uint16
	TID           uint64 // transaction ID
	AttrID        uint16
	AttrMod       uint32
}

// Decode fills h from the first 24 bytes of b.
func (h *MADHeader) Decode(b []byte) error {
	if len(b) < MADHeaderSize {
		return ErrMADTruncated
	}
	*h = MADHeader{
		BaseVersion:   b[0],
		MgmtClass:     b[1],
		ClassVersion:  b[2],
		Method:        b[3],
		Status:        binary.BigEndian.Uint16(b[4:]),
		ClassSpecific: binary.BigEndian.Uint16(b[6:]),
		TID:           binary.BigEndian.Uint64(b[8:]),
		AttrID:        binary.BigEndian.Uint16(b[16:]),
		AttrMod:       binary.BigEndian.Uint32(b[20:]),
	}
	return nil
}

// Encode writes h into the first 24 bytes of b (the reserved field as 0).
func (h *MADHeader) Encode(b []byte) {
	_ = b[MADHeaderSize-1]
	b[0], b[1], b[2], b[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(b[4:], h.Status)
	binary.BigEndian.PutUint16(b[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(b[8:], h.TID)
	binary.BigEndian.PutUint16(b[16:], h.AttrID)
	binary.BigEndian.PutUint16(b[18:], 0)
	binary.BigEndian.PutUint32(b[20:], h.AttrMod)
}

// CMHeader returns the header of a CM Send MAD for attribute a with
// transaction ID tid (IBA 12.6.1: CM messages are sent with method Send).
func CMHeader(a CMAttr, tid uint64) MADHeader {
	return MADHeader{BaseVersion: MADBaseVersion, MgmtClass: MgmtClassCM, ClassVersion: CMClassVersion,
		Method: MethodSend, TID: tid, AttrID: uint16(a)}
}

// DecodeCMHeader decodes the header of a CM MAD and checks that b holds a
// whole MAD of base version 1, class CM, class version 2. It returns the
// header and the 232-byte CM message area.
func DecodeCMHeader(b []byte) (MADHeader, []byte, error) {
	var h MADHeader
	if len(b) < MADSize {
		return h, nil, ErrMADTruncated
	}
	_ = h.Decode(b) // cannot fail: len(b) >= MADSize was checked above
	if h.BaseVersion != MADBaseVersion {
		return h, nil, ErrMADVersion
	}
	if h.MgmtClass != MgmtClassCM || h.ClassVersion != CMClassVersion {
		return h, nil, ErrNotCM
	}
	return h, b[MADHeaderSize:MADSize], nil
}

// EncodeCM writes a whole CM MAD into b (at least MADSize bytes): the header
// for attribute a and transaction ID tid, then the message m. It returns
// MADSize.
func EncodeCM(b []byte, tid uint64, m CMMessage) int {
	h := CMHeader(m.Attr(), tid)
	h.Encode(b)
	m.Encode(b[MADHeaderSize:MADSize])
	return MADSize
}

// CMMessage is a CM message that encodes itself into a 232-byte message area.
type CMMessage interface {
	// Attr returns the message's attribute ID.
	Attr() CMAttr
	// Encode writes the message into b[:CMDataSize], reserved bits as 0.
	Encode(b []byte)
}

// bit-field helpers: fields are numbered as in IBA tables, bit 0 being the
// most significant bit of the byte.
func getBits(x byte, off, width uint) uint8 { return (x >> (8 - off - width)) & (1<<width - 1) }

func putBits(x byte, off, width uint, v uint8) byte {
	shift := 8 - off - width
	mask := byte(1<<width-1) << shift
	return x&^mask | (v<<shift)&mask
}

func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

func bit(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

func clearBytes(b []byte) {
	for i := range b {
		b[i] = 0
	}
}

// CMPath is the path information of a REQ (IBA 12.6.5, table 106: the
// primary and alternate path blocks, 44 bytes each).
type CMPath struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        [16]byte
	RemoteGID       [16]byte
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits
}

const cmPathSize = 44

func (p *CMPath) decode(b []byte) {
	p.LocalLID = binary.BigEndian.Uint16(b)
	p.RemoteLID = binary.BigEndian.Uint16(b[2:])
	copy(p.LocalGID[:], b[4:20])
	copy(p.RemoteGID[:], b[20:36])
	p.FlowLabel = binary.BigEndian.Uint32(b[36:]) >> 12
	p.PacketRate = getBits(b[39], 2, 6)
	p.TrafficClass = b[40]
	p.HopLimit = b[41]
	p.SL = getBits(b[42], 0, 4)
	p.SubnetLocal = getBits(b[42], 4, 1) != 0
	p.LocalACKTimeout = getBits(b[43], 0, 5)
}

func (p *CMPath) encode(b []byte) {
	binary.BigEndian.PutUint16(b, p.LocalLID)
	binary.BigEndian.PutUint16(b[2:], p.RemoteLID)
	copy(b[4:20], p.LocalGID[:])
	copy(b[20:36], p.RemoteGID[:])
	binary.BigEndian.PutUint32(b[36:], (p.FlowLabel&0xFFFFF)<<12)
	b[39] = putBits(b[39], 2, 6, p.PacketRate)
	b[40], b[41] = p.TrafficClass, p.HopLimit
	b[42] = putBits(putBits(0, 0, 4, p.SL), 4, 1, bit(p.SubnetLocal))
	b[43] = putBits(0, 0, 5, p.LocalACKTimeout)
}

// Transport service types of a REQ (IBA 12.6.5).
const (
	CMTransportRC = 0
	CMTransportUC = 1
	CMTransportRD = 2
)

// Private data sizes of each CM message (IBA 12.6).
const (
	REQPrivateDataSize     = 92
	MRAPrivateDataSize     = 222
	REJPrivateDataSize     = 148
	REJARISize             = 72
	REPPrivateDataSize     = 196
	RTUPrivateDataSize     = 224
	DREQPrivateDataSize    = 220
	DREPPrivateDataSize    = 224
	SIDRREQPrivateDataSize = 216
	SIDRREPPrivateDataSize = 136
	SIDRREPAddInfoSize     = 72
)

// REQ is the Request for Communication (IBA 12.6.5, table 106).
type REQ struct {
	LocalCommID             uint32
	VendorID                uint32 // 24 bits
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits: 4.096 µs · 2^t
	TransportServiceType    uint8  // 2 bits: CMTransportRC, UC, RD
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits: 1 = 256 … 5 = 4096
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransportType   uint8 // 3 bits
	Primary                 CMPath
	Alternate               CMPath
	SAPSupported            bool
	PrivateData             [REQPrivateDataSize]byte
}

// Attr returns AttrREQ.
func (*REQ) Attr() CMAttr { return AttrREQ }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *REQ) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.VendorID = get24(b[5:])
	m.ServiceID = binary.BigEndian.Uint64(b[8:])
	m.LocalCAGUID = binary.BigEndian.Uint64(b[16:])
	m.LocalQKey = binary.BigEndian.Uint32(b[28:])
	m.LocalQPN = get24(b[32:])
	m.ResponderResources = b[35]
	m.LocalEECN = get24(b[36:])
	m.InitiatorDepth = b[39]
	m.RemoteEECN = get24(b[40:])
	m.RemoteCMResponseTimeout = getBits(b[43], 0, 5)
	m.TransportServiceType = getBits(b[43], 5, 2)
	m.EndToEndFlowControl = getBits(b[43], 7, 1) != 0
	m.StartingPSN = get24(b[44:])
	m.LocalCMResponseTimeout = getBits(b[47], 0, 5)
	m.RetryCount = getBits(b[47], 5, 3)
	m.PKey = binary.BigEndian.Uint16(b[48:])
	m.PathMTU = getBits(b[50], 0, 4)
	m.RDCExists = getBits(b[50], 4, 1) != 0
	m.RNRRetryCount = getBits(b[50], 5, 3)
	m.MaxCMRetries = getBits(b[51], 0, 4)
	m.SRQ = getBits(b[51], 4, 1) != 0
	m.ExtendedTransportType = getBits(b[51], 5, 3)
	m.Primary.decode(b[52:])
	m.Alternate.decode(b[52+cmPathSize:])
	m.SAPSupported = getBits(b[139], 5, 1) != 0
	copy(m.PrivateData[:], b[140:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *REQ) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	put24(b[5:], m.VendorID)
	binary.BigEndian.PutUint64(b[8:], m.ServiceID)
	binary.BigEndian.PutUint64(b[16:], m.LocalCAGUID)
	binary.BigEndian.PutUint32(b[28:], m.LocalQKey)
	put24(b[32:], m.LocalQPN)
	b[35] = m.ResponderResources
	put24(b[36:], m.LocalEECN)
	b[39] = m.InitiatorDepth
	put24(b[40:], m.RemoteEECN)
	b[43] = putBits(putBits(putBits(0, 0, 5, m.RemoteCMResponseTimeout), 5, 2, m.TransportServiceType), 7, 1, bit(m.EndToEndFlowControl))
	put24(b[44:], m.StartingPSN)
	b[47] = putBits(putBits(0, 0, 5, m.LocalCMResponseTimeout), 5, 3, m.RetryCount)
	binary.BigEndian.PutUint16(b[48:], m.PKey)
	b[50] = putBits(putBits(putBits(0, 0, 4, m.PathMTU), 4, 1, bit(m.RDCExists)), 5, 3, m.RNRRetryCount)
	b[51] = putBits(putBits(putBits(0, 0, 4, m.MaxCMRetries), 4, 1, bit(m.SRQ)), 5, 3, m.ExtendedTransportType)
	m.Primary.encode(b[52:])
	m.Alternate.encode(b[52+cmPathSize:])
	b[139] = putBits(b[139], 5, 1, bit(m.SAPSupported))
	copy(b[140:], m.PrivateData[:])
}

// Values of the "message MRAed" and "message rejected" fields (IBA 12.6.6,
// 12.6.7).
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2 // LAP for MRA and REJ
)

// MRA is the Message Receipt Acknowledgement (IBA 12.6.6, table 107).
type MRA struct {
	LocalCommID    uint32
	RemoteCommID   uint32
	MessageMRAed   uint8 // 2 bits: MsgREQ, MsgREP, MsgOther
	ServiceTimeout uint8 // 5 bits: 4.096 µs · 2^t
	PrivateData    [MRAPrivateDataSize]byte
}

// Attr returns AttrMRA.
func (*MRA) Attr() CMAttr { return AttrMRA }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *MRA) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.RemoteCommID = binary.BigEndian.Uint32(b[4:])
	m.MessageMRAed = getBits(b[8], 0, 2)
	m.ServiceTimeout = getBits(b[9], 0, 5)
	copy(m.PrivateData[:], b[10:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *MRA) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	binary.BigEndian.PutUint32(b[4:], m.RemoteCommID)
	b[8] = putBits(0, 0, 2, m.MessageMRAed)
	b[9] = putBits(0, 0, 5, m.ServiceTimeout)
	copy(b[10:], m.PrivateData[:])
}

// REJReason is the reason code of a REJ (IBA 12.6.7.2, table 108).
type REJReason uint16

// The REJ reasons of IBA table 108 (gorxe sends a few; dump names all).
const (
	RejNoQP                   REJReason = 1
	RejNoEEC                  REJReason = 2
	RejNoResources            REJReason = 3
	RejTimeout                REJReason = 4
	RejUnsupportedReq         REJReason = 5
	RejInvalidCommID          REJReason = 6
	RejInvalidCommInstance    REJReason = 7
	RejInvalidServiceID       REJReason = 8
	RejInvalidTransportType   REJReason = 9
	RejStaleConn              REJReason = 10
	RejRDCNotExist            REJReason = 11
	RejInvalidGID             REJReason = 12
	RejInvalidLID             REJReason = 13
	RejInvalidSL              REJReason = 14
	RejInvalidTrafficClass    REJReason = 15
	RejInvalidHopLimit        REJReason = 16
	RejInvalidPacketRate      REJReason = 17
	RejInvalidAltGID          REJReason = 18
	RejInvalidAltLID          REJReason = 19
	RejInvalidAltSL           REJReason = 20
	RejInvalidAltTrafficClass REJReason = 21
	RejInvalidAltHopLimit     REJReason = 22
	RejInvalidAltPacketRate   REJReason = 23
	RejPortCMRedirect         REJReason = 24
	RejPortRedirect           REJReason = 25
	RejInvalidMTU             REJReason = 26
	RejInsufficientRespRes    REJReason = 27
	RejConsumerReject         REJReason = 28
	RejInvalidRNRRetry        REJReason = 29
	RejDuplicateLocalCommID   REJReason = 30
	RejInvalidClassVersion    REJReason = 31
	RejInvalidFlowLabel       REJReason = 32
	RejInvalidAltFlowLabel    REJReason = 33
	RejVendorOptionNotSupport REJReason = 35
)

var rejNames = map[REJReason]string{
	RejNoQP: "no QP", RejNoEEC: "no EEC", RejNoResources: "no resources", RejTimeout: "timeout",
	RejUnsupportedReq: "unsupported request", RejInvalidCommID: "invalid communication ID",
	RejInvalidCommInstance: "invalid communication instance", RejInvalidServiceID: "invalid service ID",
	RejInvalidTransportType: "invalid transport service type", RejStaleConn: "stale connection",
	RejRDCNotExist: "RDC does not exist", RejInvalidGID: "invalid GID", RejInvalidLID: "invalid LID",
	RejInvalidSL: "invalid SL", RejInvalidTrafficClass: "invalid traffic class",
	RejInvalidHopLimit: "invalid hop limit", RejInvalidPacketRate: "invalid packet rate",
	RejInvalidAltGID: "invalid alternate GID", RejInvalidAltLID: "invalid alternate LID",
	RejInvalidAltSL: "invalid alternate SL", RejInvalidAltTrafficClass: "invalid alternate traffic class",
	RejInvalidAltHopLimit: "invalid alternate hop limit", RejInvalidAltPacketRate: "invalid alternate packet rate",
	RejPortCMRedirect: "port and CM redirection", RejPortRedirect: "port redirection",
	RejInvalidMTU: "invalid path MTU", RejInsufficientRespRes: "insufficient responder resources",
	RejConsumerReject: "consumer reject", RejInvalidRNRRetry: "invalid RNR NAK retry count",
	RejDuplicateLocalCommID: "duplicate local communication ID", RejInvalidClassVersion: "invalid class version",
	RejInvalidFlowLabel: "invalid flow label", RejInvalidAltFlowLabel: "invalid alternate flow label",
	RejVendorOptionNotSupport: "vendor option not supported",
}

// String returns the reason's name as IBA table 108 words it.
func (r REJReason) String() string {
	if s, ok := rejNames[r]; ok {
		return s
	}
	return "reason 0x" + hex16(uint16(r))
}

// REJ is the Reject message (IBA 12.6.7, table 108).
type REJ struct {
	LocalCommID     uint32
	RemoteCommID    uint32
	MessageRejected uint8 // 2 bits: MsgREQ, MsgREP, MsgOther
	RejectedInfoLen uint8 // 7 bits: bytes of ARI that are valid
	Reason          REJReason
	ARI             [REJARISize]byte // additional rejection information
	PrivateData     [REJPrivateDataSize]byte
}

// Attr returns AttrREJ.
func (*REJ) Attr() CMAttr { return AttrREJ }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *REJ) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.RemoteCommID = binary.BigEndian.Uint32(b[4:])
	m.MessageRejected = getBits(b[8], 0, 2)
	m.RejectedInfoLen = getBits(b[9], 0, 7)
	m.Reason = REJReason(binary.BigEndian.Uint16(b[10:]))
	copy(m.ARI[:], b[12:84])
	copy(m.PrivateData[:], b[84:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *REJ) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	binary.BigEndian.PutUint32(b[4:], m.RemoteCommID)
	b[8] = putBits(0, 0, 2, m.MessageRejected)
	b[9] = putBits(0, 0, 7, m.RejectedInfoLen)
	binary.BigEndian.PutUint16(b[10:], uint16(m.Reason))
	copy(b[12:], m.ARI[:])
	copy(b[84:], m.PrivateData[:])
}

// REP is the Reply to Request for Communication (IBA 12.6.8, table 110).
type REP struct {
	LocalCommID         uint32
	RemoteCommID        uint32
	LocalQKey           uint32
	LocalQPN            uint32 // 24 bits
	LocalEECN           uint32 // 24 bits
	StartingPSN         uint32 // 24 bits
	VendorID            uint32 // 24 bits, spread over three bytes
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
	PrivateData         [REPPrivateDataSize]byte
}

// Attr returns AttrREP.
func (*REP) Attr() CMAttr { return AttrREP }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *REP) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.RemoteCommID = binary.BigEndian.Uint32(b[4:])
	m.LocalQKey = binary.BigEndian.Uint32(b[8:])
	m.LocalQPN = get24(b[12:])
	m.LocalEECN = get24(b[16:])
	m.StartingPSN = get24(b[20:])
	m.VendorID = uint32(b[15])<<16 | uint32(b[19])<<8 | uint32(b[23])
	m.ResponderResources = b[24]
	m.InitiatorDepth = b[25]
	m.TargetACKDelay = getBits(b[26], 0, 5)
	m.FailoverAccepted = getBits(b[26], 5, 2)
	m.EndToEndFlowControl = getBits(b[26], 7, 1) != 0
	m.RNRRetryCount = getBits(b[27], 0, 3)
	m.SRQ = getBits(b[27], 3, 1) != 0
	m.LocalCAGUID = binary.BigEndian.Uint64(b[28:])
	copy(m.PrivateData[:], b[36:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *REP) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	binary.BigEndian.PutUint32(b[4:], m.RemoteCommID)
	binary.BigEndian.PutUint32(b[8:], m.LocalQKey)
	put24(b[12:], m.LocalQPN)
	put24(b[16:], m.LocalEECN)
	put24(b[20:], m.StartingPSN)
	b[15], b[19], b[23] = byte(m.VendorID>>16), byte(m.VendorID>>8), byte(m.VendorID)
	b[24], b[25] = m.ResponderResources, m.InitiatorDepth
	b[26] = putBits(putBits(putBits(0, 0, 5, m.TargetACKDelay), 5, 2, m.FailoverAccepted), 7, 1, bit(m.EndToEndFlowControl))
	b[27] = putBits(putBits(0, 0, 3, m.RNRRetryCount), 3, 1, bit(m.SRQ))
	binary.BigEndian.PutUint64(b[28:], m.LocalCAGUID)
	copy(b[36:], m.PrivateData[:])
}

// RTU is the Ready To Use message (IBA 12.6.9, table 111).
type RTU struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [RTUPrivateDataSize]byte
}

// Attr returns AttrRTU.
func (*RTU) Attr() CMAttr { return AttrRTU }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *RTU) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.RemoteCommID = binary.BigEndian.Uint32(b[4:])
	copy(m.PrivateData[:], b[8:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *RTU) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	binary.BigEndian.PutUint32(b[4:], m.RemoteCommID)
	copy(b[8:], m.PrivateData[:])
}

// DREQ is the Disconnection Request (IBA 12.6.10, table 112).
type DREQ struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32 // 24 bits: the receiver's QPN (or EECN)
	PrivateData  [DREQPrivateDataSize]byte
}

// Attr returns AttrDREQ.
func (*DREQ) Attr() CMAttr { return AttrDREQ }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *DREQ) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.LocalCommID = binary.BigEndian.Uint32(b)
	m.RemoteCommID = binary.BigEndian.Uint32(b[4:])
	m.RemoteQPN = get24(b[8:])
	copy(m.PrivateData[:], b[12:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *DREQ) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.LocalCommID)
	binary.BigEndian.PutUint32(b[4:], m.RemoteCommID)
	put24(b[8:], m.RemoteQPN)
	copy(b[12:], m.PrivateData[:])
}

// DREP is the Disconnection Reply (IBA 12.6.11, table 113).
type DREP struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [DREPPrivateDataSize]byte
}

// Attr returns AttrDREP.
func (*DREP) Attr() CMAttr { return AttrDREP }

// Decode fills m from a CM message area of at least CMDataSize bytes. A
// DREP is laid out as an RTU (IBA tables 111 and 113).
func (m *DREP) Decode(b []byte) error { return (*RTU)(m).Decode(b) }

// Encode writes m into b[:CMDataSize], laid out as an RTU.
func (m *DREP) Encode(b []byte) { (*RTU)(m).Encode(b) }

// SIDRREQ is the Service ID Resolution Request (IBA 12.11.1, table 119).
type SIDRREQ struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData [SIDRREQPrivateDataSize]byte
}

// Attr returns AttrSIDRREQ.
func (*SIDRREQ) Attr() CMAttr { return AttrSIDRREQ }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *SIDRREQ) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.RequestID = binary.BigEndian.Uint32(b)
	m.PKey = binary.BigEndian.Uint16(b[4:])
	m.ServiceID = binary.BigEndian.Uint64(b[8:])
	copy(m.PrivateData[:], b[16:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *SIDRREQ) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.RequestID)
	binary.BigEndian.PutUint16(b[4:], m.PKey)
	binary.BigEndian.PutUint64(b[8:], m.ServiceID)
	copy(b[16:], m.PrivateData[:])
}

// SIDR_REP status values (IBA 12.11.2, table 120).
const (
	SIDRValid           = 0
	SIDRServiceIDNotSup = 1
	SIDRRejected        = 2
	SIDRNoQP            = 3
	SIDRRedirect        = 4
	SIDRUnsupportedVer  = 5
)

// SIDRREP is the Service ID Resolution Response (IBA 12.11.2, table 120).
type SIDRREP struct {
	RequestID   uint32
	Status      uint8
	AddInfoLen  uint8
	VendorID    uint32 // 24 bits, spread over three bytes
	QPN         uint32 // 24 bits
	ServiceID   uint64
	QKey        uint32
	AddInfo     [SIDRREPAddInfoSize]byte
	PrivateData [SIDRREPPrivateDataSize]byte
}

// Attr returns AttrSIDRREP.
func (*SIDRREP) Attr() CMAttr { return AttrSIDRREP }

// Decode fills m from a CM message area of at least CMDataSize bytes.
func (m *SIDRREP) Decode(b []byte) error {
	if len(b) < CMDataSize {
		return ErrMADTruncated
	}
	m.RequestID = binary.BigEndian.Uint32(b)
	m.Status = b[4]
	m.AddInfoLen = b[5]
	m.VendorID = uint32(binary.BigEndian.Uint16(b[6:]))<<8 | uint32(b[11])
	m.QPN = get24(b[8:])
	m.ServiceID = binary.BigEndian.Uint64(b[12:])
	m.QKey = binary.BigEndian.Uint32(b[20:])
	copy(m.AddInfo[:], b[24:96])
	copy(m.PrivateData[:], b[96:CMDataSize])
	return nil
}

// Encode writes m into b[:CMDataSize].
func (m *SIDRREP) Encode(b []byte) {
	b = b[:CMDataSize]
	clearBytes(b)
	binary.BigEndian.PutUint32(b, m.RequestID)
	b[4], b[5] = m.Status, m.AddInfoLen
	binary.BigEndian.PutUint16(b[6:], uint16(m.VendorID>>8))
	put24(b[8:], m.QPN)
	b[11] = byte(m.VendorID)
	binary.BigEndian.PutUint64(b[12:], m.ServiceID)
	binary.BigEndian.PutUint32(b[20:], m.QKey)
	copy(b[24:], m.AddInfo[:])
	copy(b[96:], m.PrivateData[:])
}

// CMTimeout returns the duration, in nanoseconds, that a 5-bit CM timeout
// exponent t stands for: 4.096 µs · 2^t (IBA 12.6.5, the CM response
// timeouts; 12.6.6, the MRA service timeout).
func CMTimeout(t uint8) int64 { return 4096 << (t & 31) }

// ErrCMAttr: the attribute is not one of the CM messages this package
// decodes (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP).
var ErrCMAttr = errors.New("packet: CM attribute not decoded")

// DecodeCMMessage decodes the CM message area msg of a MAD with attribute a
// into a newly allocated message. It is for tools and tests; code on a hot
// path decodes into a message value it owns with that type's Decode.
func DecodeCMMessage(msg []byte, a CMAttr) (CMMessage, error) {
	var m interface {
		CMMessage
		Decode([]byte) error
	}
	switch a {
	case AttrREQ:
		m = new(REQ)
	case AttrMRA:
		m = new(MRA)
	case AttrREJ:
		m = new(REJ)
	case AttrREP:
		m = new(REP)
	case AttrRTU:
		m = new(RTU)
	case AttrDREQ:
		m = new(DREQ)
	case AttrDREP:
		m = new(DREP)
	case AttrSIDRREQ:
		m = new(SIDRREQ)
	case AttrSIDRREP:
		m = new(SIDRREP)
	default:
		return nil, ErrCMAttr
	}
	if err := m.Decode(msg); err != nil {
		return nil, err
	}
	return m, nil
}
