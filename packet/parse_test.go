package packet

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

var testPH = PseudoHeader{
	Src: netip.MustParseAddr("192.168.1.10"), Dst: netip.MustParseAddr("192.168.1.20"),
	SrcPort: 0xC123, DstPort: UDPPort, IPFlags: IPv4FlagDF,
}

type sample struct {
	name    string
	h       Headers
	payload []byte
}

// samples returns one packet of every known opcode, with distinctive field
// values and payload lengths covering every pad count.
func samples() []sample {
	var out []sample
	i := 0
	for op := 0; op < 256; op++ {
		o := Opcode(op)
		if !o.Valid() {
			continue
		}
		i++
		h := Headers{
			BTH: BTHFields{Opcode: o, SE: i%2 == 0, MigReq: i%3 == 0, PKey: 0xFFFF - uint16(i),
				FECN: i%5 == 0, BECN: i%7 == 0 || o == CNP, DestQP: 0xFFFFFF - uint32(i), AckReq: i%2 == 1,
				PSN: PSN(0xFFFFF0).Add(i)},
			RDETH:     0xABCDEF,
			DETH:      DETHFields{QKey: 0x80010000 + uint32(i), SrcQP: 0x123456},
			FETH:      0x11,
			RETH:      RETHFields{VA: 0x00007F0000001000 + uint64(i), RKey: 0x1234 + uint32(i), DMALen: 4096 * uint32(i)},
			AtomicETH: AtomicETHFields{VA: 0x7F00_0000_0008, RKey: 0xBEEF, SwapAdd: 0x0102030405060708, Compare: 0x1112131415161718},
			AETH:      AETHFields{Syndrome: Syndrome(i % 0x80), MSN: 0xFFFFFE},
			AtomicAck: 0xCAFEF00DDEADBEEF,
			Imm:       0xA1B2C3D4,
			IETH:      0x55667788,
		}
		var payload []byte
		switch {
		case o.Info().Is(MaskAtomicWrite):
			payload = []byte{1, 2, 3, 4, 5, 6, 7, 8}
		case o.Info().Is(MaskPayload):
			payload = make([]byte, 13+i%4) // pad counts 3, 2, 1, 0
			for j := range payload {
				payload[j] = byte(j*7 + i)
			}
		}
		out = append(out, sample{o.String(), h, payload})
	}
	return out
}

func TestBuildParseRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			buf := make([]byte, 512)
			n, err := Build(buf, &s.h, s.payload, &testPH)
			require.NoError(t, err)
			require.Equal(t, PacketLen(s.h.BTH.Opcode, len(s.payload)), n)
			pkt := buf[:n]
			require.Zero(t, n%4, "packets are a multiple of 4 bytes")

			p, err := Parse(pkt)
			require.NoError(t, err)
			require.Equal(t, s.h.BTH.Opcode, p.Opcode())
			require.Equal(t, s.payload, append([]byte(nil), p.Payload()...))
			require.Equal(t, len(s.payload), p.PayloadLen())
			require.Equal(t, PadLen(len(s.payload)), p.PadCnt())
			require.NoError(t, testPH.CheckICRC(pkt))

			got := p.Headers()
			want := s.h
			want.BTH.PadCnt = uint8(PadLen(len(s.payload)))
			info := p.Info()
			zeroAbsent(&want, info)
			require.Equal(t, want, got)

			// Accessors agree with the decoded fields.
			require.Equal(t, s.h.BTH.PSN, p.PSN())
			require.Equal(t, s.h.BTH.DestQP, p.DestQP())
			require.Equal(t, s.h.BTH.AckReq, p.AckReq())
			for h := Hdr(0); h < NumHdrs; h++ {
				require.Equal(t, info.Has(h), p.Header(h) != nil)
			}

			// Re-encoding what was parsed gives the same bytes.
			buf2 := make([]byte, 512)
			n2, err := Build(buf2, &got, p.Payload(), &testPH)
			require.NoError(t, err)
			require.Equal(t, pkt, buf2[:n2])
		})
	}
}

