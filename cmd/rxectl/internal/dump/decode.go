package dump

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/gorxe/gorxe/packet"
)

// Kind classifies a decoded frame.
type Kind uint8

const (
	KindOther     Kind = iota // not RoCEv2: skipped silently
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

	// FromRoCEPort, on a KindOther frame, says that it is a UDP datagram
	// from a RoCEv2 port (Src) to another port (Dst) whose RoCE packets parse
	// and check: a device that receives on that port (two devices on one
	// address), which a --port would decode.
	FromRoCEPort bool
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
			return
		}
		f.Kind, f.Src, f.Dst = KindMalformed, src, dst
		switch {
		case frag:
			f.Err = errFragment
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
		f.Kind = KindOther
		if rocePorts.has(dg.Pseudo.SrcPort) {
			// Decoded only to ask whether it is RoCE: a datagram
			// whose ICRCs check is, but for a 2^-32 chance.
			var g Frame
			decodeDatagram(&g, dg)
			if g.Kind == KindRoCE && g.ICRCOK {
				f.FromRoCEPort, f.Src, f.Dst = true, g.Src, g.Dst
			}
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
