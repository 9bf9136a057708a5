package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func fuzzSeeds(f *testing.F) {
	for _, s := range samples() {
		buf := make([]byte, 512)
		n, err := Build(buf, &s.h, s.payload, &testPH)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf[:n])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
}

// FuzzParse: Parse never panics; it refuses exactly the packets its
// documented errors describe, each with an error whose condition holds;
// the accessors of what it accepts read the bytes, its layout is consistent,
// and re-encoding the decoded headers gives back the same header bytes
// (reserved bits outside the BTH and the CNP body excepted: we send zeros)
// and, with the same payload, a packet that parses to the same values.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	// One packet refused for each documented cause: a TVer of 1, a
	// reserved opcode, an ACK without its AETH, a pad count larger than
	// the payload, a pad count on an ACK, bytes after an ACK, and an
	// ATOMIC_WRITE of 4 bytes.
	bth := func(op Opcode, b1 byte, n int) []byte {
		b := make([]byte, n)
		b[0], b[1] = byte(op), b1
		return b
	}
	f.Add(bth(RCSendOnly, 0x01, BTHSize+ICRCSize))
	f.Add(bth(0x1F, 0, BTHSize+ICRCSize))
	f.Add(bth(RCAcknowledge, 0, BTHSize+ICRCSize))
	f.Add(bth(RCSendOnly, 0x30, BTHSize+2+ICRCSize))
	f.Add(bth(RCAcknowledge, 0x10, PacketLen(RCAcknowledge, 0)))
	f.Add(bth(RCAcknowledge, 0, PacketLen(RCAcknowledge, 0)+4))
	f.Add(bth(RCAtomicWrite, 0, PacketLen(RCAtomicWrite, 4)))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		causes := parseRefusals(b)
		if err != nil {
			for _, e := range causes {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("Parse(%x) = %v; the bytes justify only %v", b, err, causes)
		}
		if len(causes) != 0 {
			t.Fatalf("Parse(%x) accepted a packet it must refuse with %v", b, causes)
		}
		// The accessors read their fields from the bytes' places (IBTA
		// 9.2: opcode, pad count, destination QP, AckReq, PSN).
		if p.Opcode() != Opcode(b[0]) || p.PadCnt() != int(b[1]>>4&3) ||
			p.DestQP() != uint32(b[5])<<16|uint32(b[6])<<8|uint32(b[7]) || p.AckReq() != (b[8]&0x80 != 0) ||
			p.PSN() != PSN(uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])) || !bytes.Equal(p.Bytes(), b) {
			t.Fatalf("accessors disagree with the bytes %x", b[:BTHSize])
		}
		info := p.Info()
		if p.HeaderLen()+p.PayloadLen()+p.PadCnt()+ICRCSize != len(b) || p.PayloadLen() < 0 {
			t.Fatalf("inconsistent lengths: hdr %d payload %d pad %d len %d", p.HeaderLen(), p.PayloadLen(), p.PadCnt(), len(b))
		}
		if len(p.Payload()) != p.PayloadLen() || !info.Is(MaskPayload) && (p.PayloadLen() != 0 || p.PadCnt() != 0) {
			t.Fatalf("payload %d bytes, PayloadLen %d, pad %d, opcode %v", len(p.Payload()), p.PayloadLen(), p.PadCnt(), p.Opcode())
		}
		// Every header the opcode carries lies after the BTH and before the
		// payload, in the order of the Hdr constants, without overlap.
		end := BTHSize
		for h := Hdr(0); h < NumHdrs; h++ {
			if !info.Has(h) {
				if p.Header(h) != nil {
					t.Fatalf("%v: header %d not carried, yet returned", p.Opcode(), h)
				}
				continue
			}
			off := int(info.Offset[h])
			if off != end || off+h.Size() > p.HeaderLen() || len(p.Header(h)) != h.Size() {
				t.Fatalf("%v: header %d at %d+%d, previous end %d, headers end %d", p.Opcode(), h, off, h.Size(), end, p.HeaderLen())
			}
			end = off + h.Size()
		}
		if end != p.HeaderLen() {
			t.Fatalf("%v: headers end at %d, HeaderLen %d", p.Opcode(), end, p.HeaderLen())
		}
		h := p.Headers()
		h.BTH.PadCnt = uint8(p.PadCnt())
		out := make([]byte, len(b)+8)
		n, err := h.Encode(out)
		if err != nil || n != info.Length {
			t.Fatalf("encode: %d %v", n, err)
		}
		want := append([]byte(nil), b[:n]...)
		if info.Has(HdrRDETH) {
			want[info.Offset[HdrRDETH]] = 0
		}
		if info.Has(HdrDETH) {
			want[info.Offset[HdrDETH]+4] = 0
		}
		if info.Has(HdrCNP) {
			clear(want[info.Offset[HdrCNP] : int(info.Offset[HdrCNP])+CNPSize])
		}
		if !bytes.Equal(want, out[:n]) {
			t.Fatalf("header round trip:\n got %x\nwant %x", out[:n], want)
		}
		if p.PadCnt() != PadLen(p.PayloadLen()) {
			return // a legal but unusual pad count: Build always pads minimally
		}
		m, err := Build(out, &h, p.Payload(), &testPH)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		q, err := Parse(out[:m])
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if q.Headers() != p.Headers() || !bytes.Equal(q.Payload(), p.Payload()) {
			t.Fatalf("rebuilt packet differs")
		}
		if testPH.CheckICRC(out[:m]) != nil {
			t.Fatalf("rebuilt packet has a bad ICRC")
		}
	})
}

