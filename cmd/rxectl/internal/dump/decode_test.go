package dump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// scapyFrame returns frame n (1-based) of the scapy fixture, a fresh copy.
func scapyFrame(t testing.TB, n int) []byte {
	t.Helper()
	return slices.Clone(readPcap(t, scapyPcap)[n-1].data)
}

func TestDecodeFrame(t *testing.T) {
	roce := Ports{packet.UDPPort}
	tests := []struct {
		name    string
		frame   func(t *testing.T) []byte
		origLen int // 0: the frame's length
		lt      LinkType
		kind    Kind
		err     error  // for KindMalformed: errors.Is
		errText string // for KindMalformed: exact message
	}{
		{name: "RC SEND_FIRST", frame: func(t *testing.T) []byte { return scapyFrame(t, 1) }, lt: packet.LinkEthernet, kind: KindRoCE},
		{name: "DNS", frame: func(t *testing.T) []byte { return scapyFrame(t, 70) }, lt: packet.LinkEthernet, kind: KindOther},
		{name: "8 bytes of BTH", frame: func(t *testing.T) []byte { return scapyFrame(t, 71) }, lt: packet.LinkEthernet, kind: KindMalformed, err: packet.ErrTruncated},
		{name: "ARP", frame: func(t *testing.T) []byte {
			return cat(macs, be16(0x0806), make([]byte, 28))
		}, lt: packet.LinkEthernet, kind: KindOther},
		{name: "short Ethernet", frame: func(t *testing.T) []byte { return macs }, lt: packet.LinkEthernet, kind: KindOther},
		{name: "VLAN tag cut", frame: func(t *testing.T) []byte { return cat(macs, be16(0x8100), []byte{0}) }, lt: packet.LinkEthernet, kind: KindOther},
		{name: "short SLL", frame: func(t *testing.T) []byte { return make([]byte, 15) }, lt: packet.LinkSLL, kind: KindOther},
		{name: "short SLL2", frame: func(t *testing.T) []byte { return make([]byte, 19) }, lt: packet.LinkSLL2, kind: KindOther},
		{name: "null, unknown family", frame: func(t *testing.T) []byte {
			return cat([]byte{7, 0, 0, 0}, scapyFrame(t, 1)[14:])
		}, lt: packet.LinkNull, kind: KindOther},
		{name: "empty raw", frame: func(t *testing.T) []byte { return nil }, lt: packet.LinkRaw, kind: KindOther},
		{name: "TCP", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+9] = 6
			return f
		}, lt: packet.LinkEthernet, kind: KindOther},
		{name: "IPv4 first fragment to 4791", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+6] |= 0x20 // MF
			return f
		}, lt: packet.LinkEthernet, kind: KindMalformed, err: errFragment},
		{name: "IPv4 later fragment", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+7] = 1 // offset 8
			return f
		}, lt: packet.LinkEthernet, kind: KindOther},
		// Cut by a snap length inside the BTH: nothing to decode, but not
		// malformed either (cut.go; cut_test.go has the other cuts).
		{name: "cut by the snaplen", frame: func(t *testing.T) []byte { return scapyFrame(t, 1)[:14+20+8+6] }, origLen: 314, lt: packet.LinkEthernet, kind: KindCut},
		{name: "IPv6 cut", frame: func(t *testing.T) []byte { return scapyFrame(t, 40)[:14+40+8+6] }, lt: packet.LinkEthernet, kind: KindMalformed, err: packet.ErrBadIPHeader},
		{name: "cut before the destination port", frame: func(t *testing.T) []byte { return scapyFrame(t, 1)[:14+20+3] }, lt: packet.LinkEthernet, kind: KindOther},
		{name: "UDP length too short", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+20+4], f[14+20+5] = 0, 4
			return f
		}, lt: packet.LinkEthernet, kind: KindMalformed, err: packet.ErrBadIPHeader},
		{name: "TVer 1", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+20+8+1] |= 1
			return f
		}, lt: packet.LinkEthernet, kind: KindMalformed, err: packet.ErrBadTransportVersion},
		{name: "XRC opcode", frame: func(t *testing.T) []byte {
			f := scapyFrame(t, 1)
			f[14+20+8] = 0xA0
			return f
		}, lt: packet.LinkEthernet, kind: KindMalformed, err: packet.ErrUnknownOpcode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.frame(t)
			f := Frame{Num: 1, CapLen: len(data), OrigLen: len(data)}
			if tc.origLen != 0 {
				f.OrigLen = tc.origLen
			}
			DecodeFrame(&f, data, tc.lt, roce)
			require.Equal(t, tc.kind, f.Kind)
			switch tc.kind {
			case KindMalformed:
				if tc.err != nil {
					require.ErrorIs(t, f.Err, tc.err)
				}
				if tc.errText != "" {
					require.EqualError(t, f.Err, tc.errText)
				}
				require.True(t, f.Dst.IsValid())
				require.Equal(t, uint16(packet.UDPPort), f.Dst.Port())
			case KindRoCE:
				require.True(t, f.ICRCOK)
			}
			// Whatever the verdict, formatting must not panic and the JSON
			// must be valid.
			if f.Kind != KindOther {
				require.True(t, json.Valid(AppendJSON(nil, &f)))
				require.NotEmpty(t, AppendText(nil, &f, []byte("0.000000"), true))
			}
		})
	}
}

