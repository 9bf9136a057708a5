package layers

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// FuzzDecodeBTH: decoding any bytes from LayerTypeBTH, with gopacket's
// panic recovery off, never panics; the verdict and the values agree with
// packet.Parse; and what decodes serializes back to what packet's encoders
// make of the parsed headers.
func FuzzDecodeBTH(f *testing.F) {
	for _, s := range samples(0) {
		b := make([]byte, 512)
		n, err := packet.Build(b, &s.h, s.payload, &ph4)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:n])
	}
	// Header bits the samples leave zero, which a decoded layer must
	// write back as received: the AETH syndrome's reserved bit 7 (IBA
	// 9.3.5) and the FETH's reserved bits 31..6 (rxe_hdr.h).
	for _, h := range []packet.Headers{
		{BTH: packet.BTHFields{Opcode: packet.RCAcknowledge}, AETH: packet.AETHFields{Syndrome: 0x9F, MSN: 5}},
		{BTH: packet.BTHFields{Opcode: packet.RCFlush}, FETH: 0xFFFFFFD1, RETH: packet.RETHFields{VA: 0x1000, RKey: 7}},
	} {
		b := make([]byte, 512)
		n, err := packet.Build(b, &h, nil, &ph4)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:n])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	var r RoCE
	var payload gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(LayerTypeBTH, append(r.DecodingLayers(), &payload)...)
	parser.IgnorePanic = true // let panics out
	var decoded []gopacket.LayerType
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each extension header decoded on its own (no BTH) takes its
		// size in bytes, or reports truncation, and hands the rest on as
		// payload.
		for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
			pkt := gopacket.NewPacket(b, hdrLayerType(h), gopacket.DecodeOptions{SkipDecodeRecovery: true})
			if len(b) < h.Size() {
				if pkt.ErrorLayer() == nil || pkt.ErrorLayer().Error() != packet.ErrTruncated || !pkt.Metadata().Truncated {
					t.Fatalf("%v of %d bytes: %v", hdrLayerType(h), len(b), pkt.ErrorLayer())
				}
				continue
			}
			ls := pkt.Layers()
			if pkt.ErrorLayer() != nil || len(ls) == 0 || ls[0].LayerType() != hdrLayerType(h) ||
				!bytes.Equal(ls[0].LayerContents(), b[:h.Size()]) || !bytes.Equal(ls[0].LayerPayload(), b[h.Size():]) ||
				len(ls) != 1+min(len(b)-h.Size(), 1) {
				t.Fatalf("%v alone: %v", hdrLayerType(h), pkt)
			}
		}
		pkt := gopacket.NewPacket(b, LayerTypeBTH, gopacket.DecodeOptions{SkipDecodeRecovery: true})
		derr := parser.DecodeLayers(b, &decoded)
		p, err := packet.Parse(b)
		if err != nil {
			if pkt.ErrorLayer() == nil || pkt.ErrorLayer().Error() != err || derr != err {
				t.Fatalf("Parse: %v; NewPacket: %v; parser: %v", err, pkt.ErrorLayer(), derr)
			}
			return
		}
		if pkt.ErrorLayer() != nil || derr != nil {
			t.Fatalf("Parse accepts; NewPacket: %v; parser: %v", pkt.ErrorLayer(), derr)
		}
		var ls []gopacket.SerializableLayer
		for _, l := range pkt.Layers() {
			ls = append(ls, l.(gopacket.SerializableLayer))
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...); err != nil {
			t.Fatal(err)
		}
		// Headers as parsed (reserved bits outside the BTH zero), the
		// payload, PadCnt zero bytes (Parse accepts a pad that leaves the
		// datagram unaligned, as rxe does), the ICRC as received.
		want := make([]byte, len(b))
		h := p.Headers()
		n, err := h.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		n += copy(want[n:], p.Payload())
		n += p.PadCnt() + packet.ICRCSize
		if n != len(b) {
			t.Fatalf("length %d, want %d", n, len(b))
		}
		binary.LittleEndian.PutUint32(want[n-4:], p.ICRC())
		if !bytes.Equal(want, buf.Bytes()) {
			t.Fatalf("re-serialized\n%x\nwant\n%x", buf.Bytes(), want)
		}
		if r.BTH.Fields() != p.BTH().Fields() || !bytes.Equal(payload, p.Payload()) && len(p.Payload()) > 0 {
			t.Fatalf("parser decoded %+v %x", r.BTH.Fields(), []byte(payload))
		}
	})
}

