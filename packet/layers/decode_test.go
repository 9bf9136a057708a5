package layers

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

func TestRegistration(t *testing.T) {
	names := []string{"BTH", "RDETH", "DETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "CNP"}
	types := []gopacket.LayerType{LayerTypeBTH, LayerTypeRDETH, LayerTypeDETH, LayerTypeFETH, LayerTypeRETH,
		LayerTypeAtomicETH, LayerTypeAETH, LayerTypeAtomicAckETH, LayerTypeImmDt, LayerTypeIETH, LayerTypeCNP}
	for i, lt := range types {
		require.Equal(t, gopacket.LayerType(1790+i), lt)
		require.Equal(t, names[i], lt.String())
		if i > 0 {
			require.Equal(t, lt, hdrLayerType(packet.Hdr(i-1)))
			h, ok := layerHdr(lt)
			require.True(t, ok)
			require.Equal(t, packet.Hdr(i-1), h)
		}
	}
	// The BTH and the types after CNP (1801-1809, kept free) are no
	// extension header.
	for _, lt := range []gopacket.LayerType{LayerTypeBTH, LayerTypeCNP + 1, 1809} {
		_, ok := layerHdr(lt)
		require.False(t, ok, "%d", lt)
	}
	require.Equal(t, LayerTypeBTH, gplayers.UDPPort(4791).LayerType())

	// Another port, as rxectl dump --port does.
	const port = 14791
	require.Equal(t, gopacket.LayerTypePayload, gplayers.UDPPort(port).LayerType())
	RegisterPort(port)
	t.Cleanup(func() { gplayers.RegisterUDPPortLayerType(port, gopacket.LayerTypeZero) })
	ph := ph4
	ph.DstPort = port
	s := samples(0)[4]
	frame := buildFrame(t, &ph, &s.h, s.payload, true)
	pkt := gopacket.NewPacket(frame, gplayers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	require.NotNil(t, pkt.Layer(LayerTypeBTH))
}

// agree decodes frame with gopacket, both through NewPacket and through a
// DecodingLayerParser, and with packet.Parse on the UDP payload that
// Datagram finds, and requires the same verdict and the same values. It
// returns Parse's result.
func agree(t *testing.T, frame []byte, link gplayers.LinkType) (packet.Packet, error) {
	t.Helper()
	first := map[gplayers.LinkType]gopacket.LayerType{
		gplayers.LinkTypeEthernet: gplayers.LayerTypeEthernet, gplayers.LinkTypeLinuxSLL: gplayers.LayerTypeLinuxSLL}[link]
	pkt := gopacket.NewPacket(frame, first, gopacket.Default)
	udp, _ := pkt.Layer(gplayers.LayerTypeUDP).(*gplayers.UDP)
	if udp == nil || udp.NextLayerType() != LayerTypeBTH {
		require.Nil(t, pkt.Layer(LayerTypeBTH), "not RoCE, yet a BTH")
		return packet.Packet{}, errors.New("not RoCE")
	}
	d, err := Datagram(frame, link)
	require.NoError(t, err)
	require.Equal(t, d.Payload, udp.Payload, "Datagram and gopacket's UDP agree")
	p, perr := packet.Parse(d.Payload)

	ps := newParserSet(first)
	derr := ps.parser.DecodeLayers(frame, &ps.decoded)

	if perr != nil {
		require.Nil(t, pkt.Layer(LayerTypeBTH))
		require.NotNil(t, pkt.ErrorLayer())
		require.ErrorIs(t, pkt.ErrorLayer().Error(), perr)
		require.ErrorIs(t, derr, perr)
		require.Equal(t, perr == packet.ErrTruncated, pkt.Metadata().Truncated)
		require.Equal(t, perr == packet.ErrTruncated, ps.parser.Truncated)
		return p, perr
	}
	want := p.Headers()
	wantTypes := wantTypes(p)

	// NewPacket.
	require.Nil(t, pkt.ErrorLayer())
	require.False(t, pkt.Metadata().Truncated)
	i := len(pkt.Layers()) - len(wantTypes)
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, LayerTypeBTH, pkt.Layers()[i].LayerType(), "BTH right after UDP")
	got, payload, types := headersOf(t, pkt.Layers())
	require.Equal(t, wantTypes, types)
	require.Equal(t, want, got)
	requireBytes(t, p.Payload(), payload)
	bth := pkt.Layer(LayerTypeBTH).(*BTH)
	require.Equal(t, p.ICRC(), bth.ICRC)
	require.Equal(t, d.Payload, bth.Packet().Bytes())
	require.Equal(t, p.BTH(), packet.BTH(bth.LayerContents()))
	for _, l := range pkt.Layers()[i+1:] {
		if h, ok := layerHdr(l.LayerType()); ok {
			require.Equal(t, p.Header(h), l.LayerContents(), "%v contents", l.LayerType())
		}
	}
	if p.PayloadLen() > 0 {
		require.Equal(t, p.Payload(), pkt.ApplicationLayer().Payload())
	}

	// DecodingLayerParser.
	require.NoError(t, derr)
	require.False(t, ps.parser.Truncated)
	var ls []gopacket.Layer
	for _, lt := range ps.decoded {
		if l := ps.layerOf(lt); l != nil {
			ls = append(ls, l)
		}
	}
	got, payload, types = headersOf(t, ls)
	require.Equal(t, wantTypes, types)
	require.Equal(t, want, got)
	requireBytes(t, p.Payload(), payload)
	require.Equal(t, p.ICRC(), ps.roce.BTH.ICRC)
	return p, nil
}

// requireBytes requires equal bytes, an empty slice equal to nil.
func requireBytes(t *testing.T, want, got []byte) {
	t.Helper()
	require.Equal(t, append([]byte{}, want...), append([]byte{}, got...))
}

// captures returns the frames and link type of every pcap the tests read.
func captures(t *testing.T) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob("../../testdata/captures/*.pcap")
	require.NoError(t, err)
	files = append(files, "../../testdata/scapy/scapy_fixtures.pcap")
	require.GreaterOrEqual(t, len(files), 3)
	out := map[string][][]byte{}
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		r, err := pcapgo.NewReader(f)
		require.NoError(t, err)
		require.Equal(t, gplayers.LinkTypeEthernet, r.LinkType(), name)
		for {
			data, _, err := r.ReadPacketData()
			if err != nil {
				break
			}
			out[filepath.Base(name)] = append(out[filepath.Base(name)], data)
		}
		require.NoError(t, f.Close())
	}
	return out
}

