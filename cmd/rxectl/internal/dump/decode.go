package dump

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"github.com/gorxe/gorxe/packet"
)

// Kind classifies a decoded frame.
type Kind uint8

const (
	KindOther     Kind = iota // not RoCEv2: skipped (Reader counts those it should say, see Frame.OtherPort)
	KindRoCE                  // a RoCEv2 packet that packet.Parse accepts
	KindMalformed             // UDP to a RoCEv2 port that does not parse
	// KindCut is UDP to a RoCEv2 port that the capture cut short (its
	// record holds fewer bytes than were on the wire) before the end of
	// the IP and UDP headers or of the BTH: there is no RoCE header to
	// decode, and nothing says the datagram was malformed.
	KindCut
)

// Frame is everything rxectl dump reports about one captured frame. Its
// slices point into the record's data: they are valid as long as that is.
type Frame struct {
	Num     int // 1-based, as Wireshark numbers frames
	CapLen  int // bytes captured
	OrigLen int // length on the wire

	Kind     Kind
	Src, Dst netip.AddrPort    // valid when known (always for KindRoCE)
	IP       []byte            // the IP packet, as captured
	Datagram packet.IPDatagram // the parsed IP/UDP headers (KindRoCE, some KindMalformed)
	Packet   packet.Packet     // the RoCEv2 packet (KindRoCE)
	Err      error             // why a KindMalformed frame is malformed
	WantICRC uint32            // the ICRC computed over the captured headers
	ICRCOK   bool              // the packet's ICRC equals WantICRC

	// Truncated says that the capture cut the frame short inside its
	// RoCE packet (a snap length: CapLen < OrigLen). Packet then has
	// the length the IP and UDP length fields give, but only its first
	// Captured bytes (from the BTH on) were captured: the rest reads as
	// zeros. Its headers are decoded as far as they were captured (see
	// HeaderCaptured), its payload and ICRC are not checked, and
	// ICRCOK is false without the packet being bad.
	Truncated bool
	Captured  int
	// Merged, with Truncated, says that the datagram holds several RoCE
	// packets (a GSO buffer or GRO-merged datagrams: its payload length
	// exceeds any path MTU) that the capture cut before the bytes that
	// would show where they split: Packet is the first one's headers
	// with the length of the whole datagram.
	Merged bool

	// Segment and Segments say that the datagram holds Segments RoCE
	// packets back to back (a GSO buffer or GRO-merged datagrams, see
	// segments.go) and that Packet is the Segment'th, counting from 1;
	// both are 0 for a datagram of one packet. Reader.Next returns each
	// segment as a frame of its own; DecodeFrame leaves the first.
	Segment, Segments int
	segs              []segment
	// uncaptured counts the segments of a datagram cut by the capture
	// that follow the last one it holds any BTH of (they count in
	// Segments, but no frame describes them).
	uncaptured int

	// OtherPort, on a KindOther frame, says that it is a UDP datagram to
	// a port that is not a RoCEv2 port whose RoCE packets parse and
	// check: from a RoCEv2 port (the answers to a device that receives
	// on another port, as two devices on one address) or between two
	// other ports (rxectl --udp-port 0). A --port would decode it.
	OtherPort bool

	// firstFragment, on a KindMalformed frame, and laterFragment, on a
	// KindOther one, say that the frame is the first IP fragment of a
	// UDP datagram to a RoCEv2 port, or a later fragment of a UDP
	// datagram (which carries no UDP header), with frag naming the
	// datagram.
	firstFragment, laterFragment bool
	frag                         fragKey
}

// fragKey names the datagram an IP fragment belongs to: its addresses
// and Identification (RFC 791 for IPv4, RFC 8200 4.5 for IPv6).
type fragKey struct {
	src, dst netip.Addr
	id       uint32
}

// ipFragment reports whether the IP packet ip is a fragment of a UDP
// datagram, which datagram (k) and whether it is a later fragment, one
// with a non-zero offset and so no UDP header. For IPv6 it walks the
// extension headers PeekUDP walks to the Fragment header.
func ipFragment(ip []byte) (k fragKey, later, ok bool) {
	switch {
	case len(ip) >= packet.IPv4HeaderSize && ip[0]>>4 == 4:
		fl := binary.BigEndian.Uint16(ip[6:])
		if ip[9] != 17 || fl&0x3FFF == 0 { // neither MF nor an offset
			return k, false, false
		}
		k = fragKey{netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), uint32(binary.BigEndian.Uint16(ip[4:]))}
		return k, fl&0x1FFF != 0, true
	case len(ip) >= packet.IPv6HeaderSize && ip[0]>>4 == 6:
		nh, off := ip[6], packet.IPv6HeaderSize
		for nh == 0 || nh == 43 || nh == 60 {
			if len(ip) < off+8 {
				return k, false, false
			}
			nh, off = ip[off], off+8+int(ip[off+1])*8
		}
		if nh != 44 || len(ip) < off+8 || ip[off] != 17 {
			return k, false, false
		}
		k = fragKey{netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), binary.BigEndian.Uint32(ip[off+4:])}
		return k, binary.BigEndian.Uint16(ip[off+2:])&0xFFF8 != 0, true
	}
	return k, false, false
}

