package oob

import (
	"encoding/hex"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyMsg(t *testing.T) {
	// The example of the protocol reference (§5.2).
	k := KeyMsg{OutReads: 0x10, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f1234567000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 0xc0, 13: 0xa8, 14: 1, 15: 7}}
	want := "0000:0010:000011:abcdef:00001234:00007f1234567000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:07:00000000:\x00"
	require.Equal(t, want, string(k.Marshal()))
	require.Len(t, k.Marshal(), KeyMsgSize)
	got, err := ParseKeyMsg([]byte(want))
	require.NoError(t, err)
	require.Equal(t, k, got)

	// A message real perftest sent (read_64KiB.txt), case-insensitive.
	b, _ := hex.DecodeString("303030303a303038303a3030303032633a3533383039613a30303030316462653a303030303766396539663066363030303a30303a30303a30303a30303a30303a30303a30303a30303a30303a30303a66663a66663a30613a34643a30303a30333a30303030303030303a00")
	got, err = ParseKeyMsg(b)
	require.NoError(t, err)
	require.Equal(t, KeyMsg{OutReads: 0x80, QPN: 0x2c, PSN: 0x53809a, RKey: 0x1dbe, VAddr: 0x7f9e9f0f6000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0x4d, 15: 3}}, got)
	require.Equal(t, b, got.Marshal())
	upper := []byte(want)
	copy(upper[17:23], "ABCDEF")
	got, err = ParseKeyMsg(upper)
	require.NoError(t, err)
	require.Equal(t, uint32(0xabcdef), got.PSN)

	for _, bad := range []string{
		want[:KeyMsgSize-1],              // short
		want + "\x00",                    // long: one byte more after the NUL
		want[:KeyMsgSize-1] + "x",        // no NUL
		"000:" + want[4:],                // a field too narrow
		"0000:0010:00001g" + want[16:],   // not hex
		want[:KeyMsgSize-2] + "\x00\x00", // last colon missing
		"0000:0010:000011:abcdef:00001234:00007f1234567000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:0700000000::\x00",
	} {
		_, err := ParseKeyMsg([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestVersionAndScalarMessages(t *testing.T) {
	b := VersionMsg(4791)
	require.Len(t, b, VersionMsgSize)
	require.Equal(t, "6.27\x00rxectl\x12\xb7\x00\x00\x00", string(b))
	v := ParseVersionMsg(b)
	require.Equal(t, PeerVersion{Text: "6.27", Value: 6.27, RxeCtl: true, UDPPort: 4791}, v)
	// perftest's version avoids negotiate_params (>= 6.28) and passes
	// check_version_compatibility (>= 5.70).
	require.GreaterOrEqual(t, v.Value, 5.70)
	require.Less(t, v.Value, 6.28)

	b = VersionMsgBuffer(4791, 425984, 2)
	require.Equal(t, "6.27\x00rxectl\x12\xb7\x00\x68\x02", string(b))
	require.Equal(t, PeerVersion{Text: "6.27", Value: 6.27, RxeCtl: true, UDPPort: 4791, Offer: Offer{RecvBuffer: 425984, RecvSockets: 2}}, ParseVersionMsg(b))
	huge := ParseVersionMsg(VersionMsgBuffer(1, 1<<40, 1000))
	require.Equal(t, 0xFFFF*4096, huge.RecvBuffer, "saturates")
	require.Equal(t, 127, huge.RecvSockets)
	require.False(t, huge.SelectiveRepeat, "a saturated socket count is no offer")

	// The selective-repeat offer is the top bit of the last byte.
	b = VersionMsgOffer(4791, Offer{RecvBuffer: 425984, RecvSockets: 1, SelectiveRepeat: true})
	require.Equal(t, "6.27\x00rxectl\x12\xb7\x00\x68\x81", string(b))
	require.Equal(t, Offer{RecvBuffer: 425984, RecvSockets: 1, SelectiveRepeat: true}, ParseVersionMsg(b).Offer)
	// An older rxectl's message (socket count 1, no offer bit) offers nothing.
	require.False(t, ParseVersionMsg([]byte("6.27\x00rxectl\x12\xb7\x00\x68\x01")).SelectiveRepeat)
	// A perftest message with bytes after its NUL that look like ours but
	// without the marker offers nothing either.
	require.Equal(t, Offer{}, ParseVersionMsg([]byte("6.06\x00rxectX\x12\xb7\x00\x68\x81")).Offer)

	perftest, _ := hex.DecodeString("362e3036000000000000000000000000")
	require.Equal(t, PeerVersion{Text: "6.06", Value: 6.06}, ParseVersionMsg(perftest))
	for s, want := range map[string]float64{"6.29": 6.29, "5.1x": 5.1, "": 0, "x": 0, " 6": 6, "7.": 7} {
		require.Equal(t, want, atof(s), "%q", s)
	}

	require.Equal(t, []byte("3\x00"), MTUMsg(3))
	require.Equal(t, 5, ParseMTUMsg([]byte("5\x00")))
	require.Equal(t, []byte{0, 0, 0x10, 0}, Int32Msg(4096))
	require.Equal(t, "0000000000010000", hex.EncodeToString(Uint64Msg(65536)))
	// perftest's hton_double: the report of read_64KiB.txt's client.
	require.Equal(t, "4030689d208caa9d", hex.EncodeToString(DoubleMsg(math.Float64frombits(0x4030689d208caa9d))))
	require.InDelta(t, 16.4086, math.Float64frombits(0x4030689d208caa9d), 1e-4) // MiB/s
}

// TestKeyMsgFieldWidths: the QPN and PSN are 24-bit fields (IBA 9.2), so
// the key message carries their low 24 bits in 6 hex digits and stays
// KeyMsgSize bytes whatever the upper bits of the Go values hold.
func TestKeyMsgFieldWidths(t *testing.T) {
	b := KeyMsg{QPN: 0xFF_abcdef, PSN: 0x01_123456}.Marshal()
	require.Len(t, b, KeyMsgSize)
	k, err := ParseKeyMsg(b)
	require.NoError(t, err)
	require.Equal(t, uint32(0xabcdef), k.QPN)
	require.Equal(t, uint32(0x123456), k.PSN)
}

// TestParseVersionMsgRxectlTail: after the NUL, the rxectl marker counts
// only when the 2-byte UDP port follows it, and the offer only when all
// three of its bytes do; a version string long enough to leave less room
// reads as a perftest peer, or an rxectl peer offering nothing, and never
// crashes the parser.
func TestParseVersionMsgRxectlTail(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want PeerVersion
	}{
		{"marker without port", "6.27abcd\x00rxectl\x12", PeerVersion{Text: "6.27abcd", Value: 6.27}},
		{"marker and port, no offer", "6.27abc\x00rxectl\x12\xb7", PeerVersion{Text: "6.27abc", Value: 6.27, RxeCtl: true, UDPPort: 4791}},
		{"two offer bytes", "6.270\x00rxectl\x12\xb7\x00\x68", PeerVersion{Text: "6.270", Value: 6.27, RxeCtl: true, UDPPort: 4791}},
		{"no NUL", "6.27000000000000", PeerVersion{Text: "6.27000000000000", Value: 6.27}},
		{"whole offer", "6.27\x00rxectl\x12\xb7\x00\x68\x81", PeerVersion{Text: "6.27", Value: 6.27, RxeCtl: true, UDPPort: 4791,
			Offer: Offer{RecvBuffer: 0x68 * 4096, RecvSockets: 1, SelectiveRepeat: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Len(t, tc.msg, VersionMsgSize)
			require.Equal(t, tc.want, ParseVersionMsg([]byte(tc.msg)))
		})
	}
}

// TestVersionMsgOfferBounds: the offer's fields saturate at the
// encoding's bounds on both sides: a negative receive buffer or socket
// count announces none (and a socket count never reaches the
// selective-repeat bit).
func TestVersionMsgOfferBounds(t *testing.T) {
	tests := []struct {
		name string
		in   Offer
		want Offer
	}{
		{"negative", Offer{RecvBuffer: -4096, RecvSockets: -1}, Offer{}},
		{"negative with offer", Offer{RecvBuffer: -1, RecvSockets: -128, SelectiveRepeat: true}, Offer{SelectiveRepeat: true}},
		{"beyond", Offer{RecvBuffer: 1 << 40, RecvSockets: 255}, Offer{RecvBuffer: 0xFFFF * 4096, RecvSockets: 127}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ParseVersionMsg(VersionMsgOffer(4791, tc.in)).Offer)
		})
	}
}
