package report

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCFormats checks the helpers against what glibc's printf prints for
// the same format and value.
func TestCFormats(t *testing.T) {
	tests := []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"},      // printf("%#04x", 0): no 0x for zero
		{0x11, 4, "0x11"},   // printf("%#04x", 0x11)
		{0x11, 5, "0x011"},  // printf("%#05x", 0x11)
		{0x11, 6, "0x0011"}, // printf("%#06x", 0x11)
		{0x8d6a0b, 6, "0x8d6a0b"},
		{0x80, 4, "0x80"},
		{0x1234, 8, "0x001234"},
		{0x7f2e5f64b000, 16, "0x007f2e5f64b000"},
		{0x123456789, 4, "0x123456789"}, // wider than the field
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, CHexAlt(tc.v, tc.width))
	}
	require.Equal(t, "10934.23", CFloat(10934.234, 7, 2))
	require.Equal(t, "0.50   ", CFloat(0.5, 7, 2))
	require.Equal(t, "123.45 ", CFloat(123.45, 7, 2)) // printf("%-7.2f", 123.45)
	require.Equal(t, "123456 ", CUint(123456, 7))     // printf("%-7lu", 123456)
	require.Equal(t, "65536  ", CUint(65536, 7))
	require.Equal(t, "00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07",
		GIDString([16]byte{10: 255, 11: 255, 12: 192, 13: 168, 14: 1, 15: 7}))
	require.Equal(t, "00:00:00:00:00:00:00:00:00:00:255:255:10:09:100:99",
		GIDString([16]byte{10: 255, 11: 255, 12: 10, 13: 9, 14: 100, 15: 99}))
}

// TestCG checks CG against C's printf("%g") (the expected strings are
// what C's printf prints for each value).
func TestCG(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{1.5, "1.5"},
		{5, "5"},
		{0.5, "0.5"},
		{12.345678, "12.3457"},
		{2.0005, "2.0005"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{100000, "100000"},
		{999999.5, "1e+06"},
		{1234567, "1.23457e+06"},
	} {
		require.Equal(t, tc.want, CG(tc.v), "%v", tc.v)
	}
}
