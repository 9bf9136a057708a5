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
// the pseudo-header of a datagram of its own length. Failing that, a
// length for which every segment parses and some check is the split too,
// its other segments corrupted: a segment's ICRC is a 32-bit check of its
// own bytes and length, which no wrong split passes but by a 2^-32
// chance. Over IPv4 a segment past the first has to check for that (the
// first one's ID is the datagram's): it shows the IDs the segments carry,
// without which a failing segment could be one sent with another ID.

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
	// bad: the segment, captured whole, fails its ICRC (want is then the
	// ICRC it should carry) while others of its datagram check.
	bad bool
}

// minPkt is the length of the shortest RoCE packet: a BTH and the ICRC.
const minPkt = packet.BTHSize + packet.ICRCSize

// splitSegments returns the RoCE packets d's payload holds back to back,
// or nil unless it holds two or more of which all check or, failing that,
// enough do (see splitAt). The segment lengths it tries are those after
// which a BTH seems to start: first one of the first packet's QP (a GSO
// run, a merge of one QP's datagrams), then one of another QP of its
// partition (a merge of several QPs' datagrams), each with a known opcode
// and TVer 0. A payload of zeros, say, shows neither, so it does not use
// up the tries before the real segment length. A split with corrupted
// segments is taken only when no length gives one whose segments all
// check, and of those the one with the most segments that check: a
// multiple of the real length makes segments of several packets, which
// never check.
func splitSegments(d *packet.IPDatagram) []segment {
	p := d.Payload
	if len(p) < 2*minPkt {
		return nil
	}
	first := packet.BTH(p)
	segs, partial, good := trySplits(d, func(next packet.BTH) bool { return next.DestQP() == first.DestQP() })
	if segs != nil {
		return segs
	}
	segs, partial2, good2 := trySplits(d, func(next packet.BTH) bool { return next.DestQP() != first.DestQP() && next.PKey() == first.PKey() })
	switch {
	case segs != nil:
		return segs
	case good2 > good:
		return partial2
	}
	return partial
}

// trySplits tries, up to maxSegmentTries of them, the segment lengths of
// d's payload after which a BTH with a known opcode and TVer 0 starts that
// like accepts. It returns the first split whose segments all check, if
// there is one, and else the split with some corrupted segments (see
// splitAt) that has the most segments that check (the shortest length of
// those with as many), with that number.
func trySplits(d *packet.IPDatagram, like func(next packet.BTH) bool) (all, partial []segment, good int) {
	p := d.Payload
	tries := 0
	for n := minPkt; n <= len(p)-minPkt && tries < maxSegmentTries; n += 4 {
		if next := packet.BTH(p[n:]); !next.Opcode().Valid() || next.TVer() != 0 || !like(next) {
			continue
		}
		tries++
		segs, ok := splitAt(d, n)
		if ok {
			return segs, nil, 0
		}
		if g := checked(segs); g > good {
			partial, good = segs, g
		}
	}
	return nil, partial, good
}

// checked counts the segments of segs that check.
func checked(segs []segment) int {
	n := 0
	for _, s := range segs {
		if !s.bad {
			n++
		}
	}
	return n
}

// idScheme is how the IPv4 IDs of a datagram's segments relate to the
// datagram's own ID (see segmentICRC).
type idScheme uint8

const (
	idUnknown  idScheme = iota // no segment past the first checked (or IPv6: no ID)
	idCounting                 // segment i carries the datagram's ID plus i
	idFixed                    // every segment carries the datagram's ID
)

// splitAt splits d's payload into segments of n bytes (the last one may
// be shorter). If every segment parses and checks, it returns them and
// true. If every one parses and some check (over IPv4, one past the first:
// see the top of this file), it returns them with the others marked bad,
// each with the ICRC its own datagram should carry, the IDs counted as the
// good ones show, and false. Otherwise it returns nil and false.
func splitAt(d *packet.IPDatagram, n int) ([]segment, bool) {
	p := d.Payload
	var segs []segment
	scheme, bad := idUnknown, 0
	for i, off := 0, 0; off < len(p); i, off = i+1, off+n {
		b := p[off:min(off+n, len(p))]
		pkt, err := packet.Parse(b)
		if err != nil {
			return nil, false
		}
		want, s, ok := segmentICRC(d.Pseudo, b, i)
		if !ok {
			bad++
		} else if s != idUnknown {
			scheme = s
		}
		segs = append(segs, segment{pkt: pkt, want: want, captured: -1, bad: !ok})
	}
	if bad == 0 {
		return segs, true
	}
	if bad == len(segs) || d.Pseudo.Is4() && scheme == idUnknown {
		return nil, false
	}
	for i := range segs {
		if !segs[i].bad {
			continue
		}
		ph := d.Pseudo
		if scheme == idCounting {
			ph.IPID += uint16(i)
		}
		want, err := ph.ICRC(segs[i].pkt.Bytes())
		if err != nil { // cannot happen after Parse; no split rather than a guess
			return nil, false
		}
		segs[i].want = want
	}
	return segs, false
}

// segmentICRC checks segment i of a datagram with pseudo-header ph against
// its trailing ICRC and returns the ICRC that matches and, over IPv4 and
// for i > 0, which ID it matched with. Over IPv4 the segment's IP ID is
// the datagram's plus i (the kernel gives the k-th segment of a GSO send
// the ID k, from the buffer's 0: netdev's TestGSOSegmentIDs; GRO merges
// such runs under the first one's header) or the datagram's own (a run
// of datagrams sent with one fixed ID). No other ID is tried: any
// corrupted segment would check with one of 2^16.
func segmentICRC(ph packet.PseudoHeader, b []byte, i int) (uint32, idScheme, bool) {
	wire := binary.LittleEndian.Uint32(b[len(b)-packet.ICRCSize:])
	if !ph.Is4() {
		crc, err := ph.ICRC(b)
		return crc, idUnknown, err == nil && crc == wire
	}
	base := ph.IPID
	for _, c := range [...]struct {
		id     uint16
		scheme idScheme
	}{{base + uint16(i), idCounting}, {base, idFixed}} {
		ph.IPID = c.id
		if crc, err := ph.ICRC(b); err == nil && crc == wire {
			if i == 0 {
				c.scheme = idUnknown // the datagram's own ID either way
			}
			return crc, c.scheme, true
		}
	}
	return 0, idUnknown, false
}