// zeroAbsent clears the fields of headers the opcode does not carry.
func zeroAbsent(h *Headers, info *OpInfo) {
	if !info.Has(HdrRDETH) {
		h.RDETH = 0
	}
	if !info.Has(HdrDETH) {
		h.DETH = DETHFields{}
	}
	if !info.Has(HdrFETH) {
		h.FETH = 0
	}
	if !info.Has(HdrRETH) {
		h.RETH = RETHFields{}
	}
	if !info.Has(HdrAtomicETH) {
		h.AtomicETH = AtomicETHFields{}
	}
	if !info.Has(HdrAETH) {
		h.AETH = AETHFields{}
	}
	if !info.Has(HdrAtomicAckETH) {
		h.AtomicAck = 0
	}
	if !info.Has(HdrImmDt) {
		h.Imm = 0
	}
	if !info.Has(HdrIETH) {
		h.IETH = 0
	}
}

// TestParseEveryPrefix cuts every sample short at every length: anything
// shorter than headers + pad + ICRC fails with ErrTruncated (or
// ErrBadPadding when the pad no longer fits); a payload-carrying packet cut
// inside its payload parses as a shorter payload; nothing panics.
func TestParseEveryPrefix(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			buf := make([]byte, 512)
			n, err := Build(buf, &s.h, s.payload, nil)
			require.NoError(t, err)
			info := s.h.BTH.Opcode.Info()
			pad := PadLen(len(s.payload))
			min := info.Length + pad + ICRCSize
			for i := 0; i < n; i++ {
				p, err := Parse(buf[:i])
				switch {
				case i < info.Length+ICRCSize:
					require.ErrorIs(t, err, ErrTruncated, "len %d", i)
				case i < min:
					require.ErrorIs(t, err, ErrBadPadding, "len %d", i)
				case !info.Is(MaskPayload):
					require.ErrorIs(t, err, ErrBadLength, "len %d", i)
				case info.Is(MaskAtomicWrite):
					require.ErrorIs(t, err, ErrBadLength, "len %d", i)
				default:
					require.NoError(t, err, "len %d", i)
					require.Equal(t, i-min, p.PayloadLen())
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	good := func(op Opcode, payload int) []byte {
		buf := make([]byte, 256)
		n, err := Build(buf, &Headers{BTH: BTHFields{Opcode: op, PKey: DefaultPKey}}, make([]byte, payload), nil)
		require.NoError(t, err)
		return buf[:n]
	}
	tests := []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrTruncated},
		{"bth only", good(RCSendOnly, 0)[:12], ErrTruncated},
		{"tver 1", func() []byte { b := good(RCSendOnly, 4); b[1] |= 1; return b }(), ErrBadTransportVersion},
		// TVer is the whole low nibble of BTH byte 1 (IBA 9.2.5).
		{"tver 8", func() []byte { b := good(RCSendOnly, 4); b[1] |= 8; return b }(), ErrBadTransportVersion},
		{"reserved opcode", func() []byte { b := good(RCSendOnly, 4); b[0] = 0x15; return b }(), ErrUnknownOpcode},
		{"xrc opcode", func() []byte { b := good(RCSendOnly, 4); b[0] = 0xA4; return b }(), ErrUnknownOpcode},
		{"pad beyond payload", func() []byte { b := good(RCSendOnly, 0); b[1] |= 0x30; return b }(), ErrBadPadding},
		{"pad on ack", func() []byte { b := good(RCAcknowledge, 0); b[1] |= 0x10; return b }(), ErrBadPadding},
		{"payload on ack", append(good(RCAcknowledge, 0), 0, 0, 0, 0), ErrBadLength},
		{"payload on read request", append(good(RCRDMAReadRequest, 0), 0, 0, 0, 0), ErrBadLength},
		{"atomic write of 4", good(RCAtomicWrite, 8)[:len(good(RCAtomicWrite, 8))-4], ErrBadLength},
		// The 8 bytes are the payload without the pad, as rxe's
		// payload_size: 7 bytes and a pad byte are 7.
		{"atomic write of 7 and a pad byte", func() []byte { b := good(RCAtomicWrite, 8); b[1] |= 0x10; return b }(), ErrBadLength},
		// A CNP is its 16 reserved bytes (IBA A17.9.2) and carries no payload.
		{"payload on cnp", append(good(CNP, 0), 0, 0, 0, 0), ErrBadLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b)
			require.ErrorIs(t, err, tc.err)
		})
	}
}