// TestDecodersAgreeCaptures: for every frame of the real and scapy-built
// captures, as Ethernet and as Linux cooked frames, gopacket with our
// layers decodes what packet.Parse decodes, to the same values.
func TestDecodersAgreeCaptures(t *testing.T) {
	total, roce, bad := 0, 0, 0
	for name, frames := range captures(t) {
		for i, frame := range frames {
			t.Run(fmt.Sprintf("%s/%d", name, i+1), func(t *testing.T) {
				total++
				p, err := agree(t, frame, gplayers.LinkTypeEthernet)
				p2, err2 := agree(t, toSLL(frame), gplayers.LinkTypeLinuxSLL)
				require.Equal(t, err, err2)
				if err == nil {
					require.Equal(t, p.Headers(), p2.Headers())
					roce++
					if CheckICRC(frame, gplayers.LinkTypeEthernet) != nil {
						bad++
					}
					require.Equal(t, CheckICRC(frame, gplayers.LinkTypeEthernet), CheckICRC(toSLL(frame), gplayers.LinkTypeLinuxSLL))
				}
			})
		}
	}
	// 123 + 2 + 154 + 49 + 681 + 71 frames (Huawei, ConnectX-4 Lx, the
	// three kernel-rxe captures, scapy); 105 + 2 + 154 + 20 + 640 + 69
	// decode as RoCE; only scapy's frame 69 carries a bad ICRC.
	require.Equal(t, 1080, total)
	require.Equal(t, 990, roce)
	require.Equal(t, 1, bad)
}

// TestDecodersAgreeSamples: packets of every opcode built by packet.Build,
// in IPv4 and IPv6 Ethernet frames and in Linux cooked frames.
func TestDecodersAgreeSamples(t *testing.T) {
	for _, ph := range []*packet.PseudoHeader{&ph4, &ph6} {
		for _, s := range samples(0) {
			t.Run(fmt.Sprintf("%v/%s", ph.Is4(), s.name), func(t *testing.T) {
				// The frame's headers come from gopacket, the datagram from Build.
				frame := buildFrame(t, ph, &s.h, s.payload, true)
				n, err := packet.Build(frame[headerLen(ph):], &s.h, s.payload, ph)
				require.NoError(t, err)
				require.Len(t, frame, headerLen(ph)+n)
				p, err := agree(t, frame, gplayers.LinkTypeEthernet)
				require.NoError(t, err)
				require.Equal(t, s.payload, append([]byte(nil), p.Payload()...))
				_, err = agree(t, toSLL(frame), gplayers.LinkTypeLinuxSLL)
				require.NoError(t, err)
			})
		}
	}
}

