package packet

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestICRCVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			d, err := ParseIP(v.ip)
			require.NoError(t, err)
			require.Equal(t, uint16(UDPPort), d.Pseudo.DstPort)
			want := binary.LittleEndian.Uint32(d.Payload[len(d.Payload)-4:])

			// Over the header as captured.
			got, err := d.ICRC()
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.True(t, d.ICRCOK())

			// Over the synthesized pseudo-header.
			got, err = d.Pseudo.ICRC(d.Payload)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.NoError(t, d.Pseudo.CheckICRC(d.Payload))

			// Incremental form.
			crc := d.Pseudo.ICRCStart(d.Payload[:BTHSize], len(d.Payload))
			require.Equal(t, want, ICRCUpdate(crc, d.Payload[BTHSize:len(d.Payload)-4]))

			// The packet itself parses.
			p, err := Parse(d.Payload)
			require.NoError(t, err)
			require.Equal(t, want, p.ICRC())

			// Masked fields do not matter; everything else does.
			mut := append([]byte(nil), v.ip...)
			d2, _ := ParseIP(mut)
			if mut[0]>>4 == 4 {
				mut[1] ^= 0xFF  // TOS
				mut[8] ^= 0x0F  // TTL
				mut[10] ^= 0x12 // checksum
			} else {
				mut[1] ^= 0x5A // traffic class / flow label
				mut[7] ^= 0x01 // hop limit
			}
			d2.UDPHeader[6] ^= 0xAB // UDP checksum
			d2.Payload[4] ^= 0xC0   // FECN/BECN
			require.True(t, d2.ICRCOK(), "masked fields must not change the ICRC")
			d2.Payload[5] ^= 0x01 // DestQP
			require.False(t, d2.ICRCOK())
			require.ErrorIs(t, d2.Pseudo.CheckICRC(d2.Payload), ErrBadICRC)
		})
	}
}

// TestICRCMaskedBits flips every bit of the IP header, the UDP header and
// the BTH of an IPv4 and an IPv6 vector, one at a time, and requires the
// ICRC over the captured headers to change exactly for the bits IBA A17.4.4
// does not mask: IPv4 TOS, TTL and header checksum; IPv6 traffic class,
// flow label and hop limit (the version nibble is covered); the UDP
// checksum; the BTH's FECN, BECN and Resv6a byte.
func TestICRCMaskedBits(t *testing.T) {
	masked := map[int]map[int]byte{ // IP version -> byte offset from the IP header -> masked bits
		4: {1: 0xFF, 8: 0xFF, 10: 0xFF, 11: 0xFF, 20 + 6: 0xFF, 20 + 7: 0xFF, 28 + 4: 0xFF},
		6: {0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, 7: 0xFF, 40 + 6: 0xFF, 40 + 7: 0xFF, 48 + 4: 0xFF},
	}
	for _, v := range loadVectors(t) {
		if v.name != "uc_send_only_ipv4" && v.name != "uc_send_only_ipv6" {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			ip := append([]byte(nil), v.ip...)
			d, err := ParseIP(ip)
			require.NoError(t, err)
			want, err := d.ICRC()
			require.NoError(t, err)
			m := masked[int(ip[0]>>4)]
			hdrs := len(d.IPHeader) + UDPHeaderSize + BTHSize
			for off := range hdrs {
				for bit := range 8 {
					ip[off] ^= 1 << bit
					got, err := d.ICRC() // d's slices see the flip; nothing is re-parsed
					require.NoError(t, err)
					ip[off] ^= 1 << bit
					if m[off]&(1<<bit) != 0 {
						require.Equal(t, want, got, "byte %d bit %d is masked", off, bit)
					} else {
						require.NotEqual(t, want, got, "byte %d bit %d is covered", off, bit)
					}
				}
			}
		})
	}
}

