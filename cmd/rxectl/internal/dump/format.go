package dump

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorxe/gorxe/packet"
)

// timeMode selects how the text format shows a frame's timestamp.
type timeMode uint8

const (
	timeRel   timeMode = iota // seconds since the first frame of the file (Wireshark's default, tcpdump -ttttt)
	timeAbs                   // UTC date and time, RFC 3339
	timeEpoch                 // seconds since 1970 (tcpdump -tt)
)

// parseTimeMode parses the value of --time.
func parseTimeMode(s string) (timeMode, bool) {
	switch s {
	case "rel", "relative":
		return timeRel, true
	case "abs", "absolute":
		return timeAbs, true
	case "epoch":
		return timeEpoch, true
	}
	return 0, false
}

// appendTime appends ts in mode m, relative to first for timeRel, with
// microsecond or (nano) nanosecond digits.
func appendTime(b []byte, ts, first time.Time, m timeMode, nano bool) []byte {
	digits, unit := 6, int64(time.Microsecond)
	if nano {
		digits, unit = 9, 1
	}
	switch m {
	case timeAbs:
		layout := "2006-01-02T15:04:05.000000Z07:00"
		if nano {
			layout = "2006-01-02T15:04:05.000000000Z07:00"
		}
		return ts.UTC().AppendFormat(b, layout)
	case timeEpoch:
		return appendSeconds(b, ts.Unix(), int64(ts.Nanosecond())/unit, digits)
	}
	d := ts.Sub(first)
	if d < 0 { // out-of-order timestamps happen in merged captures
		b = append(b, '-')
		d = -d
	}
	return appendSeconds(b, int64(d/time.Second), int64(d%time.Second)/unit, digits)
}

// appendSeconds appends sec.frac with frac zero-padded to digits.
func appendSeconds(b []byte, sec, frac int64, digits int) []byte {
	b = strconv.AppendInt(b, sec, 10)
	b = append(b, '.')
	f := strconv.FormatInt(frac, 10)
	for range digits - len(f) {
		b = append(b, '0')
	}
	return append(b, f...)
}

// appendHex appends 0x and v in lower-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	b = append(b, "0x"...)
	var tmp [16]byte
	s := strconv.AppendUint(tmp[:0], v, 16)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// appendBit appends 1 or 0.
