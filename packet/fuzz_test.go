package packet

import (
	"bytes"
	"testing"
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

// FuzzParse: Parse never panics; what it accepts has a consistent layout,
// and re-encoding the decoded headers gives back the same header bytes
// (reserved bits outside the BTH and the CNP body excepted: we send zeros)
// and, with the same payload, a packet that parses to the same values.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		info := p.Info()
		if p.HeaderLen()+p.PayloadLen()+p.PadCnt()+ICRCSize != len(b) || p.PayloadLen() < 0 {
			t.Fatalf("inconsistent lengths: hdr %d payload %d pad %d len %d", p.HeaderLen(), p.PayloadLen(), p.PadCnt(), len(b))
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

// FuzzParseIP: ParseIP and the ICRC over a captured IP header never panic.
func FuzzParseIP(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.ip)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseIP(b)
		if err != nil {
			return
		}
		_ = d.ICRCOK()
		_, _ = d.Pseudo.ICRC(d.Payload)
		if p, err := Parse(d.Payload); err == nil {
			_ = p.Headers()
		}
	})
}