func TestICRCCoversIPv4IDAndFlags(t *testing.T) {
	vs := loadVectors(t)
	d, err := ParseIP(vs[0].ip) // the ConnectX CNP: ID 0x718c, DF
	require.NoError(t, err)
	require.Equal(t, uint16(0x718c), d.Pseudo.IPID)
	require.Equal(t, uint16(IPv4FlagDF), d.Pseudo.IPFlags)
	ph := d.Pseudo
	ph.IPID = 0
	require.ErrorIs(t, ph.CheckICRC(d.Payload), ErrBadICRC)
	ph = d.Pseudo
	ph.IPFlags = 0
	require.ErrorIs(t, ph.CheckICRC(d.Payload), ErrBadICRC)
}

func TestPseudoHeaderErrors(t *testing.T) {
	pkt := make([]byte, 16)
	ph := PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("::1")}
	_, err := ph.ICRC(pkt)
	require.ErrorIs(t, err, ErrPseudoHeader)
	_, err = (&PseudoHeader{}).ICRC(pkt)
	require.ErrorIs(t, err, ErrPseudoHeader)
	ph.Dst = netip.MustParseAddr("10.0.0.2")
	_, err = ph.ICRC(pkt[:15])
	require.ErrorIs(t, err, ErrTruncated)
	// IPv4-mapped IPv6 addresses are IPv4.
	m := PseudoHeader{Src: netip.MustParseAddr("::ffff:10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}
	a, err := m.ICRC(pkt)
	require.NoError(t, err)
	b, err := ph.ICRC(pkt)
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.True(t, m.Is4())
}

func TestParseIPErrors(t *testing.T) {
	vs := loadVectors(t)
	v4 := vs[1].ip
	mapped := netip.MustParseAddr("::ffff:10.0.0.1").AsSlice()
	tests := []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrBadIPHeader},
		{"version 5", []byte{0x50}, ErrBadIPHeader},
		{"short v4", v4[:19], ErrBadIPHeader},
		{"total beyond data", v4[:40], ErrBadIPHeader},
		{"tcp", func() []byte { b := append([]byte(nil), v4...); b[9] = 6; return b }(), ErrNotUDP},
		{"fragment", func() []byte { b := append([]byte(nil), v4...); b[6] |= 0x20; return b }(), ErrNotUDP},
		// The last fragment of a datagram: MF clear, a non-zero offset.
		{"last fragment", func() []byte { b := append([]byte(nil), v4...); b[6], b[7] = b[6]&0x40, 1; return b }(), ErrNotUDP},
		{"icmp", func() []byte { b := append([]byte(nil), v4...); b[9] = 1; return b }(), ErrNotUDP},
		// RFC 791: the IHL counts 32-bit words and is at least 5; a
		// smaller one would put the UDP header inside the addresses. With
		// IHL 4 and a UDP source port of 8, the bytes from 16 on would
		// read as a UDP header of length 8.
		{"ihl 4", func() []byte { b := append([]byte(nil), v4...); b[0], b[20], b[21] = 0x44, 0, 8; return b }(), ErrBadIPHeader},
		{"ihl 0", func() []byte { b := append([]byte(nil), v4...); b[0] = 0x40; return b }(), ErrBadIPHeader},
		{"total below header length", func() []byte { b := append([]byte(nil), v4...); b[2], b[3] = 0, 19; return b }(), ErrBadIPHeader},
		{"v6 icmpv6", func() []byte { b := append([]byte(nil), vs[2].ip...); b[6] = 58; return b }(), ErrNotUDP},
		{"v6 fragment header", func() []byte { b := append([]byte(nil), vs[2].ip...); b[6] = 44; return b }(), ErrNotUDP},
		{"udp len short", func() []byte { b := append([]byte(nil), v4...); b[24], b[25] = 0, 4; return b }(), ErrBadIPHeader},
		// RFC 768: the UDP length counts the 8-byte header, so 7 is one
		// short of the least, as is 0 (over IPv4, not a jumbogram).
		{"udp len 7", func() []byte { b := append([]byte(nil), v4...); b[24], b[25] = 0, 7; return b }(), ErrBadIPHeader},
		{"udp len 0", func() []byte { b := append([]byte(nil), v4...); b[24], b[25] = 0, 0; return b }(), ErrBadIPHeader},
		{"v6 udp len 7", func() []byte { b := append([]byte(nil), vs[2].ip...); b[44], b[45] = 0, 7; return b }(), ErrBadIPHeader},
		{"short v6", vs[2].ip[:39], ErrBadIPHeader},
		// An IPv6 header with an IPv4-mapped address: its PseudoHeader
		// would be IPv4, and its ICRC not that of the IPv6 header.
		{"v6 from ::ffff:10.0.0.1", func() []byte { b := append([]byte(nil), vs[2].ip...); copy(b[8:24], mapped); return b }(), ErrBadIPHeader},
		{"v6 to ::ffff:10.0.0.1", func() []byte { b := append([]byte(nil), vs[2].ip...); copy(b[24:40], mapped); return b }(), ErrBadIPHeader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseIP(tc.b)
			require.ErrorIs(t, err, tc.err)
		})
	}
}