func appendBit(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// AppendText appends the human-readable report of a RoCEv2 or malformed
// frame: one line, then with verbose every header field and a hex dump.
// ts is the already formatted timestamp.
func AppendText(b []byte, f *Frame, ts []byte, verbose bool) []byte {
	b = appendPadInt(b, f.Num, 5)
	b = append(b, ' ')
	b = append(b, ts...)
	b = append(b, ' ')
	b = appendEndpoint(b, f.Src)
	b = append(b, " → "...)
	b = appendEndpoint(b, f.Dst)
	switch f.Kind {
	case KindMalformed:
		return appendMalformed(b, f, verbose)
	case KindCut:
		return appendCutFrame(b, f, verbose)
	}
	p := &f.Packet
	bth := p.BTH()
	b = append(b, ' ')
	b = append(b, p.Opcode().String()...)
	b = append(b, " qp="...)
	b = appendHex(b, uint64(bth.DestQP()), 6)
	b = append(b, " psn="...)
	b = strconv.AppendUint(b, uint64(bth.PSN()), 10)
	if bth.SE() {
		b = append(b, " SE"...)
	}
	if bth.MigReq() {
		b = append(b, " M"...)
	}
	if bth.AckReq() {
		b = append(b, " AckReq"...)
	}
	if bth.FECN() {
		b = append(b, " FECN"...)
	}
	if bth.BECN() {
		b = append(b, " BECN"...)
	}
	if pk := bth.PKey(); pk != packet.DefaultPKey {
		b = append(b, " pkey="...)
		b = appendHex(b, uint64(pk), 4)
	}
	b = appendExtHeaders(b, f, ' ')
	if p.Mask()&packet.MaskPayload != 0 {
		b = append(b, " payload="...)
		b = strconv.AppendInt(b, int64(p.PayloadLen()), 10)
	}
	b = appendCM(b, f)
	b = appendICRC(b, f)
	if f.Segments > 0 {
		b = append(b, " (segment "...)
		b = strconv.AppendInt(b, int64(f.Segment), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(f.Segments), 10)
		b = append(b, " in one UDP datagram: GSO/GRO"...)
		if f.Segment == len(f.segs) && f.uncaptured > 0 {
			b = append(b, "; the capture holds none of the "...)
			b = strconv.AppendInt(b, int64(f.uncaptured), 10)
			b = append(b, " after it"...)
		}
		b = append(b, ')')
	}
	b = append(b, '\n')
	if verbose {
		b = appendVerbose(b, f)
	}
	return b
}

// appendMalformed appends the rest of a malformed frame's line: the
// reason and, with verbose, the IP and UDP fields and a hex dump.
func appendMalformed(b []byte, f *Frame, verbose bool) []byte {
	b = append(b, " MALFORMED: "...)
	b = append(b, f.Err.Error()...)
	raw := f.IP
	if f.Datagram.UDPHeader != nil {
		raw = f.Datagram.Payload
		b = append(b, " ("...)
		b = strconv.AppendInt(b, int64(len(raw)), 10)
		if len(raw) == 1 {
			b = append(b, " byte)"...)
		} else {
			b = append(b, " bytes)"...)
		}
	}
	b = append(b, '\n')
	if verbose {
		b = appendVerboseIP(b, f)
		b = appendHexDump(b, raw)
		b = append(b, '\n')
	}
	return b
}

// appendVerbose appends the verbose lines of a RoCE packet: every header
// field, the payload, pad and ICRC figures, and a hex dump.
func appendVerbose(b []byte, f *Frame) []byte {
	p := &f.Packet
	b = appendVerboseIP(b, f)
	b = appendVerboseBTH(b, p)
	b = appendExtHeaders(b, f, '\n')
	b = append(b, "\n      payload="...)
	b = strconv.AppendInt(b, int64(p.PayloadLen()), 10)
	b = append(b, " pad="...)
	b = strconv.AppendInt(b, int64(p.PadCnt()), 10)
	if f.Truncated {
		b = append(b, " icrc=(not captured)\n      captured "...)
		b = strconv.AppendInt(b, int64(f.Captured), 10)
		b = append(b, " of the packet's "...)
		b = strconv.AppendInt(b, int64(p.Len()), 10)
		b = append(b, " bytes:\n"...)
		b = appendHexDump(b, p.Bytes()[:f.Captured])
		return append(b, '\n')
	}
	b = append(b, " icrc="...)
	b = appendHex(b, uint64(p.ICRC()), 8)
	b = append(b, " want="...)
	b = appendHex(b, uint64(f.WantICRC), 8)
	b = append(b, '\n')
	b = appendHexDump(b, p.Bytes())
	return append(b, '\n')
}

// appendCutNote appends how much of the frame f the capture holds:
// captured and on-the-wire lengths.
func appendCutNote(b []byte, f *Frame) []byte {
	b = append(b, " TRUNCATED by the capture ("...)
	b = strconv.AppendInt(b, int64(f.CapLen), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(f.OrigLen), 10)
	return append(b, " bytes captured"...)
}

// appendCutFrame appends the rest of the line of a KindCut frame, and
// with verbose the IP and UDP fields and a hex dump of what was captured.
func appendCutFrame(b []byte, f *Frame, verbose bool) []byte {
	b = appendCutNote(b, f)
	if f.Datagram.UDPHeader == nil {
		b = append(b, "): it ends inside the IP or UDP header, no RoCE header to decode\n"...)
	} else {
		b = append(b, "): it ends before the end of the BTH ("...)
		b = strconv.AppendInt(b, int64(max(f.Captured, 0)), 10)
		b = append(b, " of the "...)
		b = strconv.AppendInt(b, int64(len(f.Datagram.Payload)), 10)
		b = append(b, "-byte RoCE packet), no RoCE header to decode\n"...)
	}
	if verbose {
		b = appendVerboseIP(b, f)
		b = appendHexDump(b, f.IP)
		b = append(b, '\n')
	}
	return b
}

// hdrNames names the extension headers in the text format.
var hdrNames = [packet.NumHdrs]string{"RDETH", "DETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "CNP"}

// appendICRC appends the ICRC verdict; for a packet the capture cut
// short, what it holds and what could not be checked.
func appendICRC(b []byte, f *Frame) []byte {
	if f.Truncated {
		b = appendCutNote(b, f)
		p := &f.Packet
		b = append(b, "): "...)
		if f.Merged {
			b = append(b, "several RoCE packets in one UDP datagram (GSO/GRO: a payload beyond "...)
			b = strconv.AppendInt(b, maxPMTU, 10)
			b = append(b, " bytes), only the first one's headers captured; "...)
		}
		n := 0
		for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
			if p.Mask()&h.Mask() == 0 || f.HeaderCaptured(h) {
				continue
			}
			if n++; n > 1 {
				b = append(b, ", "...)
			}
			b = append(b, hdrNames[h]...)
		}
		if n > 0 {
			b = append(b, " not captured; "...)
		}
		if p.PayloadLen() > 0 && f.Captured < p.HeaderLen()+p.PayloadLen() {
			b = append(b, "payload and "...)
		}
		return append(b, "ICRC not checked"...)
	}
	if f.ICRCOK {
		return append(b, " ICRC ok"...)
	}
	b = append(b, " ICRC BAD (wire "...)
	b = appendHex(b, uint64(f.Packet.ICRC()), 8)
	b = append(b, " want "...)
	b = appendHex(b, uint64(f.WantICRC), 8)
	return append(b, ')')
}

// appendExtHeaders appends the extension headers of p in wire order, each
// preceded by sep (a space on the summary line; a newline and an indent in
// verbose mode).
func appendExtHeaders(b []byte, f *Frame, sep byte) []byte {
	p := &f.Packet
	start := func(b []byte, name string) []byte {
		b = append(b, sep)
		if sep == '\n' {
			b = append(b, "      "...)
		}
		return append(b, name...)
	}
	if h := p.RDETH(); h != nil && f.HeaderCaptured(packet.HdrRDETH) {
		b = start(b, "rdeth eec=")
		b = appendHex(b, uint64(h.EEC()), 6)
	}
	if h := p.DETH(); h != nil && f.HeaderCaptured(packet.HdrDETH) {
		b = start(b, "deth qkey=")
		b = appendHex(b, uint64(h.QKey()), 8)
		b = append(b, " srcqp="...)
		b = appendHex(b, uint64(h.SrcQP()), 6)
	}
	if h := p.FETH(); h != nil && f.HeaderCaptured(packet.HdrFETH) {
		b = start(b, "feth sel=")
		b = strconv.AppendUint(b, uint64(h.SelectivityLevel()), 10)
		b = append(b, " plt="...)
		b = strconv.AppendUint(b, uint64(h.PlacementType()), 10)
	}
	if h := p.RETH(); h != nil && f.HeaderCaptured(packet.HdrRETH) {
		b = start(b, "reth va=")
		b = appendHex(b, h.VA(), 0)
		b = append(b, " rkey="...)
		b = appendHex(b, uint64(h.RKey()), 0)
		b = append(b, " len="...)
		b = strconv.AppendUint(b, uint64(h.DMALen()), 10)
	}
	if h := p.AtomicETH(); h != nil && f.HeaderCaptured(packet.HdrAtomicETH) {
		b = start(b, "atomic va=")
		b = appendHex(b, h.VA(), 0)
		b = append(b, " rkey="...)
		b = appendHex(b, uint64(h.RKey()), 0)
		b = append(b, " swap_add="...)
		b = appendHex(b, h.SwapAdd(), 0)
		b = append(b, " compare="...)
		b = appendHex(b, h.Compare(), 0)
	}
	if h := p.AETH(); h != nil && f.HeaderCaptured(packet.HdrAETH) {
		b = start(b, "aeth ")
		if sep == '\n' {
			b = append(b, "syndrome="...)
			b = appendHex(b, uint64(h.Syndrome()), 2)
			b = append(b, ' ')
		}
		b = append(b, h.Syndrome().String()...)
		b = append(b, " msn="...)
		b = strconv.AppendUint(b, uint64(h.MSN()), 10)
	}
	if h := p.AtomicAckETH(); h != nil && f.HeaderCaptured(packet.HdrAtomicAckETH) {
		b = start(b, "orig=")
		b = appendHex(b, h.Orig(), 0)
	}
	if h := p.ImmDt(); h != nil && f.HeaderCaptured(packet.HdrImmDt) {
		b = start(b, "imm=")
		b = appendHex(b, uint64(h.Imm()), 8)
	}
	if h := p.IETH(); h != nil && f.HeaderCaptured(packet.HdrIETH) {
		b = start(b, "ieth rkey=")
		b = appendHex(b, uint64(h.RKey()), 0)
	}
	return b
}

// appendVerboseIP appends the IP and UDP header fields of f, as far as
// they were captured.
func appendVerboseIP(b []byte, f *Frame) []byte {
	ip := f.IP
	switch {
	case len(ip) >= packet.IPv4HeaderSize && ip[0]>>4 == 4:
		fl := binary.BigEndian.Uint16(ip[6:])
		b = append(b, "      ipv4 ihl="...)
		b = strconv.AppendInt(b, int64(ip[0]&0x0F)*4, 10)
		b = append(b, " tos="...)
		b = appendHex(b, uint64(ip[1]), 2)
		b = append(b, " len="...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(ip[2:])), 10)
		b = append(b, " id="...)
		b = appendHex(b, uint64(binary.BigEndian.Uint16(ip[4:])), 4)
		b = append(b, " flags="...)
		switch {
		case fl&0xE000 == 0:
			b = append(b, "none"...)
		default:
			var names []string
			if fl&0x8000 != 0 {
				names = append(names, "RES")
			}
			if fl&packet.IPv4FlagDF != 0 {
				names = append(names, "DF")
			}
			if fl&0x2000 != 0 {
				names = append(names, "MF")
			}
			b = append(b, strings.Join(names, "|")...)
		}
		b = append(b, " frag="...)
		b = strconv.AppendUint(b, uint64(fl&0x1FFF)*8, 10)
		b = append(b, " ttl="...)
		b = strconv.AppendUint(b, uint64(ip[8]), 10)
		b = append(b, " proto="...)
		b = strconv.AppendUint(b, uint64(ip[9]), 10)
		b = append(b, " csum="...)
		b = appendHex(b, uint64(binary.BigEndian.Uint16(ip[10:])), 4)
		b = append(b, '\n')
	case len(ip) >= packet.IPv6HeaderSize && ip[0]>>4 == 6:
		w := binary.BigEndian.Uint32(ip)
		b = append(b, "      ipv6 tc="...)
		b = appendHex(b, uint64(w>>20&0xFF), 2)
		b = append(b, " flow="...)
		b = appendHex(b, uint64(w&0xFFFFF), 5)
		b = append(b, " plen="...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(ip[4:])), 10)
		b = append(b, " next="...)
		b = strconv.AppendUint(b, uint64(ip[6]), 10)
		b = append(b, " hlim="...)
		b = strconv.AppendUint(b, uint64(ip[7]), 10)
		b = append(b, '\n')
	default:
		return b
	}
	if u := f.Datagram.UDPHeader; len(u) >= packet.UDPHeaderSize {
		b = append(b, "      udp sport="...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(u)), 10)
		b = append(b, " dport="...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(u[2:])), 10)
		b = append(b, " len="...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(u[4:])), 10)
		b = append(b, " csum="...)
		b = appendHex(b, uint64(binary.BigEndian.Uint16(u[6:])), 4)
		b = append(b, '\n')
	}
	return b
}