// TestDecodeFrameLinkTypes: the link layers dump decodes through packet's
// parser; a frame of another protocol or link type is not RoCE.
func TestDecodeFrameLinkTypes(t *testing.T) {
	ip := scapyFrame(t, 1)[14:]
	for _, tc := range []struct {
		name string
		lt   LinkType
		data []byte
		ok   bool
	}{
		{"SLL IPv4", packet.LinkSLL, cat(make([]byte, 14), be16(0x0800), ip), true},
		{"SLL ARP", packet.LinkSLL, cat(make([]byte, 14), be16(0x0806), ip), false},
		{"SLL2 IPv6 type", packet.LinkSLL2, cat(be16(0x86DD), make([]byte, 18), ip), true},
		{"SLL2 802.2", packet.LinkSLL2, cat(be16(0x0004), make([]byte, 18), ip), false},
		{"Ethernet 802.3 length", packet.LinkEthernet, cat(macs, be16(100), ip), false},
		{"loop AF_INET6 Linux", packet.LinkLoop, cat([]byte{0, 0, 0, 10}, ip), true},
		{"null AF_INET big-endian host", packet.LinkNull, cat([]byte{0, 0, 0, 2}, ip), true},
		{"IPv4 link type", packet.LinkIPv4, ip, true},
		{"unknown link type", 220, ip, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Frame{Num: 1, CapLen: len(tc.data), OrigLen: len(tc.data)}
			DecodeFrame(&f, tc.data, tc.lt, Ports{packet.UDPPort})
			if !tc.ok {
				require.Equal(t, KindOther, f.Kind)
				return
			}
			require.Equal(t, KindRoCE, f.Kind)
			require.Equal(t, ip, f.IP)
			require.True(t, f.ICRCOK)
		})
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

func TestNgGuard(t *testing.T) {
	frames := readPcap(t, cx4Pcap)
	file := pcapngBytes(276, frames)
	for _, chunk := range []int{1, 3, 7, 4096} {
		g := &ngGuard{r: &chunkReader{b: file, n: chunk}}
		got, err := io.ReadAll(iotest.OneByteReader(g))
		require.NoError(t, err)
		require.Equal(t, file, got, "passes every byte through")
		require.Equal(t, []LinkType{packet.LinkSLL2}, g.seen, "chunk %d", chunk)
		require.Equal(t, packet.LinkSLL2, g.full(layers.LinkType(276&0xFF)))
		require.Equal(t, LinkType(1), g.full(layers.LinkTypeEthernet), "not seen: kept as is")

		g = &ngGuard{r: &chunkReader{b: file, n: chunk}}
		got, err = io.ReadAll(g)
		require.NoError(t, err)
		require.Equal(t, file, got)
	}
	for _, cut := range []int{1, 7, 12, 20, len(file) - 28 - 32 - 1} {
		_, err := io.ReadAll(&ngGuard{r: bytes.NewReader(file[:len(file)-cut])})
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut %d", cut)
	}
	bad := slices.Clone(file)
	binary.LittleEndian.PutUint32(bad[28+4:], 13) // IDB length not a multiple of 4
	got, err := io.ReadAll(&ngGuard{r: bytes.NewReader(bad)})
	require.ErrorIs(t, err, errCorruptNg)
	require.Equal(t, file[:28], got, "the bad block header is not handed on")

	big := slices.Clone(file)
	binary.LittleEndian.PutUint32(big[28+12:], 0x30303030) // IDB snap length 808 MB
	got, err = io.ReadAll(&ngGuard{r: bytes.NewReader(big)})
	require.NoError(t, err)
	require.Equal(t, uint32(maxSnaplen), binary.LittleEndian.Uint32(got[28+12:]), "lowered for pcapgo")
	require.Equal(t, file[:28+12], got[:28+12])
	require.Equal(t, file[28+16:], got[28+16:])

	bad = slices.Clone(file)
	binary.LittleEndian.PutUint32(bad[28+32+20:], 1000) // EPB captured length beyond the block
	got, err = io.ReadAll(&ngGuard{r: bytes.NewReader(bad)})
	require.ErrorIs(t, err, errCorruptNg)
	require.Equal(t, file[:28+32], got)
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "packet: truncated", "q\"b\\s\x00\x1f\n", "\xff\xfe", "é→"} {
		b := appendJSONString(nil, s)
		require.True(t, json.Valid(b), "%q → %s", s, b)
		var back string
		require.NoError(t, json.Unmarshal(b, &back))
		if s != "\xff\xfe" {
			require.Equal(t, s, back)
		}
	}
}