// parseRefusals returns every error Parse's documentation gives for b: the
// conditions of ErrTruncated, ErrBadTransportVersion, ErrUnknownOpcode,
// ErrBadPadding and ErrBadLength that hold of its bytes. Parse refuses b
// exactly when one holds, and then with one of them.
func parseRefusals(b []byte) []error {
	var errs []error
	if len(b) < BTHSize+ICRCSize {
		return []error{ErrTruncated}
	}
	op := Opcode(b[0])
	if b[1]&0x0F != 0 {
		errs = append(errs, ErrBadTransportVersion)
	}
	if !op.Valid() {
		return append(errs, ErrUnknownOpcode)
	}
	info := op.Info()
	area := len(b) - info.Length - ICRCSize // payload and pad
	if area < 0 {
		return append(errs, ErrTruncated)
	}
	pad := int(b[1] >> 4 & 3)
	if pad > area || pad != 0 && !info.Is(MaskPayload) {
		errs = append(errs, ErrBadPadding)
	}
	if area != 0 && !info.Is(MaskPayload) || info.Is(MaskAtomicWrite) && area-pad != 8 {
		errs = append(errs, ErrBadLength)
	}
	return errs
}

// FuzzParseIP: ParseIP and the ICRC over a captured IP header never panic;
// an accepted datagram's headers and payload lie in order inside b; and
// when the IP and UDP lengths say nothing more than the pseudo-header
// does (no IPv4 options, no bytes after the UDP datagram), the ICRC over
// the captured headers equals the ICRC over the pseudo-header.
func FuzzParseIP(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.ip)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseIP(b)
		if err != nil {
			return
		}
		hl, ul := len(d.IPHeader), len(d.UDPHeader)
		require.Equal(t, UDPHeaderSize, ul)
		require.LessOrEqual(t, hl+ul+len(d.Payload), len(b))
		require.True(t, bytes.Equal(b[:hl], d.IPHeader) && bytes.Equal(b[hl:hl+ul], d.UDPHeader) &&
			bytes.Equal(b[hl+ul:hl+ul+len(d.Payload)], d.Payload), "slices in order")
		require.Equal(t, ul+len(d.Payload), int(binary.BigEndian.Uint16(d.UDPHeader[4:])), "UDP length")
		crc, err := d.ICRC()
		pcrc, perr := d.Pseudo.ICRC(d.Payload)
		require.Equal(t, err, perr)
		plain := hl == IPv6HeaderSize && int(binary.BigEndian.Uint16(b[4:])) == ul+len(d.Payload)
		if d.Pseudo.Is4() {
			plain = hl == IPv4HeaderSize && int(binary.BigEndian.Uint16(b[2:])) == hl+ul+len(d.Payload)
		}
		if err == nil && plain {
			require.Equal(t, crc, pcrc, "ICRC over the captured headers and over the pseudo-header")
		}
		_ = d.ICRCOK()
		if p, err := Parse(d.Payload); err == nil {
			_ = p.Headers()
		}
	})
}

