package packet

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// wrapLink puts the IP packet ip in a frame of link type lt; et is the
// EtherType (or SLL protocol) to claim.
func wrapLink(lt LinkType, et uint16, ip []byte) []byte {
	be := func(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
	var hdr []byte
	switch lt {
	case LinkEthernet:
		hdr = append(make([]byte, 12), be(et)...)
	case LinkSLL:
		hdr = append(make([]byte, 14), be(et)...)
	case LinkSLL2:
		hdr = append(be(et), make([]byte, 18)...)
	case LinkNull:
		hdr = []byte{2, 0, 0, 0}
	case LinkLoop:
		hdr = []byte{0, 0, 0, 10}
	}
	return append(hdr, ip...)
}

func TestIPFromLink(t *testing.T) {
	ip := loadVectors(t)[0].ip
	be := func(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	macs := make([]byte, 12)
	tests := []struct {
		name  string
		lt    LinkType
		frame []byte
		err   error
	}{
		{"Ethernet IPv4", LinkEthernet, wrapLink(LinkEthernet, 0x0800, ip), nil},
		{"Ethernet IPv6 type", LinkEthernet, wrapLink(LinkEthernet, 0x86DD, ip), nil},
		{"802.1Q", LinkEthernet, cat(macs, be(0x8100), be(7), be(0x0800), ip), nil},
		{"QinQ 802.1ad", LinkEthernet, cat(macs, be(0x88A8), be(3), be(0x8100), be(7), be(0x0800), ip), nil},
		{"QinQ 0x9100", LinkEthernet, cat(macs, be(0x9100), be(3), be(0x0800), ip), nil},
		{"QinQ 0x9200", LinkEthernet, cat(macs, be(0x9200), be(3), be(0x86DD), ip), nil},
		{"VLAN tag cut", LinkEthernet, cat(macs, be(0x8100), []byte{0}), ErrNotIP},
		{"ARP", LinkEthernet, wrapLink(LinkEthernet, 0x0806, ip), ErrNotIP},
		{"802.3 length", LinkEthernet, cat(macs, be(100), ip), ErrNotIP},
		{"short Ethernet", LinkEthernet, macs, ErrNotIP},
		{"SLL IPv4", LinkSLL, wrapLink(LinkSLL, 0x0800, ip), nil},
		{"SLL ARP", LinkSLL, wrapLink(LinkSLL, 0x0806, ip), ErrNotIP},
		{"SLL VLAN", LinkSLL, cat(make([]byte, 14), be(0x8100), be(1), be(0x0800), ip), nil},
		{"short SLL", LinkSLL, make([]byte, 15), ErrNotIP},
		{"SLL2 IPv6 type", LinkSLL2, wrapLink(LinkSLL2, 0x86DD, ip), nil},
		{"SLL2 802.2", LinkSLL2, wrapLink(LinkSLL2, 0x0004, ip), ErrNotIP},
		{"short SLL2", LinkSLL2, make([]byte, 19), ErrNotIP},
		{"null AF_INET little-endian host", LinkNull, wrapLink(LinkNull, 0, ip), nil},
		{"null AF_INET big-endian host", LinkNull, cat([]byte{0, 0, 0, 2}, ip), nil},
		{"loop AF_INET6 Linux", LinkLoop, wrapLink(LinkLoop, 0, ip), nil},
		{"null AF_INET6 Darwin", LinkNull, cat([]byte{30, 0, 0, 0}, ip), nil},
		{"null AF_INET6 NetBSD", LinkNull, cat([]byte{24, 0, 0, 0}, ip), nil},
		{"null AF_INET6 FreeBSD", LinkNull, cat([]byte{28, 0, 0, 0}, ip), nil},
		{"null AF_INET6 Windows", LinkNull, cat([]byte{23, 0, 0, 0}, ip), nil},
		{"null unknown family", LinkNull, cat([]byte{0, 0, 0, 99}, ip), ErrNotIP},
		{"short null", LinkNull, []byte{2, 0}, ErrNotIP},
		{"raw", LinkRaw, ip, nil},
		{"DLT 12", LinkRawDLT12, ip, nil},
		{"DLT 14", LinkRawDLT14, ip, nil},
		{"IPv4 link type", LinkIPv4, ip, nil},
		{"IPv6 link type", LinkIPv6, ip, nil},
		{"empty raw", LinkRaw, nil, ErrNotIP},
		{"USB", LinkType(220), ip, ErrLinkType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IPFromLink(tc.frame, tc.lt)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, ip, got)
			require.Equal(t, tc.err == nil, tc.lt.Supported())
			d, err := ParseFrame(tc.frame, tc.lt)
			require.NoError(t, err)
			want, err := ParseIP(ip)
			require.NoError(t, err)
			require.Equal(t, want.Pseudo, d.Pseudo)
		})
	}
	require.False(t, LinkType(220).Supported())
	require.Equal(t, "link type 220", LinkType(220).String())
	require.Equal(t, "LINUX_SLL2", LinkSLL2.String())
	require.Equal(t, "RAW", LinkRawDLT14.String())
	_, err := ParseFrame(wrapLink(LinkEthernet, 0x0806, ip), LinkEthernet)
	require.ErrorIs(t, err, ErrNotIP)
}