// scapyFrame is one line of testdata/scapy/scapy_fixtures.jsonl.
type scapyFrame struct {
	Frame      int
	Error      bool
	OpcodeNum  uint8 `json:"opcode_num"`
	SE         bool
	MigReq     bool
	Pad        uint8
	TVer       uint8
	PKey       uint16
	FECN, BECN bool
	DQPN       uint32
	AckReq     bool
	PSN        packet.PSN
	PayloadLen int `json:"payload_len"`
	ICRC       uint32
	ICRCOK     bool `json:"icrc_ok"`
	RETH       *struct {
		VA     uint64
		RKey   uint32
		DMALen uint32 `json:"dma_len"`
	}
	AETH *struct {
		Syndrome uint8
		MSN      uint32
	}
	AtomicAckETH *struct{ Orig uint64 }
	AtomicETH    *struct {
		VA      uint64
		RKey    uint32
		SwapAdd uint64 `json:"swap_add"`
		Compare uint64
	}
	ImmDt *uint32
	IETH  *uint32
	DETH  *struct {
		QKey  uint32
		SrcQP uint32 `json:"src_qp"`
	}
}

// TestScapyFixtureValues: the gopacket decode of the scapy fixture reports
// the values scapy reported (testdata/scapy/README.md).
func TestScapyFixtureValues(t *testing.T) {
	frames := captures(t)["scapy_fixtures.pcap"]
	b, err := os.ReadFile("../../testdata/scapy/scapy_fixtures.jsonl")
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	n := 0
	for dec.More() {
		var w scapyFrame
		require.NoError(t, dec.Decode(&w))
		n++
		pkt := gopacket.NewPacket(frames[w.Frame-1], gplayers.LayerTypeEthernet, gopacket.Default)
		if w.Error {
			require.NotNil(t, pkt.ErrorLayer(), "frame %d", w.Frame)
			continue
		}
		bth, _ := pkt.Layer(LayerTypeBTH).(*BTH)
		require.NotNil(t, bth, "frame %d", w.Frame)
		got := scapyFrame{Frame: w.Frame, OpcodeNum: uint8(bth.Opcode), SE: bth.SE, MigReq: bth.MigReq, Pad: bth.PadCnt,
			TVer: bth.TVer, PKey: bth.PKey, FECN: bth.FECN, BECN: bth.BECN, DQPN: bth.DestQP, AckReq: bth.AckReq,
			PSN: bth.PSN, ICRC: bth.ICRC, ICRCOK: CheckICRC(frames[w.Frame-1], gplayers.LinkTypeEthernet) == nil}
		if a := pkt.ApplicationLayer(); a != nil {
			got.PayloadLen = len(a.Payload())
		}
		if l, ok := pkt.Layer(LayerTypeRETH).(*RETH); ok {
			got.RETH = &struct {
				VA     uint64
				RKey   uint32
				DMALen uint32 `json:"dma_len"`
			}{l.VA, l.RKey, l.DMALen}
		}
		if l, ok := pkt.Layer(LayerTypeAETH).(*AETH); ok {
			got.AETH = &struct {
				Syndrome uint8
				MSN      uint32
			}{uint8(l.Syndrome), l.MSN}
		}
		if l, ok := pkt.Layer(LayerTypeAtomicAckETH).(*AtomicAckETH); ok {
			got.AtomicAckETH = &struct{ Orig uint64 }{l.Orig}
		}
		if l, ok := pkt.Layer(LayerTypeAtomicETH).(*AtomicETH); ok {
			got.AtomicETH = &struct {
				VA      uint64
				RKey    uint32
				SwapAdd uint64 `json:"swap_add"`
				Compare uint64
			}{l.VA, l.RKey, l.SwapAdd, l.Compare}
		}
		if l, ok := pkt.Layer(LayerTypeImmDt).(*ImmDt); ok {
			got.ImmDt = &l.Imm
		}
		if l, ok := pkt.Layer(LayerTypeIETH).(*IETH); ok {
			got.IETH = &l.RKey
		}
		if l, ok := pkt.Layer(LayerTypeDETH).(*DETH); ok {
			got.DETH = &struct {
				QKey  uint32
				SrcQP uint32 `json:"src_qp"`
			}{l.QKey, l.SrcQP}
		}
		require.Equal(t, w, got, "frame %d", w.Frame)
		// The FETH words of the README.
		if l, ok := pkt.Layer(LayerTypeFETH).(*FETH); ok {
			require.Equal(t, map[int]uint32{38: 0x12, 50: 0x01}[w.Frame], l.Value)
		}
	}
	require.Equal(t, 70, n)
}

