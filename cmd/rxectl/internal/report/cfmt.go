package report

import (
	"strconv"
	"strings"
)

// perftest prints with C's printf, whose "#" flag differs from Go's: the
// field width includes the "0x" prefix, and a zero value gets no prefix
// at all (C11 7.21.6.1). These helpers reproduce it for the formats
// perftest's address lines use.

// CHexAlt formats v as C's "%#0<width>x".
func CHexAlt(v uint64, width int) string {
	if v == 0 {
		return strings.Repeat("0", max(width, 1))
	}
	h := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(h); pad > 0 {
		h = strings.Repeat("0", pad) + h
	}
	return "0x" + h
}

// CFloat formats v as C's "%-<width>.<prec>f".
func CFloat(v float64, width, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if pad := width - len(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// CG formats v as C's "%g": six significant digits, trailing zeros
// dropped, in exponent form ("1.5e-05", "1.23457e+06") when the exponent
// is below -4 or at least 6 (C11 7.21.6.1). strconv's 'g' with precision
// 6 follows the same rules.
func CG(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// CUint formats v as C's "%-<width>lu".
func CUint(v uint64, width int) string {
	s := strconv.FormatUint(v, 10)
	if pad := width - len(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// GIDString prints a GID as perftest does: each byte in decimal "%02d",
// separated by colons.
func GIDString(gid [16]byte) string {
	var b strings.Builder
	for i, x := range gid {
		if i > 0 {
			b.WriteByte(':')
		}
		if x < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(int(x)))
	}
	return b.String()
}