// FuzzDecodeFrame: any bytes, any supported link type, decoded and printed
// in every format, never panic, and the JSON is always valid; a split
// datagram's segments tile its payload, each with a valid ICRC, and a
// datagram that does not parse as one packet is RoCE only when split; a
// RoCE packet cut by a snap length is the same packet, truncated, never
// malformed (checkCut).
func FuzzDecodeFrame(f *testing.F) {
	lts := []LinkType{packet.LinkEthernet, packet.LinkSLL, packet.LinkSLL2, packet.LinkRaw, packet.LinkNull, packet.LinkLoop, packet.LinkIPv4, packet.LinkIPv6}
	for _, fr := range readPcap(f, scapyPcap) {
		f.Add(fr.data, uint8(0))
		f.Add(fr.data[14:], uint8(3))
	}
	for _, fr := range readPcap(f, cx4Pcap) {
		f.Add(fr.data, uint8(0))
	}
	f.Add(cat(be16(0x0800), make([]byte, 18), scapyFrame(f, 65)[14:]), uint8(2))
	ph := packet.PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 1, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	f.Add(gsoDatagram(f, ph, []int{256, 256, 100}, func(i int) uint16 { return uint16(i) }), uint8(0))
	// Three READ requests back to back: no payload, so the datagram does
	// not parse as one packet.
	var reads []gsoSegment
	for i := range 3 {
		reads = append(reads, gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAReadRequest, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: packet.PSN(i)},
			RETH: packet.RETHFields{VA: 0x1000, RKey: 7, DMALen: 64}}})
	}
	f.Add(gsoFrame(f, ph, reads, func(i int) uint16 { return uint16(i) }), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, sel uint8) {
		lt := lts[int(sel)%len(lts)]
		fr := Frame{Num: 1, CapLen: len(data), OrigLen: len(data) + int(sel&1)}
		DecodeFrame(&fr, data, lt, Ports{packet.UDPPort, 53})
		if fr.Kind == KindOther {
			return
		}
		if fr.Kind == KindMalformed {
			require.Error(t, fr.Err)
		}
		if _, err := packet.Parse(fr.Datagram.Payload); fr.Kind == KindRoCE && err != nil {
			require.GreaterOrEqual(t, fr.Segments, 2, "a datagram that is not one packet is RoCE only when split")
		}
		if fr.Segments > 0 && fr.CapLen == fr.OrigLen {
			// The segments tile the UDP payload, each checked.
			var all []byte
			for i := range fr.Segments {
				fr.setSegment(i)
				require.True(t, fr.ICRCOK)
				_, err := packet.Parse(fr.Packet.Bytes())
				require.NoError(t, err, "each segment is a RoCE packet (of any QP: GRO merges a UDP flow)")
				all = append(all, fr.Packet.Bytes()...)
			}
			require.GreaterOrEqual(t, fr.Segments, 2)
			require.Equal(t, fr.Datagram.Payload, all)
		}
		j := AppendJSON(nil, &fr)
		require.True(t, json.Valid(j), "%s", j)
		AppendText(nil, &fr, []byte("0.000000"), false)
		AppendText(nil, &fr, []byte("0.000000"), true)
		if fr.Kind == KindRoCE && fr.Segments == 0 && fr.CapLen == fr.OrigLen {
			checkCut(t, &fr, data, lt, int(sel>>1))
		}
	})
}