// appendVerboseBTH appends every BTH field, reserved ones included.
func appendVerboseBTH(b []byte, p *packet.Packet) []byte {
	h := p.BTH().Fields()
	b = append(b, "      bth opcode="...)
	b = appendHex(b, uint64(h.Opcode), 2)
	b = append(b, " se="...)
	b = appendBit(b, h.SE)
	b = append(b, " m="...)
	b = appendBit(b, h.MigReq)
	b = append(b, " pad="...)
	b = strconv.AppendUint(b, uint64(h.PadCnt), 10)
	b = append(b, " tver="...)
	b = strconv.AppendUint(b, uint64(h.TVer), 10)
	b = append(b, " pkey="...)
	b = appendHex(b, uint64(h.PKey), 4)
	b = append(b, " fecn="...)
	b = appendBit(b, h.FECN)
	b = append(b, " becn="...)
	b = appendBit(b, h.BECN)
	b = append(b, " resv6a="...)
	b = appendHex(b, uint64(h.Resv6a), 2)
	b = append(b, " dqpn="...)
	b = appendHex(b, uint64(h.DestQP), 6)
	b = append(b, " ackreq="...)
	b = appendBit(b, h.AckReq)
	b = append(b, " resv7="...)
	b = appendHex(b, uint64(h.Resv7), 2)
	b = append(b, " psn="...)
	b = strconv.AppendUint(b, uint64(h.PSN), 10)
	b = append(b, " ("...)
	b = appendHex(b, uint64(h.PSN), 6)
	return append(b, ')')
}