func TestPeekUDP(t *testing.T) {
	for _, v := range loadVectors(t) {
		d, err := ParseIP(v.ip)
		require.NoError(t, err, v.name)
		src, dst, frag, ok := PeekUDP(v.ip)
		require.True(t, ok, v.name)
		require.Equal(t, d.Pseudo.SrcPort, src.Port())
		require.Equal(t, d.Pseudo.Dst, dst.Addr())
		require.Equal(t, d.Pseudo.DstPort, dst.Port())
		require.False(t, frag)
		// Cut after the ports: ParseIP refuses, PeekUDP still reads them.
		cut := v.ip[:len(d.IPHeader)+4]
		_, err = ParseIP(cut)
		require.Error(t, err)
		_, dst, _, ok = PeekUDP(cut)
		require.True(t, ok)
		require.Equal(t, d.Pseudo.DstPort, dst.Port())
		_, _, _, ok = PeekUDP(cut[:len(cut)-1])
		require.False(t, ok, "a destination port cut in half")
		if v.ip[0]>>4 == 4 {
			first := append([]byte(nil), v.ip...)
			binary.BigEndian.PutUint16(first[6:], ipv4FlagMF)
			_, _, frag, ok = PeekUDP(first)
			require.True(t, ok && frag, "the first fragment")
			binary.BigEndian.PutUint16(first[6:], 100)
			_, _, _, ok = PeekUDP(first)
			require.False(t, ok, "a later fragment")
			binary.BigEndian.PutUint16(first[6:], 0)
			first[9] = 6
			_, _, _, ok = PeekUDP(first)
			require.False(t, ok, "TCP")
			_, _, _, ok = PeekUDP(v.ip[:0])
			require.False(t, ok, "nothing")
		}
		if v.ip[0]>>4 == 6 {
			// The same datagram behind extension headers: ParseIP
			// refuses it, PeekUDP walks to the UDP header.
			ext := func(hdrs ...[]byte) []byte {
				b := append([]byte(nil), v.ip[:IPv6HeaderSize]...)
				next := byte(17)
				for i := len(hdrs) - 1; i >= 0; i-- {
					h := append([]byte(nil), hdrs[i]...)
					h[0], next = next, hdrs[i][0]
					hdrs[i] = h
				}
				b[6] = next
				n := 0
				for _, h := range hdrs {
					b = append(b, h...)
					n += len(h)
				}
				binary.BigEndian.PutUint16(b[4:], binary.BigEndian.Uint16(b[4:])+uint16(n))
				return append(b, v.ip[IPv6HeaderSize:]...)
			}
			hbh := []byte{0, 0, 1, 4, 0, 0, 0, 0}                            // Hop-by-Hop, PadN
			dst8 := []byte{60, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // Destination Options, 16 bytes
			firstFrag := []byte{44, 0, 0, 1, 0, 0, 0, 7}                     // offset 0, more fragments
			laterFrag := []byte{44, 0, 0, 0x10, 0, 0, 0, 7}                  // offset 2
			for _, tc := range []struct {
				name     string
				ip       []byte
				ok, frag bool
			}{
				{"hop-by-hop", ext(hbh), true, false},
				{"hop-by-hop and destination options", ext(hbh, dst8), true, false},
				{"first fragment", ext(firstFrag), true, true},
				{"later fragment", ext(laterFrag), false, false},
				{"cut in the extension header", ext(hbh)[:IPv6HeaderSize+4], false, false},
			} {
				_, err := ParseIP(tc.ip)
				require.Error(t, err, tc.name)
				_, dst, frag, ok := PeekUDP(tc.ip)
				require.Equal(t, tc.ok, ok, tc.name)
				require.Equal(t, tc.frag, frag, tc.name)
				if ok {
					require.Equal(t, d.Pseudo.DstPort, dst.Port(), tc.name)
				}
			}
		}
	}
}

// TestUDPChecksum: the checksum of a real capture's IPv4 datagram (frame
// 2 of the ConnectX-4 Lx capture) is the one on the wire, and so is its IPv4
// header checksum; a datagram with the computed checksum sums to 0xFFFF.
func TestUDPChecksum(t *testing.T) {
	raw, err := os.ReadFile("../testdata/captures/scapy_uts_cx4lx_cnp_and_uc_example.pcap")
	require.NoError(t, err)
	off := 24
	var frame []byte
	for range 2 {
		n := int(binary.LittleEndian.Uint32(raw[off+8:]))
		frame, off = raw[off+16:off+16+n], off+16+n
	}
	d, err := ParseFrame(frame, LinkEthernet)
	require.NoError(t, err)
	require.True(t, d.Pseudo.Is4())
	require.Equal(t, uint16(0xaca2), d.Checksum)
	require.Equal(t, d.Checksum, d.UDPChecksum())
	udp := frame[14+len(d.IPHeader) : 14+len(d.IPHeader)+UDPHeaderSize+len(d.Payload)]
	require.Equal(t, d.Checksum, UDPChecksum(d.IPHeader, udp))
	require.Equal(t, binary.BigEndian.Uint16(d.IPHeader[10:]), IPv4HeaderChecksum(d.IPHeader))

	for _, v := range loadVectors(t) {
		ip := append([]byte(nil), v.ip...)
		d, err := ParseIP(ip)
		require.NoError(t, err)
		c := d.UDPChecksum()
		require.NotZero(t, c)
		binary.BigEndian.PutUint16(d.UDPHeader[6:], c)
		require.Equal(t, uint16(0xFFFF), verifySum(&d), v.name)
		d.Payload[0] ^= 0x10
		require.NotEqual(t, uint16(0xFFFF), verifySum(&d), v.name)
	}
}

// verifySum is the one's complement sum of d's pseudo-header, UDP header
// (checksum included) and payload: 0xFFFF when the checksum is right.
func verifySum(d *IPDatagram) uint16 {
	var s uint32
	if d.Pseudo.Is4() {
		s = onesSum(s, d.IPHeader[12:20])
	} else {
		s = onesSum(s, d.IPHeader[8:40])
	}
	s += 17 + uint32(UDPHeaderSize+len(d.Payload))
	s = onesSum(s, d.UDPHeader)
	s = onesSum(s, d.Payload)
	return foldSum(s)
}

// FuzzParseFrame: any bytes of any link type. IPFromLink returns a tail
// of the frame; ParseFrame agrees with ParseIP on it; a datagram it
// accepts has its headers and payload inside the frame, and PeekUDP reads
// the same ports from it.
func FuzzParseFrame(f *testing.F) {
	lts := []LinkType{LinkEthernet, LinkSLL, LinkSLL2, LinkRaw, LinkNull, LinkLoop, LinkIPv4, LinkIPv6, 220}
	for _, v := range loadVectors(f) {
		for i, lt := range lts {
			f.Add(wrapLink(lt, 0x0800, v.ip), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte, sel uint8) {
		lt := lts[int(sel)%len(lts)]
		ip, err := IPFromLink(frame, lt)
		d, derr := ParseFrame(frame, lt)
		if err != nil {
			require.ErrorIs(t, derr, err)
			return
		}
		if len(ip) > 0 {
			require.Equal(t, unsafe.SliceData(frame[len(frame)-len(ip):]), unsafe.SliceData(ip), "a tail of the frame")
		}
		want, werr := ParseIP(ip)
		require.Equal(t, werr, derr)
		if derr != nil {
			return
		}
		require.Equal(t, want.Pseudo, d.Pseudo)
		require.LessOrEqual(t, len(d.IPHeader)+len(d.UDPHeader)+len(d.Payload), len(ip))
		src, dst, frag, ok := PeekUDP(ip)
		require.True(t, ok)
		require.False(t, frag)
		require.Equal(t, d.Pseudo.SrcPort, src.Port())
		require.Equal(t, d.Pseudo.DstPort, dst.Port())
		require.NotZero(t, d.UDPChecksum())
	})
}

// TestUDPChecksumZeroIsSentAsOnes: a computed UDP checksum of zero is
// sent as 0xFFFF, zero meaning "no checksum" (RFC 768; over IPv6, RFC 8200
// 8.1).
func TestUDPChecksumZeroIsSentAsOnes(t *testing.T) {
	for _, v := range loadVectors(t) {
		ip := append([]byte(nil), v.ip...)
		d, err := ParseIP(ip)
		require.NoError(t, err)
		// Two payload bytes at an even offset set to the checksum
		// computed with them zero bring the sum to 0xFFFF.
		d.Payload[0], d.Payload[1] = 0, 0
		c := d.UDPChecksum()
		binary.BigEndian.PutUint16(d.Payload, c)
		require.Equal(t, uint16(0xFFFF), d.UDPChecksum(), v.name)
		udp := ip[len(d.IPHeader) : len(d.IPHeader)+UDPHeaderSize+len(d.Payload)]
		require.Equal(t, uint16(0xFFFF), UDPChecksum(d.IPHeader, udp), v.name)
	}
}

// TestPeekUDPSkipsLaterFragments: a fragment at any non-zero offset holds
// no UDP header, whichever offset bits are set (IPv4: 13 bits of 8-byte
// units; IPv6 Fragment header: 13 bits above the M flag).
func TestPeekUDPSkipsLaterFragments(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.ip[0]>>4 == 4 {
			for _, off := range []uint16{1, 0x1000, 0x1FFF} {
				b := append([]byte(nil), v.ip...)
				binary.BigEndian.PutUint16(b[6:], off)
				_, _, _, ok := PeekUDP(b)
				require.False(t, ok, "offset %#x", off)
			}
			continue
		}
		for _, off := range []uint16{1, 0x1000, 0x1FFF} {
			b := append([]byte(nil), v.ip[:IPv6HeaderSize]...)
			b[6] = 44
			frag := []byte{17, 0, 0, 0, 0, 0, 0, 7}
			binary.BigEndian.PutUint16(frag[2:], off<<3|1)
			b = append(append(b, frag...), v.ip[IPv6HeaderSize:]...)
			binary.BigEndian.PutUint16(b[4:], binary.BigEndian.Uint16(b[4:])+8)
			_, _, _, ok := PeekUDP(b)
			require.False(t, ok, "offset %#x", off)
		}
	}
}

// TestPeekUDPIPv4HeaderLongerThanData: an IHL that points past the end of
// the data is not read.
func TestPeekUDPIPv4HeaderLongerThanData(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.ip[0]>>4 != 4 {
			continue
		}
		b := append([]byte(nil), v.ip[:IPv4HeaderSize+2]...)
		b[0] = 0x4F // 60-byte header
		_, _, _, ok := PeekUDP(b)
		require.False(t, ok)
	}
}

// TestUDPChecksumOddLength: a datagram of odd length is summed as if
// padded with one zero byte (RFC 768). The value was computed by hand.
func TestUDPChecksumOddLength(t *testing.T) {
	ip := make([]byte, IPv4HeaderSize)
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:], []byte{192, 0, 2, 1, 192, 0, 2, 2})
	udp := []byte{0x9C, 0x40, 0x12, 0xB7, 0, 11, 0, 0, 'a', 'b', 'c'} // 40000 → 4791
	require.Equal(t, uint16(0x087A), UDPChecksum(ip, udp))
}
