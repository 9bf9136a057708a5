package layers

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// Endpoints of the frames the tests build. IPv4 uses ID 0 with DF, the
// pseudo-header gorxe's peers agree on (package packet, PseudoHeader).
var (
	mac1 = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	mac2 = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
	ph4  = packet.PseudoHeader{
		Src: netip.MustParseAddr("192.168.1.10"), Dst: netip.MustParseAddr("192.168.1.20"),
		SrcPort: 0xC123, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF,
	}
	ph6 = packet.PseudoHeader{
		Src: netip.MustParseAddr("fd00:4791::a"), Dst: netip.MustParseAddr("fd00:4791::b"),
		SrcPort: 0xC124, DstPort: packet.UDPPort,
	}
)

type sample struct {
	name    string
	h       packet.Headers
	payload []byte
}

// samples returns one packet of every opcode package packet knows, with
// distinctive field values and payload lengths covering every pad count
// (like packet's own test generator). extra adds to every payload length.
func samples(extra int) []sample {
	var out []sample
	i := 0
	for op := 0; op < 256; op++ {
		o := packet.Opcode(op)
		if !o.Valid() {
			continue
		}
		i++
		h := packet.Headers{
			BTH: packet.BTHFields{Opcode: o, SE: i%2 == 0, MigReq: i%3 == 0, PKey: 0xFFFF - uint16(i),
				FECN: i%5 == 0, BECN: i%7 == 0 || o == packet.CNP, DestQP: 0xFFFFFF - uint32(i), AckReq: i%2 == 1,
				PSN: packet.PSN(0xFFFFF0).Add(i)},
			RDETH:     0xABCDEF,
			DETH:      packet.DETHFields{QKey: 0x80010000 + uint32(i), SrcQP: 0x123456},
			FETH:      0x11,
			RETH:      packet.RETHFields{VA: 0x00007F0000001000 + uint64(i), RKey: 0x1234 + uint32(i), DMALen: 4096 * uint32(i)},
			AtomicETH: packet.AtomicETHFields{VA: 0x7F00_0000_0008, RKey: 0xBEEF, SwapAdd: 0x0102030405060708, Compare: 0x1112131415161718},
			AETH:      packet.AETHFields{Syndrome: packet.Syndrome(i % 0x80), MSN: 0xFFFFFE},
			AtomicAck: 0xCAFEF00DDEADBEEF,
			Imm:       0xA1B2C3D4,
			IETH:      0x55667788,
		}
		var payload []byte
		switch {
		case o.Info().Is(packet.MaskAtomicWrite):
			payload = []byte{1, 2, 3, 4, 5, 6, 7, 8}
		case o.Info().Is(packet.MaskPayload):
			payload = make([]byte, 13+i%4+extra) // pad counts 3, 2, 1, 0
			for j := range payload {
				payload[j] = byte(j*7 + i)
			}
		}
		out = append(out, sample{o.String(), h, payload})
	}
	return out
}

// roceLayers returns the layers of a RoCEv2 datagram with headers h and
// the payload, for gopacket.SerializeLayers; the BTH's PadCnt and ICRC are
// left zero.
func roceLayers(h *packet.Headers, payload []byte) []gopacket.SerializableLayer {
	bth := &BTH{}
	bth.SetFields(&h.BTH)
	out := []gopacket.SerializableLayer{bth}
	info := h.BTH.Opcode.Info()
	for x := packet.Hdr(0); x < packet.NumHdrs; x++ {
		if !info.Has(x) {
			continue
		}
		var l gopacket.SerializableLayer
		switch x {
		case packet.HdrRDETH:
			l = &RDETH{EEC: h.RDETH}
		case packet.HdrDETH:
			l = &DETH{QKey: h.DETH.QKey, SrcQP: h.DETH.SrcQP}
		case packet.HdrFETH:
			l = &FETH{Value: h.FETH}
		case packet.HdrRETH:
			l = &RETH{VA: h.RETH.VA, RKey: h.RETH.RKey, DMALen: h.RETH.DMALen}
		case packet.HdrAtomicETH:
			a := h.AtomicETH
			l = &AtomicETH{VA: a.VA, RKey: a.RKey, SwapAdd: a.SwapAdd, Compare: a.Compare}
		case packet.HdrAETH:
			l = &AETH{Syndrome: h.AETH.Syndrome, MSN: h.AETH.MSN}
		case packet.HdrAtomicAckETH:
			l = &AtomicAckETH{Orig: h.AtomicAck}
		case packet.HdrImmDt:
			l = &ImmDt{Imm: h.Imm}
		case packet.HdrIETH:
			l = &IETH{RKey: h.IETH}
		case packet.HdrCNP:
			l = &CNP{}
		}
		out = append(out, l)
	}
	if len(payload) > 0 {
		out = append(out, gopacket.Payload(payload))
	}
	return out
}

