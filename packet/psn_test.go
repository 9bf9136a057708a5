package packet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPSNArithmetic(t *testing.T) {
	tests := []struct {
		a, b PSN
		diff int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xFFFFFF, 1},          // wrap: 0 is after 0xFFFFFF
		{0xFFFFFF, 0, -1},         // and 0xFFFFFF before 0
		{5, 0xFFFFFA, 11},         // across the wrap
		{0x7FFFFF, 0, 0x7FFFFF},   // the furthest "after"
		{0x800000, 0, -0x800000},  // half the space: counts as before
		{0, 0x800001, 0x7FFFFF},   // still after
		{0x123456, 0x123457, -1},  //
		{0xFFFFF0, 0x00000F, -31}, //
		// Exactly 2^23 apart each PSN is before the other, as in rxe's
		// psn_compare; a window never reaches that far (PSNWindow-1).
		{0, 0x800000, -0x800000},
		{0xFFFFFF, 0x7FFFFF, -0x800000},
		{0x7FFFFF, 0xFFFFFF, -0x800000},
		{0x800001, 0x000001, -0x800000},
		{0x7FFFFF, 0xFFFFFE, -0x7FFFFF}, // one short of half, across the wrap
		{0xFFFFFE, 0x7FFFFF, 0x7FFFFF},
	}
	for _, tc := range tests {
		require.Equal(t, tc.diff, tc.a.Diff(tc.b), "%#x - %#x", uint32(tc.a), uint32(tc.b))
		require.Equal(t, tc.diff < 0, tc.a.Before(tc.b))
		require.Equal(t, tc.diff > 0, tc.a.After(tc.b))
		want := 0
		if tc.diff < 0 {
			want = -1
		} else if tc.diff > 0 {
			want = 1
		}
		require.Equal(t, want, tc.a.Compare(tc.b))
	}
	// Add and Diff undo each other over the whole signed range, from
	// PSNs at and around the wrap, and whole turns of 2^24 change nothing.
	for _, p := range []PSN{0, 1, 0x7FFFFF, 0x800000, 0xFFFFFE, 0xFFFFFF} {
		for _, n := range []int{-0x800000, -0x7FFFFF, -2, -1, 0, 1, 2, 0x7FFFFE, 0x7FFFFF} {
			q := p.Add(n)
			require.Equal(t, PSN(uint32(q)&PSNMask), q, "masked")
			require.Equal(t, int32(n), q.Diff(p), "%#x + %d", uint32(p), n)
			require.Equal(t, n > 0, q.After(p))
			require.Equal(t, n < 0, q.Before(p))
			require.Equal(t, q, p.Add(n+1<<24))
			require.Equal(t, q, p.Add(n-1<<24))
			require.Equal(t, n >= 0 && n < 5, q.InRange(p, 5))
		}
	}
	require.Equal(t, PSN(0), PSN(0xFFFFFF).Next())
	require.Equal(t, PSN(2), PSN(0xFFFFFF).Add(3))
	require.Equal(t, PSN(0xFFFFFE), PSN(1).Add(-3))
	require.Equal(t, PSN(0x000FFF), PSN(0xFFF000).Add(0x1FFF))
	require.True(t, PSN(1).InRange(0xFFFFFE, 4))
	require.False(t, PSN(2).InRange(0xFFFFFE, 4))
	require.False(t, PSN(0xFFFFFD).InRange(0xFFFFFE, 4))
}