// FuzzDecodeFrame: decoding any bytes as an Ethernet frame never panics in
// this package; CheckICRC's verdict is packet's (ParseFrame, ICRCOK); and
// FixICRC either fails as CheckICRC does and changes nothing, or changes
// only the ICRC and a non-zero UDP checksum, after which both check. NewPacket keeps gopacket's panic recovery on, because some
// of gopacket v1.1.19's own decoders panic on bad input (IPsec ESP, for
// one); a recovered panic fails the test only if its stack passes through
// this package. The parser has only our layers and gopacket's Ethernet,
// Dot1Q, Linux SLL, IP and UDP, and its recovery is off.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range samples(0) {
		f.Add(buildFrame(f, &ph4, &s.h, s.payload, true))
		f.Add(buildFrame(f, &ph6, &s.h, s.payload, false))
	}
	// Frames FixICRC has work on: an IPv4 one without a UDP checksum and
	// IPv4 and IPv6 ones with a stale ICRC (and UDP checksum).
	s := samples(0)[4]
	b := buildFrame(f, &ph4, &s.h, s.payload, true)
	f.Add(append(bytes.Clone(b[:headerLen(&ph4)-2]), append([]byte{0, 0}, b[headerLen(&ph4):]...)...))
	b[len(b)-1] ^= 0x5A
	f.Add(b)
	b = buildFrame(f, &ph6, &s.h, s.payload, true)
	b[len(b)-2] ^= 0x5A
	f.Add(b)
	ps := newParserSet(gplayers.LayerTypeEthernet)
	ps.parser.IgnorePanic = true
	f.Fuzz(func(t *testing.T, b []byte) {
		pkt := gopacket.NewPacket(b, gplayers.LayerTypeEthernet, gopacket.Default)
		if f, ok := pkt.ErrorLayer().(*gopacket.DecodeFailure); ok {
			for line := range strings.Lines(f.Dump()) {
				if strings.Contains(line, "gorxe/packet/layers.") && !strings.Contains(line, ".FuzzDecodeFrame") {
					t.Fatalf("panic: %v\n%s", f.Error(), f.Dump())
				}
			}
		}
		_ = ps.parser.DecodeLayers(b, &ps.decoded)

		// CheckICRC gives packet's verdict on the same datagram.
		cerr := CheckICRC(b, gplayers.LinkTypeEthernet)
		d, err := packet.ParseFrame(b, packet.LinkEthernet)
		if err == nil {
			_, err = d.ICRC()
		}
		switch {
		case err != nil:
			if cerr != err {
				t.Fatalf("CheckICRC: %v; ParseFrame/ICRC: %v", cerr, err)
			}
		case d.ICRCOK() != (cerr == nil) || cerr != nil && cerr != packet.ErrBadICRC:
			t.Fatalf("CheckICRC: %v; ICRCOK %v", cerr, d.ICRCOK())
		}

		// FixICRC changes nothing but the ICRC and a non-zero UDP
		// checksum, after which both check; or fails as CheckICRC did,
		// changing nothing.
		fixed := bytes.Clone(b)
		if ferr := FixICRC(fixed, gplayers.LinkTypeEthernet); ferr != nil {
			if ferr != err || !bytes.Equal(fixed, b) {
				t.Fatalf("FixICRC: %v (CheckICRC %v), frame changed %v", ferr, err, !bytes.Equal(fixed, b))
			}
			return
		}
		if err != nil {
			t.Fatalf("FixICRC fixed a frame CheckICRC refused: %v", err)
		}
		if cerr := CheckICRC(fixed, gplayers.LinkTypeEthernet); cerr != nil {
			t.Fatalf("CheckICRC after FixICRC: %v", cerr)
		}
		fd, err := packet.ParseFrame(fixed, packet.LinkEthernet)
		if err != nil {
			t.Fatal(err)
		}
		off := func(s []byte) int { // where s starts in fixed
			return int(uintptr(unsafe.Pointer(unsafe.SliceData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(fixed))))
		}
		icrc, csum := off(fd.Payload)+len(fd.Payload)-packet.ICRCSize, off(fd.UDPHeader)+6
		want := bytes.Clone(b)
		copy(want[icrc:icrc+packet.ICRCSize], fixed[icrc:])
		if binary.BigEndian.Uint16(b[csum:]) != 0 {
			if got := binary.BigEndian.Uint16(fixed[csum:]); got != fd.UDPChecksum() {
				t.Fatalf("UDP checksum %#04x after FixICRC, want %#04x", got, fd.UDPChecksum())
			}
			copy(want[csum:csum+2], fixed[csum:])
		}
		if !bytes.Equal(want, fixed) {
			t.Fatalf("FixICRC changed more than the ICRC and UDP checksum:\n%x\n%x", b, fixed)
		}
	})
}
