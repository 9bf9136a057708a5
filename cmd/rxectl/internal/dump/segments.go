package dump

import (
	"encoding/binary"

	"github.com/gorxe/gorxe/packet"
)

// A UDP datagram can hold several RoCE packets back to back: a capture on
// the sending host sees a UDP GSO buffer before the kernel segments it,
// and one on the receiving host sees datagrams that UDP GRO merged. The
// segments are of one size but the last, which may be shorter, each a
// RoCE packet with its own headers and ICRC; the ICRC covers each
// segment's own IP and UDP lengths and, over IPv4, its IP ID. GRO merges
// the datagrams of one UDP flow (addresses and ports) whatever their BTH
// says, and gorxe sends every QP from one port, so the segments of a
// merged datagram may be packets of several QPs (of one partition, in
// practice). So a datagram that does not parse as one RoCE packet (packets
// without a payload, such as READ requests, ACKs and atomics, have a fixed
// length), or whose ICRC fails over the whole datagram, is tried as such a
// run: a segment length for which every segment parses and checks with
// the pseudo-header of a datagram of its own length.

// maxSegmentTries bounds the segment lengths whose first segment's ICRC
// is computed in each of splitSegments' two passes over a datagram, which
// bounds the cost of a datagram that is merely corrupted.
const maxSegmentTries = 64

// segment is one RoCE packet of a datagram that holds several.
type segment struct {
	pkt  packet.Packet
	want uint32 // its ICRC, as computed for its own datagram
	// captured is -1 for a segment captured whole, else the bytes of it
	// that a capture cut short holds (see cut.go).
	captured int
}

// minPkt is the length of the shortest RoCE packet: a BTH and the ICRC.
const minPkt = packet.BTHSize + packet.ICRCSize

// splitSegments returns the RoCE packets d's payload holds back to back,
// or nil unless it holds two or more that all check. The segment lengths
// it tries are those after which a BTH seems to start: first one of the
// first packet's QP (a GSO run, a merge of one QP's datagrams), then one
// of another QP of its partition (a merge of several QPs' datagrams), each
// with a known opcode and TVer 0. A payload of zeros, say, shows neither,
// so it does not use up the tries before the real segment length.
func splitSegments(d *packet.IPDatagram) []segment {
	p := d.Payload
	if len(p) < 2*minPkt {
		return nil
	}
	first := packet.BTH(p)
	if segs := trySplits(d, func(next packet.BTH) bool { return next.DestQP() == first.DestQP() }); segs != nil {
		return segs
	}
	return trySplits(d, func(next packet.BTH) bool { return next.DestQP() != first.DestQP() && next.PKey() == first.PKey() })
}

// trySplits tries, up to maxSegmentTries of them, the segment lengths of
// d's payload after which a BTH with a known opcode and TVer 0 starts that
// like accepts, and returns the first split whose segments all check.
func trySplits(d *packet.IPDatagram, like func(next packet.BTH) bool) []segment {
	p := d.Payload
	tries := 0
	for n := minPkt; n <= len(p)-minPkt && tries < maxSegmentTries; n += 4 {
		if next := packet.BTH(p[n:]); !next.Opcode().Valid() || next.TVer() != 0 || !like(next) {
			continue
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
	var segs []segment
	for i, off := 0, 0; off < len(p); i, off = i+1, off+n {
		b := p[off:min(off+n, len(p))]
		pkt, err := packet.Parse(b)
		if err != nil {
			return nil
		}
		want, ok := segmentICRC(d.Pseudo, b, i)
		if !ok {
			return nil
		}
		segs = append(segs, segment{pkt: pkt, want: want, captured: -1})
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