func TestBuildErrors(t *testing.T) {
	buf := make([]byte, 64)
	_, err := Build(buf, &Headers{BTH: BTHFields{Opcode: 0x15}}, nil, nil)
	require.ErrorIs(t, err, ErrUnknownOpcode)
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCAcknowledge}}, []byte{1}, nil)
	require.ErrorIs(t, err, ErrBadLength)
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCAtomicWrite}}, []byte{1}, nil)
	require.ErrorIs(t, err, ErrBadLength)
	// TVer is the whole low nibble (IBA 9.2.5): its high bit alone is
	// refused too.
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCSendOnly, TVer: 8}}, nil, nil)
	require.ErrorIs(t, err, ErrBadTransportVersion)
	// Parse drops TVer != 0, so Build, whose packets parse, refuses it.
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCSendOnly, TVer: 1}}, nil, nil)
	require.ErrorIs(t, err, ErrBadTransportVersion)
	_, err = Begin(buf, &Headers{BTH: BTHFields{Opcode: RCSendOnly, TVer: 15}}, 0, &testPH)
	require.ErrorIs(t, err, ErrBadTransportVersion)
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCSendOnly}}, make([]byte, 64), nil)
	require.ErrorIs(t, err, ErrBufferTooSmall)
	_, err = Build(buf, &Headers{BTH: BTHFields{Opcode: RCSendOnly}}, nil, &PseudoHeader{})
	require.ErrorIs(t, err, ErrPseudoHeader)
	_, err = (&Headers{BTH: BTHFields{Opcode: RCSendOnly}}).Encode(buf[:11])
	require.ErrorIs(t, err, ErrBufferTooSmall)
}

// TestGoldenRC checks the encoder against the RC vectors of the protocol
// reference §2.6, built from fields.
func TestGoldenRC(t *testing.T) {
	vs := map[string][]byte{}
	for _, v := range loadVectors(t) {
		vs[v.name] = v.ip
	}
	tests := []struct {
		vec     string
		h       Headers
		payload []byte
	}{
		{"rc_read_request", Headers{BTH: BTHFields{Opcode: RCRDMAReadRequest, PKey: 0xFFFF, DestQP: 0x12, AckReq: true, PSN: 0x123456},
			RETH: RETHFields{VA: 0x00007f0000001000, RKey: 0x1234, DMALen: 4096}}, nil},
		{"rc_ack", Headers{BTH: BTHFields{Opcode: RCAcknowledge, PKey: 0xFFFF, DestQP: 0x11, PSN: 0x123459},
			AETH: AETHFields{Syndrome: SyndromeACKUnlimited, MSN: 1}}, nil},
		{"rc_send_only", Headers{BTH: BTHFields{Opcode: RCSendOnly, PKey: 0xFFFF, DestQP: 0x12, AckReq: true, PSN: 1}}, []byte("hello")},
	}
	for _, tc := range tests {
		t.Run(tc.vec, func(t *testing.T) {
			d, err := ParseIP(vs[tc.vec])
			require.NoError(t, err)
			buf := make([]byte, 128)
			n, err := Build(buf, &tc.h, tc.payload, &d.Pseudo)
			require.NoError(t, err)
			require.Equal(t, d.Payload, buf[:n])
		})
	}
}