// TestCaptures checks every RoCEv2 packet of the real captures (hardware
// NICs and kernel rxe): it parses, and its ICRC is valid, over the captured
// header and over the synthesized pseudo-header (which carries the IPv4 ID
// that kernel rxe sets non-zero).
func TestCaptures(t *testing.T) {
	tests := []struct {
		file  string
		roce  int
		count map[Opcode]int
	}{
		{"huawei_hiroce_oferby_proxy.pcap", 105, map[Opcode]int{
			RCAcknowledge: 37, RCSendFirst: 33, RCSendLastWithImmediate: 33, RCSendOnlyWithImmediate: 2}},
		{"scapy_uts_cx4lx_cnp_and_uc_example.pcap", 2, map[Opcode]int{CNP: 1, UCSendOnly: 1}},
		{"kernel-rxe_rdmacm_send_4KiB.pcap", 154, map[Opcode]int{
			RCSendFirst: 20, RCSendMiddle: 40, RCSendLast: 20, RCSendOnly: 22, RCAcknowledge: 42, UDSendOnly: 10}},
		{"kernel-rxe_ud_send_512B.pcap", 20, map[Opcode]int{UDSendOnly: 20}},
		{"kernel-rxe_uc_write_64KiB.pcap", 640, map[Opcode]int{UCRDMAWriteFirst: 10, UCRDMAWriteMiddle: 620, UCRDMAWriteLast: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			count := map[Opcode]int{}
			n := 0
			for i, f := range readPcap(t, "../testdata/captures/"+tc.file) {
				ip := etherIP(f)
				if ip == nil {
					continue
				}
				d, err := ParseIP(ip)
				if err != nil || d.Pseudo.DstPort != UDPPort {
					continue
				}
				n++
				p, err := Parse(d.Payload)
				require.NoError(t, err, "frame %d", i+1)
				count[p.Opcode()]++
				require.True(t, d.ICRCOK(), "frame %d", i+1)
				require.NoError(t, d.Pseudo.CheckICRC(d.Payload), "frame %d", i+1)
				if d.Pseudo.Is4() {
					// What a receiver that does not see the IPv4 ID does.
					id, ok := d.Pseudo.RecoverIPv4ID(d.Payload)
					require.True(t, ok, "frame %d", i+1)
					require.Equal(t, d.Pseudo.IPID, id, "frame %d", i+1)
				}
			}
			require.Equal(t, tc.roce, n)
			require.Equal(t, tc.count, count)
		})
	}
}

