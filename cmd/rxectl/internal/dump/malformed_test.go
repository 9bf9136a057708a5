package dump

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestMalformedDatagrams: a UDP datagram that does not parse is
// malformed RoCE only when it goes to a RoCEv2 port (else it is another
// protocol's, skipped); the reason of one captured whole says nothing
// of a capture cut; and the verbose lines of an IPv4 first fragment
// name its MF flag (RFC 791: flags are the top 3 bits, MF the third).
func TestMalformedDatagrams(t *testing.T) {
	ipv4 := func(edit func(ip []byte)) []byte {
		f := writeFirst(t, 8)
		ip := f[14 : 14+packet.IPv4HeaderSize]
		edit(f[14:])
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
		return f
	}
	longIP := func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+100) }
	tests := []struct {
		name    string
		frame   []byte
		kind    Kind
		err     error
		verbose string
	}{
		{"IP length beyond the frame", ipv4(longIP), KindMalformed, packet.ErrBadIPHeader, ""},
		{"IP length beyond the frame, port 53", ipv4(func(ip []byte) {
			longIP(ip)
			binary.BigEndian.PutUint16(ip[packet.IPv4HeaderSize+2:], 53)
		}), KindOther, nil, ""},
		{"first fragment", ipv4(func(ip []byte) { binary.BigEndian.PutUint16(ip[6:], 0x2000) }), KindMalformed, errFragment,
			" flags=MF frag=0 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := Frame{Num: 1, CapLen: len(tc.frame), OrigLen: len(tc.frame)}
			DecodeFrame(&f, tc.frame, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, tc.kind, f.Kind, "%v", f.Err)
			if tc.kind != KindMalformed {
				return
			}
			require.ErrorIs(t, f.Err, tc.err)
			require.NotContains(t, f.Err.Error(), "cut")
			text := string(AppendText(nil, &f, []byte("0"), true))
			require.Contains(t, text, " MALFORMED: ")
			if tc.verbose != "" {
				require.True(t, strings.Contains(text, tc.verbose), "%s", text)
			}
		})
	}
}

// TestVerboseIPv4Flags: -v names every IPv4 flag that is set (RFC 791:
// the reserved bit, DF, MF), the reserved one as RES.
func TestVerboseIPv4Flags(t *testing.T) {
	f := writeFirst(t, 8)
	ip := f[14 : 14+packet.IPv4HeaderSize]
	ip[6] |= 0x80 // the reserved bit, besides DF
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
	var fr Frame
	fr.Num, fr.CapLen, fr.OrigLen = 1, len(f), len(f)
	DecodeFrame(&fr, f, packet.LinkEthernet, Ports{packet.UDPPort})
	require.NotEqual(t, KindOther, fr.Kind)
	require.Contains(t, string(AppendText(nil, &fr, []byte("0"), true)), " flags=RES|DF frag=0 ")
}
