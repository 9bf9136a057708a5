package packet

// PSN is a 24-bit packet sequence number (IBA 9.7.1). PSNs wrap at 2^24 and
// compare by serial-number arithmetic: a is after b when the signed 24-bit
// difference a-b is positive, the rule of rxe's psn_compare(). Stored values
// are always masked with PSNMask.
type PSN uint32

// PSNMask masks a 24-bit PSN.
const PSNMask = 0xFFFFFF

// PSNWindow is half the PSN space: PSNs up to PSNWindow-1 behind the expected
// one are duplicates, anything ahead is out of sequence (IBA 9.7.5.1.1).
const PSNWindow = 1 << 23

// Add returns p+n modulo 2^24; n may be negative.
func (p PSN) Add(n int) PSN { return PSN(uint32(int64(p)+int64(n)) & PSNMask) }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & PSNMask }

// Diff returns the signed serial distance p-q in [-2^23, 2^23): positive
// when p is after q.
func (p PSN) Diff(q PSN) int32 { return int32((uint32(p)-uint32(q))<<8) >> 8 }

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p PSN) Compare(q PSN) int {
	switch d := p.Diff(q); {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// InRange reports whether p lies in [first, first+n) in serial order.
func (p PSN) InRange(first PSN, n int) bool {
	d := p.Diff(first)
	return d >= 0 && int(d) < n
}