// encap returns the Ethernet, IP and UDP layers for pseudo-header ph.
func encap(ph *packet.PseudoHeader) []gopacket.SerializableLayer {
	udp := &gplayers.UDP{SrcPort: gplayers.UDPPort(ph.SrcPort), DstPort: gplayers.UDPPort(ph.DstPort)}
	if ph.Is4() {
		ip := &gplayers.IPv4{Version: 4, TOS: 0x02, TTL: 64, Id: ph.IPID, Flags: gplayers.IPv4Flag(ph.IPFlags >> 13),
			FragOffset: ph.IPFlags & 0x1FFF, Protocol: gplayers.IPProtocolUDP, SrcIP: ph.Src.AsSlice(), DstIP: ph.Dst.AsSlice()}
		_ = udp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{
			&gplayers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: gplayers.EthernetTypeIPv4}, ip, udp}
	}
	ip := &gplayers.IPv6{Version: 6, TrafficClass: 0x8A, FlowLabel: 0xABCDE, HopLimit: 64,
		NextHeader: gplayers.IPProtocolUDP, SrcIP: ph.Src.AsSlice(), DstIP: ph.Dst.AsSlice()}
	_ = udp.SetNetworkLayerForChecksum(ip)
	return []gopacket.SerializableLayer{
		&gplayers.Ethernet{SrcMAC: mac1, DstMAC: mac2, EthernetType: gplayers.EthernetTypeIPv6}, ip, udp}
}

// headerLen is the length of Ethernet, IP and UDP headers for ph.
func headerLen(ph *packet.PseudoHeader) int {
	if ph.Is4() {
		return 14 + packet.IPv4HeaderSize + packet.UDPHeaderSize
	}
	return 14 + packet.IPv6HeaderSize + packet.UDPHeaderSize
}

// buildFrame serializes an Ethernet frame of sample s over ph with
// gopacket (FixLengths, and real checksums if csum) and fixes its ICRC.
func buildFrame(t testing.TB, ph *packet.PseudoHeader, h *packet.Headers, payload []byte, csum bool) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	ls := append(encap(ph), roceLayers(h, payload)...)
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: csum}, ls...))
	require.NoError(t, FixICRC(buf.Bytes(), gplayers.LinkTypeEthernet))
	return append([]byte(nil), buf.Bytes()...)
}

// toSLL turns an Ethernet frame into a Linux cooked (v1) one.
func toSLL(eth []byte) []byte {
	sll := make([]byte, 16, 16+len(eth)-14)
	sll[1] = 4                   // packet type: sent by us
	sll[3] = 1                   // ARPHRD_ETHER
	sll[5] = 6                   // address length
	copy(sll[6:], eth[6:12])     // source MAC
	copy(sll[14:16], eth[12:14]) // protocol
	return append(sll, eth[14:]...)
}

// parserSet is a DecodingLayerParser with every layer a capture needs.
type parserSet struct {
	eth     gplayers.Ethernet
	sll     gplayers.LinuxSLL
	dot1q   gplayers.Dot1Q
	ip4     gplayers.IPv4
	ip6     gplayers.IPv6
	udp     gplayers.UDP
	roce    RoCE
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newParserSet(first gopacket.LayerType) *parserSet {
	s := &parserSet{decoded: make([]gopacket.LayerType, 0, 16)}
	dl := append([]gopacket.DecodingLayer{&s.eth, &s.sll, &s.dot1q, &s.ip4, &s.ip6, &s.udp, &s.payload}, s.roce.DecodingLayers()...)
	s.parser = gopacket.NewDecodingLayerParser(first, dl...)
	return s
}

// layerOf returns the decoded layer of type t in s.
func (s *parserSet) layerOf(t gopacket.LayerType) gopacket.Layer {
	if h, ok := layerHdr(t); ok {
		return s.roce.ext(h)
	}
	switch t {
	case LayerTypeBTH:
		return &s.roce.BTH
	case gopacket.LayerTypePayload:
		return &s.payload
	}
	return nil
}

// headersOf collects the RoCE layers of ls (BTH onwards) into a
// packet.Headers, with the payload and the layer types in order.
func headersOf(t testing.TB, ls []gopacket.Layer) (h packet.Headers, payload []byte, types []gopacket.LayerType) {
	t.Helper()
	for _, l := range ls {
		types = append(types, l.LayerType())
		switch l := l.(type) {
		case *BTH:
			h.BTH = l.Fields()
		case *RDETH:
			h.RDETH = l.EEC
		case *DETH:
			h.DETH = packet.DETHFields{QKey: l.QKey, SrcQP: l.SrcQP}
		case *FETH:
			h.FETH = l.Value
		case *RETH:
			h.RETH = packet.RETHFields{VA: l.VA, RKey: l.RKey, DMALen: l.DMALen}
		case *AtomicETH:
			h.AtomicETH = packet.AtomicETHFields{VA: l.VA, RKey: l.RKey, SwapAdd: l.SwapAdd, Compare: l.Compare}
		case *AETH:
			h.AETH = packet.AETHFields{Syndrome: l.Syndrome, MSN: l.MSN}
		case *AtomicAckETH:
			h.AtomicAck = l.Orig
		case *ImmDt:
			h.Imm = l.Imm
		case *IETH:
			h.IETH = l.RKey
		case *CNP:
		case *gopacket.Payload:
			payload = *l
		case *gplayers.Ethernet, *gplayers.LinuxSLL, *gplayers.Dot1Q, *gplayers.IPv4, *gplayers.IPv6, *gplayers.UDP:
			types = types[:len(types)-1]
		default:
			t.Fatalf("unexpected layer %v", l.LayerType())
		}
	}
	return h, payload, types
}

// wantTypes returns the layer types a datagram of p decodes to.
func wantTypes(p packet.Packet) []gopacket.LayerType {
	out := []gopacket.LayerType{LayerTypeBTH}
	for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
		if p.Info().Has(h) {
			out = append(out, hdrLayerType(h))
		}
	}
	if p.PayloadLen() > 0 {
		out = append(out, gopacket.LayerTypePayload)
	}
	return out
}