// appendHexDump appends data in the layout of hexdump -C, indented.
func appendHexDump(b []byte, data []byte) []byte {
	if len(data) == 0 {
		return b
	}
	for line := range strings.Lines(hex.Dump(data)) {
		b = append(b, "      "...)
		b = append(b, line...)
	}
	return b
}

// appendPadInt appends n right-aligned in width columns.
func appendPadInt(b []byte, n, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(n), 10)
	for range width - len(s) {
		b = append(b, ' ')
	}
	return append(b, s...)
}

// appendEndpoint appends ip:port, [ipv6]:port, or ? when unknown.
func appendEndpoint(b []byte, ap netip.AddrPort) []byte {
	if !ap.IsValid() {
		return append(b, '?')
	}
	return ap.AppendTo(b)
}

// AppendJSON appends the JSON object of a RoCEv2 or malformed frame and a
// newline. Keys follow testdata/scapy/README.md; integers are unsigned
// decimal numbers, flags booleans.
func AppendJSON(b []byte, f *Frame) []byte {
	b = append(b, `{"frame":`...)
	b = strconv.AppendInt(b, int64(f.Num), 10)
	if f.Src.IsValid() {
		b = append(b, `,"src":"`...)
		b = f.Src.AppendTo(b)
		b = append(b, `","dst":"`...)
		b = f.Dst.AppendTo(b)
		b = append(b, '"')
	}
	switch f.Kind {
	case KindMalformed:
		b = append(b, `,"error":`...)
		b = appendJSONString(b, f.Err.Error())
		return append(b, "}\n"...)
	case KindCut:
		return append(appendJSONCut(b, f), "}\n"...)
	}
	p := &f.Packet
	h := p.BTH().Fields()
	b = append(b, `,"opcode":"`...)
	b = append(b, h.Opcode.String()...) // kernel names: [A-Z0-9_x]
	b = append(b, `","opcode_num":`...)
	b = strconv.AppendUint(b, uint64(h.Opcode), 10)
	b = jsonBool(b, "se", h.SE)
	b = jsonBool(b, "migreq", h.MigReq)
	b = jsonUint(b, "pad", uint64(h.PadCnt))
	b = jsonUint(b, "tver", uint64(h.TVer))
	b = jsonUint(b, "pkey", uint64(h.PKey))
	b = jsonBool(b, "fecn", h.FECN)
	b = jsonBool(b, "becn", h.BECN)
	b = jsonUint(b, "dqpn", uint64(h.DestQP))
	b = jsonBool(b, "ackreq", h.AckReq)
	b = jsonUint(b, "psn", uint64(h.PSN))
	b = appendJSONExt(b, f)
	b = jsonUint(b, "payload_len", uint64(p.PayloadLen()))
	if f.Truncated {
		b = appendJSONCut(b, f)
		b = jsonUint(b, "captured", uint64(f.Captured))
		if f.Merged {
			b = jsonBool(b, "merged", true)
		}
	} else {
		b = jsonUint(b, "icrc", uint64(p.ICRC()))
		b = jsonBool(b, "icrc_ok", f.ICRCOK)
	}
	if f.Segments > 0 {
		b = jsonUint(b, "segment", uint64(f.Segment))
		b = jsonUint(b, "segments", uint64(f.Segments))
	}
	return append(b, "}\n"...)
}

