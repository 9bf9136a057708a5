package packet

import "strconv"

// Syndrome is the AETH syndrome byte (IBA 9.3.5, table 43): bit 7 reserved,
// bits 6..5 the type, bits 4..0 a credit count, an RNR timer code or a NAK
// code.
type Syndrome uint8

// SyndromeType is bits 6..5 of a Syndrome.
type SyndromeType uint8

// Syndrome types.
const (
	SyndromeTypeACK      SyndromeType = 0 // ACK, value = credit code
	SyndromeTypeRNR      SyndromeType = 1 // RNR NAK, value = RNR timer code
	SyndromeTypeReserved SyndromeType = 2
	SyndromeTypeNAK      SyndromeType = 3 // NAK, value = NAK code
)

// NAKCode is the value of a NAK syndrome (IBA 9.3.5 table 43).
type NAKCode uint8

// NAK codes.
const (
	NAKPSNSeqError      NAKCode = 0 // PSN sequence error
	NAKInvalidRequest   NAKCode = 1 // invalid request
	NAKRemoteAccess     NAKCode = 2 // remote access error
	NAKRemoteOperation  NAKCode = 3 // remote operational error
	NAKInvalidRDRequest NAKCode = 4 // invalid RD request

	// NAKSelectiveRepeat is a value IBA 9.3.5 table 43 reserves, which
	// gorxe uses for its selective-repeat hole report and sends only to a
	// peer that offered selective repeat in the connection setup
	// (docs/recovery.md, "Selective repeat"). In such an ACKNOWLEDGE packet
	// the BTH PSN is the first missing PSN of the hole and the AETH MSN
	// field holds the PSN just past it (the first PSN the responder holds
	// after the hole); it acknowledges nothing. A report whose two PSNs
	// are equal names no hole: it is a progress report, saying that the
	// responder has received PSNs up to the one before that PSN.
	NAKSelectiveRepeat NAKCode = 0x10
)

// String names the NAK code.
func (c NAKCode) String() string {
	switch c {
	case NAKPSNSeqError:
		return "PSN_SEQ_ERR"
	case NAKInvalidRequest:
		return "INVALID_REQ"
	case NAKRemoteAccess:
		return "REM_ACCESS_ERR"
	case NAKRemoteOperation:
		return "REM_OP_ERR"
	case NAKInvalidRDRequest:
		return "INVALID_RD_REQ"
	case NAKSelectiveRepeat:
		return "SR_HOLE"
	}
	return "NAK_RESERVED_" + strconv.Itoa(int(c))
}

// CreditInvalid is the ACK credit code meaning "no end-to-end flow control"
// (IBA 9.7.7.2.5): kernel rxe always sends it, and it is used with SRQs.
const CreditInvalid = 31

// Common syndromes.
const (
	// SyndromeACKUnlimited is an ACK with the invalid (unlimited) credit
	// code, as kernel rxe sends (AETH_ACK_UNLIMITED).
	SyndromeACKUnlimited Syndrome = CreditInvalid
)

// ACKSyndrome returns an ACK syndrome with the given credit code (0..31).
func ACKSyndrome(creditCode uint8) Syndrome { return Syndrome(creditCode & 0x1F) }

// RNRSyndrome returns an RNR NAK syndrome with the given timer code (0..31).
func RNRSyndrome(timerCode uint8) Syndrome { return Syndrome(0x20 | timerCode&0x1F) }

// NAKSyndrome returns a NAK syndrome with the given code.
func NAKSyndrome(c NAKCode) Syndrome { return Syndrome(0x60 | uint8(c)&0x1F) }

// Type returns the syndrome type.
func (s Syndrome) Type() SyndromeType { return SyndromeType(s>>5) & 3 }

// Value returns bits 4..0: credit code, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// IsACK reports whether s is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s.Type() == SyndromeTypeACK }

// IsRNR reports whether s is an RNR NAK.
func (s Syndrome) IsRNR() bool { return s.Type() == SyndromeTypeRNR }

// IsNAK reports whether s is a NAK (not an RNR NAK).
func (s Syndrome) IsNAK() bool { return s.Type() == SyndromeTypeNAK }

// NAKCode returns the NAK code of a NAK syndrome.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s.Value()) }

// String describes the syndrome, e.g. "ACK credits=16", "ACK unlimited",
// "RNR_NAK timer=12", "NAK REM_ACCESS_ERR".
func (s Syndrome) String() string {
	switch s.Type() {
	case SyndromeTypeACK:
		if s.Value() == CreditInvalid {
			return "ACK unlimited"
		}
		n, _ := Credits(s.Value())
		return "ACK credits=" + strconv.Itoa(n)
	case SyndromeTypeRNR:
		return "RNR_NAK timer=" + strconv.Itoa(int(s.Value()))
	case SyndromeTypeNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "RESERVED_0x" + strconv.FormatUint(uint64(s)|0x100, 16)[1:]
}

// creditTable maps an ACK credit code to a number of receive WQEs
// (IBA 9.7.7.2.5 table 46).
var creditTable = [32]uint16{
	0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 0,
}

// Credits returns the number of credits a credit code stands for; unlimited
// is true for CreditInvalid.
func Credits(code uint8) (n int, unlimited bool) {
	code &= 0x1F
	if code == CreditInvalid {
		return 0, true
	}
	return int(creditTable[code]), false
}

// CreditCode returns the largest credit code whose credit count does not
// exceed n (never CreditInvalid), so a responder never over-advertises.
func CreditCode(n int) uint8 {
	lo, hi := 0, CreditInvalid-1
	for lo < hi { // largest code with creditTable[code] <= n
		mid := (lo + hi + 1) / 2
		if int(creditTable[mid]) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return uint8(lo)
}