// checkCut checks a property of frames cut by a capture's snap length:
// whole.Kind is KindRoCE for the frame data; the same frame with only its
// first bytes captured (how many depends on k) is never malformed, and
// when the capture holds its BTH it is the same packet, truncated, with
// the same headers and payload length.
func checkCut(t *testing.T, whole *Frame, data []byte, lt LinkType, k int) {
	n := len(data) * k / 128
	cut := Frame{Num: 1, CapLen: n, OrigLen: len(data)}
	DecodeFrame(&cut, data[:n], lt, Ports{packet.UDPPort, 53})
	require.NotEqual(t, KindMalformed, cut.Kind, "a cut frame is not malformed: %v", cut.Err)
	require.False(t, cut.Kind == KindRoCE && !cut.Truncated && !cut.ICRCOK && cut.Segments == 0 && whole.ICRCOK, "a cut packet is not of a bad ICRC")
	if cut.Kind != KindRoCE || cut.Segments > 0 {
		return
	}
	require.Equal(t, whole.Packet.BTH().Fields(), cut.Packet.BTH().Fields())
	require.Equal(t, whole.Packet.PayloadLen(), cut.Packet.PayloadLen())
	require.Equal(t, whole.Packet.Len(), cut.Packet.Len())
	if cut.Truncated {
		require.Less(t, cut.Captured, cut.Packet.Len())
		require.Equal(t, whole.Packet.Bytes()[:cut.Captured], cut.Packet.Bytes()[:cut.Captured])
		for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
			if cut.Packet.Mask()&h.Mask() != 0 && cut.HeaderCaptured(h) {
				require.Equal(t, whole.Packet.Header(h), cut.Packet.Header(h))
			}
		}
	}
	require.True(t, json.Valid(AppendJSON(nil, &cut)))
	AppendText(nil, &cut, []byte("0.000000"), true)
}