// TestDecodeErrors: the BTH layer rejects what packet.Parse rejects, with
// the same sentinel errors, through both gopacket decoders.
func TestDecodeErrors(t *testing.T) {
	good := func(op packet.Opcode, n int) []byte {
		b := make([]byte, 256)
		m, err := packet.Build(b, &packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, PSN: 7}}, make([]byte, n), nil)
		require.NoError(t, err)
		return b[:m]
	}
	tests := []struct {
		name string
		b    []byte
		err  error
	}{
		{"bth only", good(packet.RCSendOnly, 0)[:12], packet.ErrTruncated},
		{"tver 1", func() []byte { b := good(packet.RCSendOnly, 4); b[1] |= 1; return b }(), packet.ErrBadTransportVersion},
		{"reserved opcode", func() []byte { b := good(packet.RCSendOnly, 4); b[0] = 0x15; return b }(), packet.ErrUnknownOpcode},
		{"xrc opcode", func() []byte { b := good(packet.RCSendOnly, 4); b[0] = 0xA4; return b }(), packet.ErrUnknownOpcode},
		{"pad beyond payload", func() []byte { b := good(packet.RCSendOnly, 0); b[1] |= 0x30; return b }(), packet.ErrBadPadding},
		{"pad on ack", func() []byte { b := good(packet.RCAcknowledge, 0); b[1] |= 0x10; return b }(), packet.ErrBadPadding},
		{"payload on ack", append(good(packet.RCAcknowledge, 0), 0, 0, 0, 0), packet.ErrBadLength},
		{"short read request", good(packet.RCRDMAReadRequest, 0)[:28], packet.ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkt := gopacket.NewPacket(tc.b, LayerTypeBTH, gopacket.Default)
			require.NotNil(t, pkt.ErrorLayer())
			require.ErrorIs(t, pkt.ErrorLayer().Error(), tc.err)
			require.Nil(t, pkt.Layer(LayerTypeBTH))
			require.Equal(t, tc.err == packet.ErrTruncated, pkt.Metadata().Truncated)

			var r RoCE
			var payload gopacket.Payload
			parser := gopacket.NewDecodingLayerParser(LayerTypeBTH, append(r.DecodingLayers(), &payload)...)
			var decoded []gopacket.LayerType
			require.ErrorIs(t, parser.DecodeLayers(tc.b, &decoded), tc.err)
			require.Equal(t, tc.err == packet.ErrTruncated, parser.Truncated)
			require.Empty(t, decoded)
			// The BTH fields are there for a dump, the rest is reset.
			require.Equal(t, packet.BTH(tc.b).Fields(), r.BTH.Fields())
			require.Nil(t, r.BTH.Payload)
			require.Zero(t, r.BTH.ICRC)
			require.Zero(t, r.BTH.Packet())
		})
	}
}