func TestSyndrome(t *testing.T) {
	tests := []struct {
		s    Syndrome
		typ  SyndromeType
		val  uint8
		name string
	}{
		{ACKSyndrome(0), SyndromeTypeACK, 0, "ACK credits=0"},
		{ACKSyndrome(8), SyndromeTypeACK, 8, "ACK credits=16"},
		{SyndromeACKUnlimited, SyndromeTypeACK, 31, "ACK unlimited"},
		{RNRSyndrome(12), SyndromeTypeRNR, 12, "RNR_NAK timer=12"},
		{NAKSyndrome(NAKPSNSeqError), SyndromeTypeNAK, 0, "NAK PSN_SEQ_ERR"},
		{NAKSyndrome(NAKInvalidRequest), SyndromeTypeNAK, 1, "NAK INVALID_REQ"},
		{NAKSyndrome(NAKRemoteAccess), SyndromeTypeNAK, 2, "NAK REM_ACCESS_ERR"},
		{NAKSyndrome(NAKRemoteOperation), SyndromeTypeNAK, 3, "NAK REM_OP_ERR"},
		{NAKSyndrome(NAKInvalidRDRequest), SyndromeTypeNAK, 4, "NAK INVALID_RD_REQ"},
		{NAKSyndrome(9), SyndromeTypeNAK, 9, "NAK NAK_RESERVED_9"},
		{Syndrome(0x45), SyndromeTypeReserved, 5, "RESERVED_0x45"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.typ, tc.s.Type())
		require.Equal(t, tc.val, tc.s.Value())
		require.Equal(t, tc.name, tc.s.String())
		require.Equal(t, tc.typ == SyndromeTypeACK, tc.s.IsACK())
		require.Equal(t, tc.typ == SyndromeTypeRNR, tc.s.IsRNR())
		require.Equal(t, tc.typ == SyndromeTypeNAK, tc.s.IsNAK())
	}
	require.Equal(t, Syndrome(0x60), NAKSyndrome(NAKPSNSeqError))
	require.Equal(t, Syndrome(0x62), NAKSyndrome(NAKRemoteAccess))
	require.Equal(t, Syndrome(0x2C), RNRSyndrome(12))
	require.Equal(t, Syndrome(0x1F), SyndromeACKUnlimited)
}

func TestCredits(t *testing.T) {
	want := []int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768}
	for code, n := range want {
		got, unlimited := Credits(uint8(code))
		require.False(t, unlimited)
		require.Equal(t, n, got, "code %d", code)
		require.Equal(t, uint8(code), CreditCode(n), "n %d", n)
		if n > 0 {
			// One less than a table entry rounds down to the code below.
			require.Equal(t, uint8(code-1), CreditCode(n-1), "n %d", n-1)
		}
	}
	_, unlimited := Credits(CreditInvalid)
	require.True(t, unlimited)
	require.Equal(t, uint8(30), CreditCode(1<<30))
	require.Equal(t, uint8(0), CreditCode(-5))
}

// TestSyndromeIgnoresReservedBit7: bit 7 of the AETH syndrome is reserved
// (IBA 9.3.5); the type is bits 6..5 and the value bits 4..0, as
// Wireshark's packet-infiniband.c dissects them.
func TestSyndromeIgnoresReservedBit7(t *testing.T) {
	for _, s := range []Syndrome{ACKSyndrome(8), SyndromeACKUnlimited, RNRSyndrome(12), NAKSyndrome(NAKRemoteAccess), Syndrome(0x45)} {
		r := s | 0x80
		require.Equal(t, s.Type(), r.Type(), "%#x", uint8(r))
		require.Equal(t, s.Value(), r.Value(), "%#x", uint8(r))
		require.Equal(t, s.IsACK(), r.IsACK(), "%#x", uint8(r))
		require.Equal(t, s.IsRNR(), r.IsRNR(), "%#x", uint8(r))
		require.Equal(t, s.IsNAK(), r.IsNAK(), "%#x", uint8(r))
	}
}

// TestCreditsOfCodeIgnoresHighBits: a credit code is the 5 low bits of
// the syndrome (IBA 9.7.7.2.5); Credits reads only those.
func TestCreditsOfCodeIgnoresHighBits(t *testing.T) {
	for code := uint8(0); code < 32; code++ {
		n, unlimited := Credits(code)
		for _, high := range []uint8{0x20, 0x40, 0xE0} {
			m, u := Credits(high | code)
			require.Equal(t, n, m, "code %#x", high|code)
			require.Equal(t, unlimited, u, "code %#x", high|code)
		}
	}
}

// TestSyndromeConstructorsKeepTheType: the credit code, RNR timer code and
// NAK code are 5 bits (IBA 9.3.5 table 43); wider arguments do not change
// the syndrome type.
func TestSyndromeConstructorsKeepTheType(t *testing.T) {
	require.Equal(t, Syndrome(0x05), ACKSyndrome(0xE5))
	require.Equal(t, Syndrome(0x2C), RNRSyndrome(0xEC))
	require.Equal(t, Syndrome(0x62), NAKSyndrome(0xE2))
}