func TestICRCAllocs(t *testing.T) {
	d, err := ParseIP(loadVectors(t)[3].ip)
	require.NoError(t, err)
	ph := d.Pseudo
	allocs := testing.AllocsPerRun(100, func() {
		_ = ph.CheckICRC(d.Payload)
		_ = ph.SetICRC(d.Payload)
		_, _ = d.ICRC()
	})
	require.Zero(t, allocs)
}

func BenchmarkICRC4K(b *testing.B) {
	pkt := make([]byte, BTHSize+RETHSize+4096+ICRCSize)
	ph := PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 0xC000, DstPort: UDPPort, IPFlags: IPv4FlagDF}
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		_ = ph.SetICRC(pkt)
	}
}

func BenchmarkICRC4KIPv6(b *testing.B) {
	pkt := make([]byte, BTHSize+RETHSize+4096+ICRCSize)
	ph := PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"),
		SrcPort: 0xC000, DstPort: UDPPort}
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		_ = ph.SetICRC(pkt)
	}
}

func TestIPDatagramICRCHandBuilt(t *testing.T) {
	d := IPDatagram{Payload: make([]byte, 16)}
	_, err := d.ICRC()
	require.ErrorIs(t, err, ErrBadIPHeader)
	require.False(t, d.ICRCOK())
}

// refICRCStart is ICRCStart written out byte by byte from IBA A17.4.4 and
// run through the standard library: the masked IP header, UDP header and
// BTH after eight 0xFF bytes, as the running (finalised) CRC.
func refICRCStart(ph *PseudoHeader, bth []byte, n int) uint32 {
	b := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	src, dst := ph.Src.Unmap(), ph.Dst.Unmap()
	udpLen := uint16(UDPHeaderSize + n)
	if src.Is4() {
		b = append(b, 0x45, 0xFF)
		b = binary.BigEndian.AppendUint16(b, IPv4HeaderSize+udpLen)
		b = binary.BigEndian.AppendUint16(b, ph.IPID)
		b = binary.BigEndian.AppendUint16(b, ph.IPFlags)
		b = append(b, 0xFF, 17, 0xFF, 0xFF)
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
	} else {
		b = append(b, 0x6F, 0xFF, 0xFF, 0xFF)
		b = binary.BigEndian.AppendUint16(b, udpLen)
		b = append(b, 17, 0xFF)
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
	}
	b = binary.BigEndian.AppendUint16(b, ph.SrcPort)
	b = binary.BigEndian.AppendUint16(b, ph.DstPort)
	b = binary.BigEndian.AppendUint16(b, udpLen)
	b = append(b, 0xFF, 0xFF)
	b = append(b, bth[:BTHSize]...)
	b[len(b)-BTHSize+4] = 0xFF
	return crc32.ChecksumIEEE(b)
}

// FuzzICRCStart checks ICRCStart, which assembles the pseudo-header in
// words, against the byte-by-byte reference for any addresses of either
// family, ports, IPv4 ID and flags, packet length and BTH.
func FuzzICRCStart(f *testing.F) {
	f.Add(true, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, uint16(49152), uint16(4791), uint16(0), uint16(IPv4FlagDF), uint16(4112), make([]byte, BTHSize))
	f.Add(false, netip.MustParseAddr("fe80::1").AsSlice(), netip.MustParseAddr("fe80::2").AsSlice(), uint16(1), uint16(4791), uint16(7), uint16(0), uint16(60), []byte("0123456789ab"))
	f.Fuzz(func(t *testing.T, v4 bool, s, d []byte, sport, dport, id, flags, n uint16, bth []byte) {
		size := 16
		if v4 {
			size = 4
		}
		if len(s) < size || len(d) < size || len(bth) < BTHSize {
			t.Skip()
		}
		src, _ := netip.AddrFromSlice(s[:size])
		dst, _ := netip.AddrFromSlice(d[:size])
		ph := PseudoHeader{Src: src, Dst: dst, SrcPort: sport, DstPort: dport, IPID: id, IPFlags: flags}
		if !ph.Valid() {
			t.Skip() // mixed families (a v4-mapped address): ICRCStart's callers refuse them
		}
		require.Equal(t, refICRCStart(&ph, bth, int(n)), ph.ICRCStart(bth[:BTHSize], int(n)))
	})
}