func TestHeaderViews(t *testing.T) {
	b := BTH(make([]byte, BTHSize))
	b.Encode(&BTHFields{Opcode: RCSendOnly, SE: true, MigReq: true, PadCnt: 3, PKey: 0x8001, FECN: true, BECN: true,
		DestQP: 0xABCDEF, AckReq: true, PSN: 0xFEDCBA})
	require.Equal(t, "04f08001c0abcdef80fedcba", fmt.Sprintf("%x", []byte(b)))
	b.SetPSN(0x000001)
	b.SetDestQP(0x000002)
	b.SetAckReq(false)
	b.SetPadCnt(1)
	b.SetFECN(false)
	b.SetBECN(false)
	require.Equal(t, "04d0800100000002"+"00000001", fmt.Sprintf("%x", []byte(b)))
	b.SetOpcode(RCAcknowledge)
	require.Equal(t, RCAcknowledge, b.Opcode())

	a := AtomicETH(make([]byte, AtomicETHSize))
	a.Encode(&AtomicETHFields{VA: 1, RKey: 2, SwapAdd: 3, Compare: 4})
	require.True(t, bytes.Equal(a, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4}),
		"swap/add comes before compare on the wire")

	f := FETH(make([]byte, 4))
	f.SetValue(0x13)
	require.Equal(t, uint8(1), f.SelectivityLevel())
	require.Equal(t, uint8(3), f.PlacementType())
}

func TestPacketAllocs(t *testing.T) {
	buf := make([]byte, 4096+64)
	payload := make([]byte, 4096)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteFirst, PKey: DefaultPKey, DestQP: 17, PSN: 5},
		RETH: RETHFields{VA: 1, RKey: 2, DMALen: 1 << 20}}
	allocs := testing.AllocsPerRun(100, func() {
		n, err := Build(buf, &h, payload, &testPH)
		if err != nil {
			panic(err)
		}
		p, err := Parse(buf[:n])
		if err != nil {
			panic(err)
		}
		_ = p.RETH().VA()
		_ = p.Headers()
		_, _ = h.Encode(buf)
	})
	require.Zero(t, allocs)
}

func BenchmarkParse(b *testing.B) {
	buf := make([]byte, 4096+64)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAReadResponseFirst, PKey: DefaultPKey, DestQP: 17, PSN: 5},
		AETH: AETHFields{Syndrome: SyndromeACKUnlimited, MSN: 3}}
	n, _ := Build(buf, &h, make([]byte, 4096), &testPH)
	pkt := buf[:n]
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse(pkt)
		if err != nil || p.AETH().MSN() != 3 {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild4K(b *testing.B) {
	buf := make([]byte, 4096+64)
	payload := make([]byte, 4096)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteMiddle, PKey: DefaultPKey, DestQP: 17, PSN: 5}}
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(buf, &h, payload, &testPH); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBTHEncodeReservedFieldsStayInTheirBits: Resv6a is the low 6 bits of
// BTH byte 4 and Resv7 the low 7 bits of byte 8 (IBA 9.2); wider values
// do not set FECN, BECN or AckReq.
func TestBTHEncodeReservedFieldsStayInTheirBits(t *testing.T) {
	b := make(BTH, BTHSize)
	b.Encode(&BTHFields{Opcode: RCSendOnly, PKey: DefaultPKey, DestQP: 0x123456, Resv6a: 0xFF, Resv7: 0xFF, PSN: 0xABCDEF})
	require.Equal(t, []byte{0x04, 0x00, 0xFF, 0xFF, 0x3F, 0x12, 0x34, 0x56, 0x7F, 0xAB, 0xCD, 0xEF}, []byte(b))
	require.False(t, b.FECN())
	require.False(t, b.BECN())
	require.False(t, b.AckReq())
}