// Uncaptured is the number of f's datagram's segments that the capture
// cut off whole, after the last segment it holds (see Frame.Segments).
func (f *Frame) Uncaptured() int { return f.uncaptured }

// setSegment makes f describe its datagram's segment i (from 0).
func (f *Frame) setSegment(i int) {
	s := &f.segs[i]
	f.Packet, f.WantICRC, f.ICRCOK = s.pkt, s.want, s.captured < 0 && !s.bad
	f.Truncated, f.Captured = s.captured >= 0, max(s.captured, 0)
	f.Segment, f.Segments = i+1, len(f.segs)+f.uncaptured
}

// HeaderCaptured reports whether the capture holds the whole of f's
// header h (which its opcode must carry): always, unless f is Truncated.
func (f *Frame) HeaderCaptured(h packet.Hdr) bool {
	if !f.Truncated {
		return true
	}
	return int(f.Packet.Info().Offset[h])+h.Size() <= f.Captured
}

// HeadersCaptured reports whether the capture holds the BTH and every
// extension header of f's packet.
func (f *Frame) HeadersCaptured() bool {
	return !f.Truncated || f.Packet.HeaderLen() <= f.Captured
}

// Ports is the set of UDP destination ports decoded as RoCEv2.
type Ports []uint16

// has reports whether port is in the set.
func (p Ports) has(port uint16) bool { return slices.Contains(p, port) }

// errFragment: a RoCEv2 datagram must not be fragmented (IBA A17.4.1: DF).
var errFragment = errors.New("IP fragment of a RoCEv2 datagram")

// errIPv6Ext: a RoCEv2 datagram after IPv6 extension headers. RoCEv2 puts
// UDP right after the fixed IPv6 header (IBA A17.4), whose fields its ICRC
// covers, and neither rxectl nor kernel rxe decodes one that does not.
var errIPv6Ext = errors.New("RoCEv2 datagram behind IPv6 extension headers (not decoded: RoCEv2 has UDP follow the fixed IPv6 header)")

// DecodeFrame decodes one frame of link type lt into f. It never panics on
// any input, and never keeps data beyond f's own lifetime.
func DecodeFrame(f *Frame, data []byte, lt LinkType, rocePorts Ports) {
	ip, err := packet.IPFromLink(data, lt)
	if err != nil {
		f.Kind = KindOther
		return
	}
	f.IP = ip
	dg, err := packet.ParseIP(ip)
	if err != nil {
		// Look at the UDP ports by hand: a truncated or fragmented
		// datagram to a RoCEv2 port is malformed RoCE, anything else is
		// another protocol.
		src, dst, frag, ok := packet.PeekUDP(ip)
		if !ok || !rocePorts.has(dst.Port()) {
			f.Kind = KindOther
			if k, later, isFrag := ipFragment(ip); isFrag && later {
				f.laterFragment, f.frag = true, k
			}
			return
		}
		f.Kind, f.Src, f.Dst = KindMalformed, src, dst
		switch {
		case frag:
			f.Err = errFragment
			f.frag, _, f.firstFragment = ipFragment(ip)
		case ip[0]>>4 == 6 && errors.Is(err, packet.ErrNotUDP):
			f.Err = errIPv6Ext
		case f.CapLen < f.OrigLen:
			decodeCut(f, ip, err)
		default:
			f.Err = ipReason(err, ip)
		}
		return
	}
	if !rocePorts.has(dg.Pseudo.DstPort) {
		// Decoded only to ask whether it is RoCE: a datagram whose
		// ICRCs check is, but for a 2^-32 chance.
		f.Kind = KindOther
		var g Frame
		decodeDatagram(&g, dg)
		if g.Kind == KindRoCE && g.ICRCOK {
			f.OtherPort, f.Src, f.Dst = true, g.Src, g.Dst
		}
		return
	}
	decodeDatagram(f, dg)
}

// decodeDatagram decodes the RoCEv2 datagram dg, whole, into f.
func decodeDatagram(f *Frame, dg packet.IPDatagram) {
	f.Datagram = dg
	f.Src = netip.AddrPortFrom(dg.Pseudo.Src, dg.Pseudo.SrcPort)
	f.Dst = netip.AddrPortFrom(dg.Pseudo.Dst, dg.Pseudo.DstPort)
	pkt, err := packet.Parse(dg.Payload)
	if err != nil {
		// Packets without a payload (READ requests, ACKs, atomics) have
		// a fixed length, so several back to back do not parse as one:
		// try them as segments, each with a valid ICRC, before calling
		// the datagram malformed.
		if f.segs = splitSegments(&dg); f.segs != nil {
			f.Kind = KindRoCE
			f.setSegment(0)
			return
		}
		f.Kind, f.Err = KindMalformed, parseReason(err, dg.Payload)
		return
	}
	f.Kind, f.Packet = KindRoCE, pkt
	want, err := dg.ICRC()
	if err != nil { // cannot happen after Parse; report rather than guess
		f.Kind, f.Err = KindMalformed, err
		return
	}
	f.WantICRC = want
	f.ICRCOK = want == pkt.ICRC()
	if !f.ICRCOK {
		if f.segs = splitSegments(&dg); f.segs != nil {
			f.setSegment(0)
		}
	}
}