// TestTruncation cuts a BTH+RETH datagram (an RDMA READ request) and its
// Ethernet frame at every length: nothing panics, nothing decodes a BTH,
// and each prefix reports an error; too-short datagrams report truncation.
func TestTruncation(t *testing.T) {
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAReadRequest, PKey: packet.DefaultPKey, DestQP: 0x12, AckReq: true, PSN: 0x123456},
		RETH: packet.RETHFields{VA: 0x00007f0000001000, RKey: 0x1234, DMALen: 4096}}
	frame := buildFrame(t, &ph4, &h, nil, false)
	dgram := frame[headerLen(&ph4):]
	opts := gopacket.DecodeOptions{SkipDecodeRecovery: true} // let panics out
	for i := range len(dgram) {
		pkt := gopacket.NewPacket(dgram[:i], LayerTypeBTH, opts)
		require.NotNil(t, pkt.ErrorLayer(), "len %d", i)
		require.ErrorIs(t, pkt.ErrorLayer().Error(), packet.ErrTruncated, "len %d", i)
		require.True(t, pkt.Metadata().Truncated, "len %d", i)
		require.Nil(t, pkt.Layer(LayerTypeRETH))
	}
	ps := newParserSet(gplayers.LayerTypeEthernet)
	ps.parser.IgnorePanic = true // let panics out
	for i := range len(frame) {
		pkt := gopacket.NewPacket(frame[:i], gplayers.LayerTypeEthernet, opts)
		require.Nil(t, pkt.Layer(LayerTypeBTH), "len %d", i)
		err := ps.parser.DecodeLayers(frame[:i], &ps.decoded)
		require.NotContains(t, ps.decoded, LayerTypeBTH, "len %d", i)
		if i > 14 {
			require.True(t, pkt.Metadata().Truncated || pkt.ErrorLayer() != nil, "len %d", i)
			require.True(t, ps.parser.Truncated || err != nil, "len %d", i)
		}
	}
	// The standalone extension-header decoders say truncated too.
	for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
		pkt := gopacket.NewPacket(make([]byte, h.Size()-1), hdrLayerType(h), opts)
		require.ErrorIs(t, pkt.ErrorLayer().Error(), packet.ErrTruncated)
		require.True(t, pkt.Metadata().Truncated)
	}
}

// TestStandaloneExtension: an extension header decoded on its own (no BTH)
// hands everything after it on as payload; the linked one follows the
// opcode.
func TestStandaloneExtension(t *testing.T) {
	b := make([]byte, 24)
	b[19] = 0x42
	pkt := gopacket.NewPacket(b, LayerTypeRETH, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	require.Len(t, pkt.Layers(), 2)
	require.Equal(t, gopacket.LayerTypePayload, pkt.Layers()[1].LayerType())
	require.Equal(t, b[16:], pkt.ApplicationLayer().Payload())
	require.Equal(t, gopacket.LayerTypePayload, pkt.Layers()[0].(*RETH).NextLayerType())

	// RDMA WRITE ONLY WITH IMMEDIATE: RETH → ImmDt → Payload.
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteOnlyWithImm}, Imm: 0x01020304}
	buf := make([]byte, 64)
	n, err := packet.Build(buf, &h, []byte("hello"), nil)
	require.NoError(t, err)
	pkt = gopacket.NewPacket(buf[:n], LayerTypeBTH, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	var types []gopacket.LayerType
	for _, l := range pkt.Layers() {
		types = append(types, l.LayerType())
	}
	require.Equal(t, []gopacket.LayerType{LayerTypeBTH, LayerTypeRETH, LayerTypeImmDt, gopacket.LayerTypePayload}, types)
	require.Equal(t, uint32(0x01020304), pkt.Layer(LayerTypeImmDt).(*ImmDt).Imm)
	require.Equal(t, []byte("hello"), pkt.ApplicationLayer().Payload())
	require.Contains(t, gopacket.LayerString(pkt.Layers()[0]), "Opcode=RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE")
}

// frame4K returns an Ethernet/IPv4/UDP/BTH/ext/4 KiB frame of opcode op.
func frame4K(t testing.TB, op packet.Opcode) []byte {
	h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: 17, PSN: 5},
		RETH: packet.RETHFields{VA: 0x1000, RKey: 2, DMALen: 1 << 20},
		AETH: packet.AETHFields{Syndrome: packet.Syndrome(0x1F), MSN: 3}}
	return buildFrame(t, &ph4, &h, make([]byte, 4096), false)
}