// appendJSONCut appends the keys of a frame the capture cut short.
func appendJSONCut(b []byte, f *Frame) []byte {
	b = jsonBool(b, "truncated", true)
	b = jsonUint(b, "caplen", uint64(f.CapLen))
	return jsonUint(b, "origlen", uint64(f.OrigLen))
}

// appendJSONExt appends the keys of f's extension headers (those
// captured).
func appendJSONExt(b []byte, f *Frame) []byte {
	p := &f.Packet
	if x := p.RDETH(); x != nil && f.HeaderCaptured(packet.HdrRDETH) {
		b = jsonUint(b, "rdeth", uint64(x.EEC()))
	}
	if x := p.DETH(); x != nil && f.HeaderCaptured(packet.HdrDETH) {
		b = append(b, `,"deth":{"qkey":`...)
		b = strconv.AppendUint(b, uint64(x.QKey()), 10)
		b = jsonUint(b, "src_qp", uint64(x.SrcQP()))
		b = append(b, '}')
	}
	if x := p.FETH(); x != nil && f.HeaderCaptured(packet.HdrFETH) {
		b = jsonUint(b, "feth", uint64(x.Value()))
	}
	if x := p.RETH(); x != nil && f.HeaderCaptured(packet.HdrRETH) {
		b = append(b, `,"reth":{"va":`...)
		b = strconv.AppendUint(b, x.VA(), 10)
		b = jsonUint(b, "rkey", uint64(x.RKey()))
		b = jsonUint(b, "dma_len", uint64(x.DMALen()))
		b = append(b, '}')
	}
	if x := p.AtomicETH(); x != nil && f.HeaderCaptured(packet.HdrAtomicETH) {
		b = append(b, `,"atomiceth":{"va":`...)
		b = strconv.AppendUint(b, x.VA(), 10)
		b = jsonUint(b, "rkey", uint64(x.RKey()))
		b = jsonUint(b, "swap_add", x.SwapAdd())
		b = jsonUint(b, "compare", x.Compare())
		b = append(b, '}')
	}
	if x := p.AETH(); x != nil && f.HeaderCaptured(packet.HdrAETH) {
		b = append(b, `,"aeth":{"syndrome":`...)
		b = strconv.AppendUint(b, uint64(x.Syndrome()), 10)
		b = jsonUint(b, "msn", uint64(x.MSN()))
		b = append(b, '}')
	}
	if x := p.AtomicAckETH(); x != nil && f.HeaderCaptured(packet.HdrAtomicAckETH) {
		b = append(b, `,"atomicacketh":{"orig":`...)
		b = strconv.AppendUint(b, x.Orig(), 10)
		b = append(b, '}')
	}
	if x := p.ImmDt(); x != nil && f.HeaderCaptured(packet.HdrImmDt) {
		b = jsonUint(b, "immdt", uint64(x.Imm()))
	}
	if x := p.IETH(); x != nil && f.HeaderCaptured(packet.HdrIETH) {
		b = jsonUint(b, "ieth", uint64(x.RKey()))
	}
	return b
}

// jsonUint appends ,"key":v.
func jsonUint(b []byte, key string, v uint64) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendUint(b, v, 10)
}

// jsonBool appends ,"key":true or false.
func jsonBool(b []byte, key string, v bool) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendBool(b, v)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s { // range yields U+FFFD for invalid bytes
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
