package dump

import (
	"encoding/binary"

	"github.com/gorxe/gorxe/packet"
)

// A UDP datagram can hold several RoCE packets back to back: a capture on
// the sending host sees a UDP GSO buffer before the kernel segments it,
// and one on the receiving host sees datagrams that UDP GRO merged. The
// segments are of one size but the last, which may be shorter, and carry
// one QP's packets, each with its own headers and ICRC; the ICRC covers
// each segment's own IP and UDP lengths and, over IPv4, its IP ID. So a
// datagram that does not parse as one RoCE packet (packets without a
// payload, such as READ requests, ACKs and atomics, have a fixed length),
// or whose ICRC fails over the whole datagram, is tried as such a run: a
// segment length for which every segment parses, goes to the same
// destination QP, and checks with the pseudo-header of a datagram of its
// own length.

// maxSegmentTries bounds the segment lengths whose first segment's ICRC
// is computed for one datagram, which bounds the cost of a datagram that
// is merely corrupted.
const maxSegmentTries = 64

// segment is one RoCE packet of a datagram that holds several.
type segment struct {
	pkt  packet.Packet
	want uint32 // its ICRC, as computed for its own datagram
}

// splitSegments returns the RoCE packets d's payload holds back to back,
// or nil unless it holds two or more that all check.
func splitSegments(d *packet.IPDatagram) []segment {
	p := d.Payload
	const minPkt = packet.BTHSize + packet.ICRCSize
	if len(p) < 2*minPkt {
		return nil
	}
	qp := packet.BTH(p).DestQP()
	tries := 0
	for n := minPkt; n <= len(p)-minPkt && tries < maxSegmentTries; n += 4 {
		if next := packet.BTH(p[n:]); next.DestQP() != qp || next.TVer() != 0 {
			continue // no BTH of the same QP where the next segment would start
		}
		tries++
		if segs := splitAt(d, n); segs != nil {
			return segs
		}
	}
	return nil
}

// splitAt splits d's payload into segments of n bytes (the last one may
// be shorter) and returns them if every one checks.
func splitAt(d *packet.IPDatagram, n int) []segment {
	p := d.Payload
	qp := packet.BTH(p).DestQP()
	var segs []segment
	for i, off := 0, 0; off < len(p); i, off = i+1, off+n {
		b := p[off:min(off+n, len(p))]
		pkt, err := packet.Parse(b)
		if err != nil || pkt.DestQP() != qp {
			return nil
		}
		want, ok := segmentICRC(d.Pseudo, b, i)
		if !ok {
			return nil
		}
		segs = append(segs, segment{pkt: pkt, want: want})
	}
	return segs
}

// segmentICRC checks segment i of a datagram with pseudo-header ph against
// its trailing ICRC and returns the ICRC that matches. Over IPv4 the
// segment's IP ID is the datagram's plus i (the kernel gives the k-th
// segment of a GSO send the ID k, from the buffer's 0: netdev's
// TestGSOSegmentIDs; GRO merges such runs under the first one's header)
// or the datagram's own (a run of datagrams sent with one fixed ID). No
// other ID is tried: any corrupted segment would check with one of 2^16.
func segmentICRC(ph packet.PseudoHeader, b []byte, i int) (uint32, bool) {
	wire := binary.LittleEndian.Uint32(b[len(b)-packet.ICRCSize:])
	if !ph.Is4() {
		crc, err := ph.ICRC(b)
		return crc, err == nil && crc == wire
	}
	base := ph.IPID
	for _, id := range [...]uint16{base + uint16(i), base} {
		ph.IPID = id
		if crc, err := ph.ICRC(b); err == nil && crc == wire {
			return crc, true
		}
	}
	return 0, false
}
