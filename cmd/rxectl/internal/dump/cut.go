package dump

import (
	"encoding/binary"
	"fmt"

	"github.com/gorxe/gorxe/packet"
)

// A capture taken with a snap length (tcpdump -s 128) keeps only the
// first bytes of each frame; its records say how many bytes were captured
// and how many were on the wire. The IP and UDP headers of such a frame
// still give the datagram's length, so the RoCE packet's length, and with
// it the payload length, is known even though its end is not there. The
// functions here decode what such a frame holds: the headers as far as
// they were captured. Nothing past the cut can be checked: not the
// payload, not the ICRC (it covers the whole packet, and is its last four
// bytes).

// maxPMTU is the largest path MTU (4096 bytes, MTU code 5): a RoCE
// packet carries at most that much payload, so a longer one is several
// packets merged (a GSO buffer or GRO).
const maxPMTU = 4096

// cutErr wraps err of a frame the capture cut short.
func cutErr(f *Frame, err error) error {
	return fmt.Errorf("%w (frame cut by the capture: %d of %d bytes)", err, f.CapLen, f.OrigLen)
}

// decodeCut decodes the IP packet ip of a frame that the capture cut
// short (f.CapLen < f.OrigLen) and that packet.ParseIP rejected with err;
// f's addresses are set. The frame is KindCut when the capture ends
// before the end of the BTH, KindRoCE with Truncated set when it holds
// the BTH, decoded as uncut when it holds the whole UDP datagram (the cut
// falls in IP bytes past the UDP length), and KindMalformed when the bytes captured are wrong whatever
// followed them (an IP length beyond the frame's length on the wire, a
// reserved opcode, a UDP length beyond the IP packet).
func decodeCut(f *Frame, ip []byte, err error) {
	f.Kind = KindCut
	hl, total, ok := cutLengths(ip)
	if !ok { // cut inside the IP or UDP header
		return
	}
	onWire := len(ip) + f.OrigLen - f.CapLen // the IP packet and any link trailer
	if total <= len(ip) || total > onWire {
		// The cut is not inside the datagram, or its IP length claims
		// more than the wire carried: ParseIP's verdict stands.
		f.Kind, f.Err = KindMalformed, cutErr(f, err)
		return
	}
	// The datagram at its length on the wire, zeros where the capture
	// ends, so that packet.ParseIP and packet.Parse check every length.
	whole := make([]byte, total)
	copy(whole, ip)
	dg, err := packet.ParseIP(whole)
	if err != nil {
		f.Kind, f.Err = KindMalformed, cutErr(f, err)
		return
	}
	if len(ip)-hl-packet.UDPHeaderSize >= len(dg.Payload) {
		// The capture holds the whole UDP datagram and cuts only IP
		// bytes after it, past the UDP length, which the ICRC does not
		// cover (IBA A17.4.4: IP header, UDP header, BTH to payload):
		// the packet is whole, decoded and checked as an uncut one.
		decodeDatagram(f, dg)
		return
	}
	f.Datagram = dg
	f.Captured = min(len(ip)-hl-packet.UDPHeaderSize, len(dg.Payload))
	if f.Captured < packet.BTHSize {
		return
	}
	pkt, perr := packet.Parse(dg.Payload)
	if perr != nil || pkt.PayloadLen() > maxPMTU || f.Captured >= minPkt+packet.BTHSize {
		// Several packets back to back (GSO/GRO)? Split by lengths as
		// far as the capture shows them.
		if segs, rest := splitCut(&dg, f.Captured); segs != nil {
			f.Kind, f.segs, f.uncaptured = KindRoCE, segs, rest
			f.setSegment(0)
			return
		}
	}
	if perr != nil {
		f.Kind, f.Err = KindMalformed, cutErr(f, perr)
		return
	}
	f.Kind, f.Packet, f.Truncated = KindRoCE, pkt, true
	f.Merged = pkt.PayloadLen() > maxPMTU
}

// cutLengths returns the length of the IP header of ip and the IP
// packet's length as its header gives it, when ip holds the whole IP
// header and the UDP header.
func cutLengths(ip []byte) (hl, total int, ok bool) {
	switch {
	case len(ip) >= packet.IPv4HeaderSize && ip[0]>>4 == 4:
		hl = int(ip[0]&0x0F) * 4
		total = int(binary.BigEndian.Uint16(ip[2:]))
	case len(ip) >= packet.IPv6HeaderSize && ip[0]>>4 == 6:
		hl = packet.IPv6HeaderSize
		total = packet.IPv6HeaderSize + int(binary.BigEndian.Uint16(ip[4:]))
	default:
		return 0, 0, false
	}
	return hl, total, hl >= packet.IPv4HeaderSize && len(ip) >= hl+packet.UDPHeaderSize
}

// splitCut splits the payload of a datagram cut by the capture after its
// first captured bytes into RoCE packets back to back, by lengths: the
// length of the first packet's opcode when it carries no payload (READ
// requests, ACKs and atomics have a fixed length), else a length after
// which the captured bytes show the BTH of a packet of the first one's
// QP (so the capture holds the first segment whole). Segments the capture
// holds whole must parse and check their ICRC, the one it cuts must
// parse; it returns those, and the number of segments after them that the
// capture does not hold at all. It returns nil unless the datagram holds
// two or more segments.
func splitCut(d *packet.IPDatagram, captured int) ([]segment, int) {
	p := d.Payload
	first := packet.BTH(p)
	info := first.Opcode().Info()
	if info.Length != 0 && info.Mask&packet.MaskPayload == 0 {
		return splitCutAt(d, info.Length+packet.ICRCSize, captured)
	}
	tries := 0
	for n := minPkt; n+packet.BTHSize <= captured && n <= len(p)-minPkt && tries < maxSegmentTries; n += 4 {
		next := packet.BTH(p[n:])
		if !next.Opcode().Valid() || next.TVer() != 0 || next.DestQP() != first.DestQP() {
			continue
		}
		tries++
		if segs, rest := splitCutAt(d, n, captured); segs != nil {
			return segs, rest
		}
	}
	return nil, 0
}

// splitCutAt splits d's payload into segments of n bytes (the last may be
// shorter), of which the capture holds the first captured bytes (see
// splitCut).
func splitCutAt(d *packet.IPDatagram, n, captured int) ([]segment, int) {
	p := d.Payload
	if n < minPkt || len(p) <= n {
		return nil, 0
	}
	var segs []segment
	i, off := 0, 0
	for ; off < len(p) && off+packet.BTHSize <= captured; i, off = i+1, off+n {
		b := p[off:min(off+n, len(p))]
		pkt, err := packet.Parse(b)
		if err != nil {
			return nil, 0
		}
		if off+len(b) > captured { // the segment the capture cuts
			segs = append(segs, segment{pkt: pkt, captured: captured - off})
			continue
		}
		want, _, ok := segmentICRC(d.Pseudo, b, i)
		if !ok {
			return nil, 0
		}
		segs = append(segs, segment{pkt: pkt, want: want, captured: -1})
	}
	rest := (len(p) - off + n - 1) / n
	if off >= len(p) {
		rest = 0
	}
	return segs, rest
}
