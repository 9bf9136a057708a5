package oob

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseKeyMsg: a peer's key message never crashes the parser; it is
// refused exactly when it is not KeyMsgSize bytes of the exact layout
// (keyMsgLayout), with an error that says it is the key message and, for
// a wrong size, which size; and one it accepts is exactly the lowercase
// form of what Marshal makes of the parsed fields (the layout is fixed;
// perftest's strtol accepts any case).
func FuzzParseKeyMsg(f *testing.F) {
	good := KeyMsg{LID: 1, OutReads: 16, QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40, SRQN: 7}.Marshal()
	f.Add(good)
	f.Add([]byte(strings.ToUpper(string(KeyMsg{QPN: 0xabcdef, GID: [16]byte{10: 0xff, 11: 0xff}}.Marshal()))))
	// Refused: short, no NUL, a non-hex digit, a field one digit wide
	// and its neighbour one wider, a signed field.
	f.Add(good[:KeyMsgSize-1])
	f.Add(append(slices.Clone(good[:KeyMsgSize-1]), ':'))
	f.Add(append([]byte("000g"), good[4:]...))
	f.Add(append([]byte("0001:001:00"), good[11:]...))
	f.Add(append([]byte("+001"), good[4:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKeyMsg(b)
		if !keyMsgLayout(b) {
			require.Error(t, err, "%q", b)
			require.ErrorContains(t, err, "key message")
			if len(b) != KeyMsgSize {
				require.ErrorContains(t, err, fmt.Sprintf("of %d bytes, want %d", len(b), KeyMsgSize))
			}
			return
		}
		require.NoError(t, err, "%q", b)
		require.Equal(t, strings.ToLower(string(b)), string(k.Marshal()))
		require.LessOrEqual(t, k.QPN, uint32(0xFFFFFF))
		require.LessOrEqual(t, k.PSN, uint32(0xFFFFFF))
	})
}

// keyMsgLayout reports whether b is a key message in KEY_PRINT_FMT_GID's
// layout: each field of keyFieldWidths as that many hex digits of either
// case followed by a colon, then a NUL, KeyMsgSize bytes in all.
func keyMsgLayout(b []byte) bool {
	if len(b) != KeyMsgSize || b[KeyMsgSize-1] != 0 {
		return false
	}
	i := 0
	for _, w := range keyFieldWidths {
		for range w {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(b[i])) {
				return false
			}
			i++
		}
		if b[i] != ':' {
			return false
		}
		i++
	}
	return i == KeyMsgSize-1
}

// FuzzParseVersionMsg: a peer's version message never crashes the parser,
// what it reads of an rxectl peer's offer stays within the encoding's
// bounds, and an offer read back from the message we would send for it is
// the same offer.
func FuzzParseVersionMsg(f *testing.F) {
	f.Add(VersionMsg(4791))
	f.Add(VersionMsgOffer(4791, Offer{RecvBuffer: 212992, RecvSockets: 2, SelectiveRepeat: true}))
	f.Add([]byte("6.06\x00"))
	f.Add([]byte("5.5\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := ParseVersionMsg(b)
		require.NotContains(t, v.Text, "\x00")
		if !v.RxeCtl {
			require.Zero(t, v.Offer)
			return
		}
		require.Zero(t, v.RecvBuffer%recvBufUnit)
		require.LessOrEqual(t, v.RecvBuffer, 0xFFFF*recvBufUnit)
		require.LessOrEqual(t, v.RecvSockets, socketsMask)
		back := ParseVersionMsg(VersionMsgOffer(v.UDPPort, v.Offer))
		require.True(t, back.RxeCtl)
		require.Equal(t, v.UDPPort, back.UDPPort)
		require.Equal(t, v.Offer, back.Offer)
	})
}

// FuzzParseMTUMsg: a peer's MTU message never crashes the parser; any
// message of MTUMsgSize bytes (all a peer sends) reads as C's
// strtol(msg, NULL, 10) reads it; and the messages we send for the MTU
// enums read back as those enums.
func FuzzParseMTUMsg(f *testing.F) {
	for enum := range 10 {
		f.Add(MTUMsg(enum))
	}
	for _, s := range []string{"-1", "+7", " 4", "\t5", "12", "1.", ".5", "5x", "x5", "- ", "3\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := ParseMTUMsg(b)
		if len(b) == MTUMsgSize && b[0] >= '0' && b[0] <= '9' && b[1] == 0 {
			require.Equal(t, int(b[0]-'0'), got)
		}
		if len(b) <= MTUMsgSize {
			require.Equal(t, strtol10(b), got, "%q", b)
		}
	})
}

// strtol10 is C's strtol(s, NULL, 10) of the NUL-terminated string in s
// (or all of s), for strings too short to overflow: leading white space,
// a sign, then decimal digits.
func strtol10(s []byte) int {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	v := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		v = v*10 + int(s[i]-'0')
	}
	if neg {
		return -v
	}
	return v
}