// TestParserZeroAllocs: a DecodingLayerParser decodes a whole
// Ethernet/IPv4/UDP/BTH/RETH/payload frame without allocating.
func TestParserZeroAllocs(t *testing.T) {
	frame := frame4K(t, packet.RCRDMAWriteFirst)
	ps := newParserSet(gplayers.LayerTypeEthernet)
	allocs := testing.AllocsPerRun(100, func() {
		if err := ps.parser.DecodeLayers(frame, &ps.decoded); err != nil || len(ps.decoded) != 6 {
			panic(fmt.Sprint(err, ps.decoded))
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, []gopacket.LayerType{gplayers.LayerTypeEthernet, gplayers.LayerTypeIPv4, gplayers.LayerTypeUDP,
		LayerTypeBTH, LayerTypeRETH, gopacket.LayerTypePayload}, ps.decoded)
	require.Equal(t, uint32(1<<20), ps.roce.RETH.DMALen)
	require.Len(t, ps.payload, 4096)
}

// BenchmarkDecodingLayerParser4K decodes an Ethernet/IPv4/UDP/BTH/AETH/4 KiB
// frame (an RDMA READ response) with a DecodingLayerParser.
func BenchmarkDecodingLayerParser4K(b *testing.B) {
	frame := frame4K(b, packet.RCRDMAReadResponseFirst)
	ps := newParserSet(gplayers.LayerTypeEthernet)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ps.parser.DecodeLayers(frame, &ps.decoded); err != nil || ps.roce.AETH.MSN != 3 {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewPacket4K decodes the same frame with gopacket.NewPacket, for
// comparison.
func BenchmarkNewPacket4K(b *testing.B) {
	frame := frame4K(b, packet.RCRDMAReadResponseFirst)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		pkt := gopacket.NewPacket(frame, gplayers.LayerTypeEthernet, gopacket.NoCopy)
		if pkt.Layer(LayerTypeAETH) == nil {
			b.Fatal(pkt.ErrorLayer())
		}
	}
}

// TestFETHFields: the FETH's placement type is bits 3..0 of its word and
// its selectivity level bits 5..4; bits 31..6 are reserved (rxe_hdr.h,
// FETH_PLT_MASK and FETH_SEL_MASK).
func TestFETHFields(t *testing.T) {
	tests := []struct {
		value    uint32
		sel, plt uint8
	}{
		{0x00000000, 0, 0},
		{0x00000012, 1, 2}, // scapy fixture frame 38
		{0x00000001, 0, 1},
		{0x0000003F, 3, 15},
		{0x00000025, 2, 5},
		{0xFFFFFFC0, 0, 0}, // reserved bits only
		{0xFFFFFFFF, 3, 15},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%#08x", tc.value), func(t *testing.T) {
			b := binary.BigEndian.AppendUint32(nil, tc.value)
			pkt := gopacket.NewPacket(b, LayerTypeFETH, gopacket.Default)
			require.Nil(t, pkt.ErrorLayer())
			f := pkt.Layer(LayerTypeFETH).(*FETH)
			require.Equal(t, tc.value, f.Value)
			require.Equal(t, tc.sel, f.SelectivityLevel(), "selectivity level")
			require.Equal(t, tc.plt, f.PlacementType(), "placement type")
		})
	}
}

// TestSetFieldsWireWidths: SetFields keeps of each field only the bits
// the BTH has room for (IBA 9.2: PadCnt 2, TVer 4, the reserved 6 and 7,
// DestQP and PSN 24), so Fields returns what a BTH written from the same
// values decodes to.
func TestSetFieldsWireWidths(t *testing.T) {
	f := packet.BTHFields{Opcode: packet.RCSendOnly, SE: true, MigReq: true, PadCnt: 0xFF, TVer: 0xFF, PKey: 0xFFFF,
		FECN: true, BECN: true, Resv6a: 0xFF, DestQP: 0xFFFFFFFF, AckReq: true, Resv7: 0xFF, PSN: 0xFFFFFFFF}
	wire := make(packet.BTH, packet.BTHSize)
	wire.Encode(&f)
	var b BTH
	b.SetFields(&f)
	require.Equal(t, wire.Fields(), b.Fields())
}

// TestBTHDecodeAfterFailure: a BTH layer that decoded a datagram and then
// fails on the next keeps nothing of the first: Payload, ICRC and Packet
// are zero, and only the new BTH fields are there.
func TestBTHDecodeAfterFailure(t *testing.T) {
	b := make([]byte, 64)
	n, err := packet.Build(b, &packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, PSN: 7}},
		[]byte("hello"), &ph4)
	require.NoError(t, err)
	good := b[:n]
	bad := append([]byte(nil), good...)
	bad[1] |= 1 // TVer 1

	var l BTH
	require.NoError(t, l.DecodeFromBytes(good, gopacket.NilDecodeFeedback))
	require.NotZero(t, l.ICRC)
	require.ErrorIs(t, l.DecodeFromBytes(bad, gopacket.NilDecodeFeedback), packet.ErrBadTransportVersion)
	require.Nil(t, l.Payload)
	require.Zero(t, l.ICRC)
	require.Zero(t, l.Packet())
	require.Equal(t, packet.BTH(bad).Fields(), l.Fields())
}