// TestDETHAndRDETHEncodeKeepReservedBytesZero: the DETH source QP and the
// RDETH EE context are 24 bits after a reserved byte (IBA 9.3.2, 9.3.1);
// wider values leave that byte zero.
func TestDETHAndRDETHEncodeKeepReservedBytesZero(t *testing.T) {
	d := make(DETH, DETHSize)
	d.Encode(0x80010000, 0xFF000001)
	require.Equal(t, []byte{0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, []byte(d))
	r := make(RDETH, RDETHSize)
	r.SetEEC(0xFF123456)
	require.Equal(t, []byte{0x00, 0x12, 0x34, 0x56}, []byte(r))
}

// TestBTHSetDestQPAndSetPSNKeepTheirByteNeighbours: the destination QP
// shares its word with FECN, BECN and Resv6a, and the PSN with AckReq and
// Resv7 (IBA 9.2); setting one leaves the others as they were.
func TestBTHSetDestQPAndSetPSNKeepTheirByteNeighbours(t *testing.T) {
	b := make(BTH, BTHSize)
	b.Encode(&BTHFields{Opcode: RCSendOnly, PKey: DefaultPKey, FECN: true, BECN: true, Resv6a: 0x3F, AckReq: true, Resv7: 0x7F})
	b.SetDestQP(0xFF123456)
	b.SetPSN(0xFFABCDEF)
	require.Equal(t, []byte{0x04, 0x00, 0xFF, 0xFF, 0xFF, 0x12, 0x34, 0x56, 0xFF, 0xAB, 0xCD, 0xEF}, []byte(b))
	b.SetDestQP(0)
	b.SetPSN(0)
	require.Equal(t, []byte{0x04, 0x00, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x00}, []byte(b))
}

// TestBuildBufferOneByteShort: Build needs room for the whole packet,
// ICRC included.
func TestBuildBufferOneByteShort(t *testing.T) {
	h := &Headers{BTH: BTHFields{Opcode: RCSendOnly, PKey: DefaultPKey}}
	n := PacketLen(RCSendOnly, 5)
	big := make([]byte, n+16)
	for _, short := range []int{1, ICRCSize} {
		_, err := Build(big[:n-short], h, make([]byte, 5), nil)
		require.ErrorIs(t, err, ErrBufferTooSmall, "%d bytes short", short)
	}
	got, err := Build(big[:n], h, make([]byte, 5), nil)
	require.NoError(t, err)
	require.Equal(t, n, got)
}

// TestBTHEncodeByteOneFieldsStayInTheirBits: BTH byte 1 is SE, MigReq, a
// 2-bit pad count and a 4-bit TVer (IBA 9.2); a pad count or TVer wider
// than its field sets neither SE nor MigReq.
func TestBTHEncodeByteOneFieldsStayInTheirBits(t *testing.T) {
	tests := []struct {
		name   string
		f      BTHFields
		byte1  byte
		pad    int
		migReq bool
	}{
		{"pad 7", BTHFields{PadCnt: 7}, 0x30, 3, false},
		{"pad 4", BTHFields{PadCnt: 4}, 0x00, 0, false},
		{"tver 0xFF", BTHFields{TVer: 0xFF}, 0x0F, 0, false},
		{"all wide", BTHFields{PadCnt: 0xFF, TVer: 0xFF}, 0x3F, 3, false},
		{"migreq", BTHFields{MigReq: true, PadCnt: 5}, 0x50, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := make(BTH, BTHSize)
			b.Encode(&tc.f)
			require.Equal(t, tc.byte1, b[1])
			require.Equal(t, tc.pad, b.PadCnt())
			require.Equal(t, tc.migReq, b.MigReq())
			require.False(t, b.SE())
		})
	}
}

// TestViewsIgnoreReservedBits: the 24-bit fields that share a word with a
// reserved byte or with flags (BTH DestQP after FECN, BECN and Resv6a;
// PSN after AckReq and Resv7, IBA 9.2; the DETH source QP and the RDETH EE
// context after a reserved byte, 9.3.2 and 9.3.1; the AETH MSN after the
// syndrome, 9.3.5) read only their 24 bits, whatever a sender put in the
// rest.
func TestViewsIgnoreReservedBits(t *testing.T) {
	bth := BTH{0x04, 0x00, 0xFF, 0xFF, 0xFF, 0x12, 0x34, 0x56, 0xFF, 0xAB, 0xCD, 0xEF}
	require.Equal(t, uint32(0x123456), bth.DestQP())
	require.Equal(t, PSN(0xABCDEF), bth.PSN())
	require.Equal(t, uint8(0x3F), bth.Fields().Resv6a)
	require.Equal(t, uint8(0x7F), bth.Fields().Resv7)
	require.Equal(t, uint32(0x123456), RDETH{0xFF, 0x12, 0x34, 0x56}.EEC())
	require.Equal(t, uint32(0x000001), DETH{0x80, 0x01, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x01}.SrcQP())
	require.Equal(t, uint32(0x80010000), DETH{0x80, 0x01, 0x00, 0x00, 0xFF, 0x00, 0x00, 0x01}.QKey())
	a := AETH{0xFF, 0x00, 0x00, 0x07}
	require.Equal(t, uint32(7), a.MSN())
	require.Equal(t, Syndrome(0xFF), a.Syndrome())
}