// FuzzICRCPrefix drives one ICRCPrefix with a sequence of pseudo-headers
// (two IPv4 flows, one IPv6, IPv4 IDs and flags changing), lengths and
// BTHs drawn from the program, so that remembered registers are reused and
// replaced: every Start must equal the byte-by-byte reference, and ICRC
// and RecoverIPv4ID must answer as the uncached methods do.
func FuzzICRCPrefix(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 0, 0x80, 3, 0x41})
	f.Add([]byte{1, 1, 1, 1, 0, 0, 2, 2})
	phs := []PseudoHeader{
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49152, DstPort: UDPPort, IPFlags: IPv4FlagDF},
		{Src: netip.MustParseAddr("10.0.0.3"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49153, DstPort: UDPPort, IPFlags: IPv4FlagDF},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 49152, DstPort: UDPPort},
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		var c ICRCPrefix
		pkt := make([]byte, 300)
		for i, op := range prog {
			ph := phs[int(op&3)%len(phs)]
			if op&0x80 != 0 && ph.Is4() {
				ph.IPID = uint16(i) * 0x101
			}
			if op&0x40 != 0 && ph.Is4() {
				ph.IPFlags = 0
			}
			n := BTHSize + ICRCSize + int(op>>2&0xF)*16
			p := pkt[:n]
			for k := range p {
				p[k] = byte(i*7 + k*int(op) + 1)
			}
			// require only on failure: its t.Helper walks the stack,
			// which cost more than the CRCs of a step.
			if ref, start := refICRCStart(&ph, p, n), c.Start(&ph, p[:BTHSize], n); ref != start {
				require.Equal(t, ref, start, "op %d", i)
			}
			want, werr := ph.ICRC(p)
			got, gerr := c.ICRC(&ph, p)
			if werr != nil || gerr != nil || want != got {
				require.NoError(t, werr)
				require.NoError(t, gerr)
				require.Equal(t, want, got, "op %d", i)
			}
			binary.LittleEndian.PutUint32(p[n-ICRCSize:], want)
			wid, wok := ph.RecoverIPv4ID(p)
			gid, gok := c.RecoverIPv4ID(&ph, p)
			if wok != gok || wid != gid || gok != ph.Is4() || gok && gid != ph.IPID {
				require.Equal(t, wok, gok, "op %d", i)
				require.Equal(t, wid, gid, "op %d", i)
				require.Equal(t, ph.Is4(), gok, "the packet's own ICRC is recovered over IPv4")
				require.Equal(t, ph.IPID, gid, "op %d", i)
			}
		}
	})
}

// BenchmarkICRCStart starts the ICRC of one IPv4 and one IPv6 packet
// (same flow and length each time, as a stream's full-size packets are)
// from the pseudo-header alone and through an ICRCPrefix.
func BenchmarkICRCStart(b *testing.B) {
	bth := []byte{0x0B, 0, 0xFF, 0xFF, 0, 0, 0, 17, 0x80, 0, 0, 5}
	v6 := PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 49152, DstPort: UDPPort}
	for _, ph := range []PseudoHeader{testPH, v6} {
		fam := "v6"
		if ph.Is4() {
			fam = "v4"
		}
		var sink uint32
		b.Run(fam+"/PseudoHeader", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				bth[11] = byte(i)
				sink ^= ph.ICRCStart(bth, 4112)
			}
		})
		b.Run(fam+"/ICRCPrefix", func(b *testing.B) {
			var c ICRCPrefix
			for i := 0; b.Loop(); i++ {
				bth[11] = byte(i)
				sink ^= c.Start(&ph, bth, 4112)
			}
		})
		_ = sink
	}
}