// FuzzNgGuard: the pcapng block follower survives any byte stream, and
// what it hands on is the stream's first blocks as they are, except the
// snap length of an Interface Description Block above maxSnaplen, which
// reads maxSnaplen; every packet block it hands on has a captured length
// within its block and within maxSnaplen. It ends as its doc says: with
// io.EOF (ReadAll's nil) only when the stream ends between blocks, having
// handed on all of it; with io.ErrUnexpectedEOF when the stream ends
// inside a block; with errCorruptNg, before handing on the header, when a
// block's header has impossible lengths.
func FuzzNgGuard(f *testing.F) {
	whole := pcapngBytes(276, readPcap(f, cx4Pcap))
	f.Add(whole, uint8(5))
	f.Add([]byte{0x0A, 0x0D, 0x0D, 0x0A, 0, 0, 0, 0, 0x4D, 0x3C, 0x2B, 0x1A}, uint8(1))
	big := slices.Clone(whole)
	binary.LittleEndian.PutUint32(big[28+12:], 0x30303030)
	f.Add(big, uint8(7))
	// Ends inside the last block's body, inside its header just after
	// the type and length (more is wanted of an EPB); an EPB whose
	// captured length exceeds its block.
	f.Add(whole[:len(whole)-3], uint8(64))
	f.Add(whole[:len(whole)-int(binary.LittleEndian.Uint32(whole[len(whole)-4:]))+8], uint8(64))
	epb := slices.Clone(whole)
	last := len(epb) - int(binary.LittleEndian.Uint32(epb[len(epb)-4:]))
	binary.LittleEndian.PutUint32(epb[last+20:], binary.LittleEndian.Uint32(epb[last+4:]))
	f.Add(epb, uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		got, err := io.ReadAll(&ngGuard{r: &chunkReader{b: data, n: max(int(chunk), 1)}})
		require.LessOrEqual(t, len(got), len(data))
		end := checkNgGuarded(t, data, got)
		rest := len(data) - end // bytes after the last block handed on whole
		switch {
		case err == nil:
			require.Equal(t, len(data), len(got), "a clean end hands on the whole stream")
			require.Zero(t, rest, "a clean end is between blocks")
		case errors.Is(err, io.ErrUnexpectedEOF):
			inBody := len(got) == len(data) && rest < 0
			inHeader := len(got) == end && rest > 0 && rest < 28
			require.True(t, inBody || inHeader, "the stream ends inside a block: got %d of %d bytes, blocks end at %d", len(got), len(data), end)
		case errors.Is(err, errCorruptNg):
			require.Equal(t, end, len(got), "the corrupt block's header is not handed on")
			require.GreaterOrEqual(t, rest, 8, "a corrupt block's type and length were read")
		default:
			require.Fail(t, "unexpected error", "%v", err)
		}
	})
}

// checkNgGuarded walks the blocks of data that ngGuard handed on as got
// and checks got against them (see FuzzNgGuard). It returns where the
// last block handed on, whole or in part, ends in data.
func checkNgGuarded(t *testing.T, data, got []byte) int {
	var o binary.ByteOrder = binary.LittleEndian
	pos := 0
	for pos < len(got) {
		require.GreaterOrEqual(t, len(data)-pos, 8, "a block header at %d is handed on whole", pos)
		h := data[pos:]
		if binary.LittleEndian.Uint32(h) == ngBlockSHB {
			require.GreaterOrEqual(t, len(h), 12)
			o = binary.ByteOrder(binary.LittleEndian)
			if binary.BigEndian.Uint32(h[8:]) == ngBOM {
				o = binary.BigEndian
			}
		}
		typ, length := o.Uint32(h), int(o.Uint32(h[4:]))
		require.GreaterOrEqual(t, length, 12, "block at %d", pos)
		end := min(pos+length, len(got))
		want := slices.Clone(data[pos:end])
		switch typ {
		case ngBlockIDB:
			if snap := o.Uint32(h[12:]); snap > maxSnaplen && len(want) >= 16 {
				o.PutUint32(want[12:], maxSnaplen)
			}
		case ngBlockEPB, ngBlockPB:
			require.GreaterOrEqual(t, len(h), 28)
			caplen := int(o.Uint32(h[20:]))
			require.LessOrEqual(t, caplen, length-32, "EPB at %d", pos)
			require.LessOrEqual(t, caplen, maxSnaplen, "EPB at %d", pos)
		}
		require.Equal(t, want, got[pos:end], "block at %d", pos)
		pos += length
	}
	return pos
}