// TestBuildOverwritesADirtyBuffer: a sender reuses its packet buffers, so
// Build must write every byte of the packet: pad bytes as zero (IBA 9.2,
// rxe writes them zeroed), the 16 reserved bytes of a CNP as zero (IBA
// A17.9.2), and the ICRC slot, zeroed when no pseudo-header is given. A
// packet built over leftovers is the packet built into a clean buffer.
func TestBuildOverwritesADirtyBuffer(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			for _, ph := range []*PseudoHeader{&testPH, nil} {
				clean := make([]byte, 512)
				n, err := Build(clean, &s.h, s.payload, ph)
				require.NoError(t, err)
				dirty := bytes.Repeat([]byte{0xA5}, 512)
				m, err := Build(dirty, &s.h, s.payload, ph)
				require.NoError(t, err)
				require.Equal(t, clean[:n], dirty[:m], "pseudo-header %v", ph != nil)
			}
		})
	}
}

// TestPacketViewsAreCapped: the header views and the payload of a parsed
// packet end at their own last byte (capacity = length), so a caller that
// appends to one allocates rather than overwriting the bytes after it (the
// next header, the pad or the ICRC).
func TestPacketViewsAreCapped(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			buf := make([]byte, 512)
			n, err := Build(buf, &s.h, s.payload, &testPH)
			require.NoError(t, err)
			p, err := Parse(buf[:n])
			require.NoError(t, err)
			for h := Hdr(0); h < NumHdrs; h++ {
				if v := p.Header(h); v != nil {
					require.Equal(t, h.Size(), len(v), "header %d", h)
					require.Equal(t, h.Size(), cap(v), "header %d", h)
				}
			}
			require.Equal(t, len(p.Payload()), cap(p.Payload()))
		})
	}
}

// TestParseShorterThanBTHAndICRC: a datagram shorter than a BTH and an
// ICRC (16 bytes) holds no RoCEv2 packet, so Parse counts it as
// truncated before reading its transport version or opcode, whatever
// those bytes hold.
func TestParseShorterThanBTHAndICRC(t *testing.T) {
	for _, fill := range []byte{0x00, 0x0F, 0xFF} {
		b := bytes.Repeat([]byte{fill}, BTHSize+ICRCSize)
		for n := 0; n < len(b); n++ {
			_, err := Parse(b[:n])
			require.ErrorIs(t, err, ErrTruncated, "%d bytes of %#x", n, fill)
		}
	}
}

// TestBeginRefusesNegativeLength: Begin takes the payload length from its
// caller (an engine that copies the payload in itself), so a negative one
// is refused with ErrBadLength for every opcode, rather than giving a
// Frame whose payload slice has a negative length.
func TestBeginRefusesNegativeLength(t *testing.T) {
	buf := make([]byte, 512)
	for _, op := range []Opcode{RCSendOnly, RCRDMAWriteFirst, UDSendOnly, RCAcknowledge, RCAtomicWrite} {
		for _, n := range []int{-1, -4, -5} {
			_, err := Begin(buf, &Headers{BTH: BTHFields{Opcode: op}}, n, &testPH)
			require.ErrorIs(t, err, ErrBadLength, "%v, %d bytes", op, n)
		}
	}
}