// TestDatagramICRCRejectsLongIPHeader: an IPv4 header is at most 60 bytes
// (IHL is 4 bits of 32-bit words), so a longer IPHeader is malformed.
func TestDatagramICRCRejectsLongIPHeader(t *testing.T) {
	vs := loadVectors(t)
	d, err := ParseIP(vs[1].ip)
	require.NoError(t, err)
	d.IPHeader = append(append([]byte(nil), d.IPHeader...), make([]byte, 44)...)
	_, err = d.ICRC()
	require.ErrorIs(t, err, ErrBadIPHeader)
	require.False(t, d.ICRCOK())
}

// TestDatagramICRCTruncated: a UDP payload shorter than a BTH and an ICRC
// has no ICRC to compute.
func TestDatagramICRCTruncated(t *testing.T) {
	vs := loadVectors(t)
	for _, v := range vs {
		d, err := ParseIP(v.ip)
		require.NoError(t, err)
		for _, n := range []int{0, ICRCSize, BTHSize + ICRCSize - 1} {
			d.Payload = d.Payload[:n]
			_, err = d.ICRC()
			require.ErrorIs(t, err, ErrTruncated, "%s, %d bytes", v.name, n)
			require.False(t, d.ICRCOK())
		}
	}
}

// TestICRCPrefixFollowsPacketLength: the remembered register covers the
// IP and UDP length fields, so packets of different lengths under one
// pseudo-header each get their own ICRC.
func TestICRCPrefixFollowsPacketLength(t *testing.T) {
	for _, ph := range []PseudoHeader{
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49152, DstPort: UDPPort, IPFlags: IPv4FlagDF},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 49152, DstPort: UDPPort},
	} {
		var c ICRCPrefix
		pkt := make([]byte, 64)
		for i := range pkt {
			pkt[i] = byte(i)
		}
		for _, n := range []int{64, 32, 64, BTHSize + ICRCSize} {
			want, err := ph.ICRC(pkt[:n])
			require.NoError(t, err)
			got, err := c.ICRC(&ph, pkt[:n])
			require.NoError(t, err)
			require.Equal(t, want, got, "%s, %d bytes", ph.Src, n)
		}
	}
}

// TestParseIPLengthsBoundTheDatagram: bytes after the IP total length (or
// IPv6 payload length), such as Ethernet padding or a captured FCS, are
// not part of the datagram, and the UDP length may not reach into them;
// bytes inside the IP length but after the UDP length are not payload.
func TestParseIPLengthsBoundTheDatagram(t *testing.T) {
	for _, v := range loadVectors(t) {
		want, err := ParseIP(v.ip)
		require.NoError(t, err)
		v4 := v.ip[0]>>4 == 4
		lenOff, lenBias := 4, IPv6HeaderSize
		if v4 {
			lenOff, lenBias = 2, 0
		}
		udpOff := len(want.IPHeader)

		trailer := append(append([]byte(nil), v.ip...), 0xDE, 0xAD, 0xBE, 0xEF)
		d, err := ParseIP(trailer)
		require.NoError(t, err, v.name)
		require.Equal(t, want.Payload, d.Payload, v.name)
		require.True(t, d.ICRCOK(), v.name)

		long := append([]byte(nil), trailer...)
		ulen := binary.BigEndian.Uint16(long[udpOff+4:])
		binary.BigEndian.PutUint16(long[udpOff+4:], ulen+4)
		_, err = ParseIP(long)
		require.ErrorIs(t, err, ErrBadIPHeader, "%s: UDP length past the IP length", v.name)

		inside := append([]byte(nil), trailer...)
		binary.BigEndian.PutUint16(inside[lenOff:], uint16(len(inside)-lenBias))
		d, err = ParseIP(inside)
		require.NoError(t, err, v.name)
		require.Equal(t, want.Payload, d.Payload, "%s: bytes after the UDP length", v.name)
	}
}