// FuzzBuild: Build either refuses the headers and payload with the error
// its rules give, or writes a packet that Parse accepts and that decodes to
// the same headers (fields cut to their widths, headers the opcode does not
// carry and reserved bits outside the BTH zero, the pad count computed from
// the payload), the same payload, and an ICRC that checks.
func FuzzBuild(f *testing.F) {
	for _, s := range samples() {
		f.Add(uint8(s.h.BTH.Opcode), uint8(0x55), uint8(0), uint32(s.h.BTH.DestQP), uint32(s.h.BTH.PSN), []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"), s.payload, false)
	}
	f.Add(uint8(RCSendOnly), uint8(0), uint8(1), uint32(1), uint32(2), []byte{}, []byte("x"), true)
	big := make([]byte, 4096+5) // a full-MTU payload and more: the fold's blocks
	for i := range big {
		big[i] = byte(i * 7)
	}
	f.Add(uint8(RCRDMAWriteFirst), uint8(0), uint8(0), uint32(3), uint32(4), []byte{}, big, false)
	v6 := PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 0xC000, DstPort: UDPPort}
	f.Fuzz(func(t *testing.T, op, flags, tver uint8, qpn, psn uint32, fields, payload []byte, ipv6 bool) {
		var raw [96]byte
		copy(raw[:], fields)
		be := binary.BigEndian
		h := Headers{
			BTH: BTHFields{Opcode: Opcode(op), SE: flags&1 != 0, MigReq: flags&2 != 0, PadCnt: flags >> 2 & 3,
				TVer: tver, PKey: be.Uint16(raw[0:]), FECN: flags&0x10 != 0, BECN: flags&0x20 != 0,
				Resv6a: raw[2], DestQP: qpn, AckReq: flags&0x40 != 0, Resv7: raw[3], PSN: PSN(psn)},
			RDETH:     be.Uint32(raw[4:]),
			DETH:      DETHFields{QKey: be.Uint32(raw[8:]), SrcQP: be.Uint32(raw[12:])},
			FETH:      be.Uint32(raw[16:]),
			RETH:      RETHFields{VA: be.Uint64(raw[20:]), RKey: be.Uint32(raw[28:]), DMALen: be.Uint32(raw[32:])},
			AtomicETH: AtomicETHFields{VA: be.Uint64(raw[36:]), RKey: be.Uint32(raw[44:]), SwapAdd: be.Uint64(raw[48:]), Compare: be.Uint64(raw[56:])},
			AETH:      AETHFields{Syndrome: Syndrome(raw[64]), MSN: be.Uint32(raw[65:])},
			AtomicAck: be.Uint64(raw[69:]),
			Imm:       be.Uint32(raw[77:]),
			IETH:      be.Uint32(raw[81:]),
		}
		ph := &testPH
		if ipv6 {
			ph = &v6
		}
		buf := make([]byte, len(payload)+128)
		n, err := Build(buf, &h, payload, ph)
		info := Opcode(op).Info()
		switch {
		case !Opcode(op).Valid():
			require.ErrorIs(t, err, ErrUnknownOpcode)
			return
		case h.BTH.TVer&0x0F != 0:
			require.ErrorIs(t, err, ErrBadTransportVersion)
			return
		case len(payload) > 0 && !info.Is(MaskPayload), info.Is(MaskAtomicWrite) && len(payload) != 8:
			require.ErrorIs(t, err, ErrBadLength)
			return
		}
		require.NoError(t, err)
		require.Equal(t, PacketLen(Opcode(op), len(payload)), n)
		p, err := Parse(buf[:n])
		require.NoError(t, err, "Parse(Build(x))")
		require.NoError(t, ph.CheckICRC(buf[:n]))
		// The same packet with its payload copied in, in two pieces, while
		// the ICRC is computed (StartICRC, ICRCCopy, SealICRC), with an
		// ICRCPrefix that has seen another flow first.
		var c ICRCPrefix
		c.Start(&v6, buf[:BTHSize], 300)
		buf2 := make([]byte, len(buf))
		for i := range buf2 {
			buf2[i] = 0xA5 // a reused buffer: SealICRC zeroes the pad itself
		}
		fr, err := Begin(buf2, &h, len(payload), ph)
		require.NoError(t, err)
		crc := fr.StartICRC(&c)
		cut := len(payload) / 3
		crc = ICRCCopy(crc, fr.Payload(), payload[:cut])
		crc = ICRCCopy(crc, fr.Payload()[cut:], payload[cut:])
		require.Equal(t, n, fr.SealICRC(crc))
		require.True(t, bytes.Equal(buf[:n], buf2[:n]), "StartICRC, ICRCCopy and SealICRC build what Build does")
		require.Equal(t, len(payload), p.PayloadLen())
		require.True(t, bytes.Equal(payload, p.Payload()))

		want := h
		want.BTH.PadCnt = uint8(PadLen(len(payload)))
		want.BTH.TVer &= 0x0F
		want.BTH.Resv6a &= 0x3F
		want.BTH.Resv7 &= 0x7F
		want.BTH.DestQP &= QPNMask
		want.BTH.PSN &= PSNMask
		want.RDETH &= 0xFFFFFF
		want.DETH.SrcQP &= QPNMask
		want.AETH.MSN &= 0xFFFFFF
		zeroAbsent(&want, info)
		require.Equal(t, want, p.Headers())
	})
}
