// Package layers adapts gorxe's RoCEv2 wire formats (package packet) to
// gopacket: a layer type for the Base Transport Header (BTH), one for each
// extension header (RDETH, DETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt, IETH) and one for the 16-byte body of a congestion notification
// packet (CNP). It decodes captures (gopacket.NewPacket or a
// gopacket.DecodingLayerParser, with no allocation) and writes packets
// (gopacket.SerializeLayers, then FixICRC).
//
// Importing this package turns on RoCEv2 decoding of UDP port 4791 for the
// whole process: its init registers LayerTypeBTH in gopacket/layers' global
// UDP port table, so every gopacket decode that meets UDP to or from port
// 4791 goes on into the BTH. RegisterPort adds another port. The layer types
// take the numbers 1790 to 1800 of gopacket's application range (see
// LayerTypeBTH); the package panics at init if another package already
// registered one of them.
//
// # Layout of a decoded packet
//
// A RoCEv2 datagram (IBA Annex A17) is
//
//	| BTH 12 B | extension headers | payload | pad 0..3 | ICRC 4 B |
//
// The BTH layer checks the whole datagram with packet.Parse, so a BTH decodes
// exactly when packet.Parse accepts the bytes, with the same errors
// (packet.ErrTruncated, packet.ErrBadTransportVersion,
// packet.ErrUnknownOpcode, packet.ErrBadPadding, packet.ErrBadLength). It
// keeps the ICRC in its ICRC field and hands on the extension headers and
// payload without the pad and the ICRC. The opcode names the headers that
// follow (packet.OpInfo): BTH.NextLayerType is the first extension header of
// the opcode, each extension header's NextLayerType the next one, and the
// last one's gopacket.LayerTypePayload. An RC RDMA WRITE ONLY WITH IMMEDIATE
// decodes as
//
//	BTH → RETH → ImmDt → Payload
//
// An extension header does not say which header follows it; the opcode in
// the BTH does. So an extension-header layer decoded on its own (not after a
// BTH of the same gopacket.Packet, nor through RoCE.DecodingLayers) hands
// everything after itself on as payload.
//
// # Fast decoding
//
// Use a RoCE value, which links its extension headers to its BTH:
//
//	var (
//		eth     layers.Ethernet // gopacket/layers
//		ip4     layers.IPv4
//		ip6     layers.IPv6
//		udp     layers.UDP
//		roce    rocelayers.RoCE // this package
//		payload gopacket.Payload
//	)
//	dl := append([]gopacket.DecodingLayer{&eth, &ip4, &ip6, &udp, &payload}, roce.DecodingLayers()...)
//	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, dl...)
//	decoded := make([]gopacket.LayerType, 0, 16)
//	err := parser.DecodeLayers(frame, &decoded)
//
// # Writing packets
//
// Serialize the layers outermost first, as usual (with ComputeChecksums,
// gopacket's UDP layer must be told its IP layer first), then fill in the
// ICRC, which covers the IP and UDP headers and so cannot be computed by
// the BTH layer (ExampleFixICRC):
//
//	err := udp.SetNetworkLayerForChecksum(&ip4)
//	err = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
//		&eth, &ip4, &udp, &bth, &reth, gopacket.Payload(data))
//	err = rocelayers.FixICRC(buf.Bytes(), layers.LinkTypeEthernet)
//
// FixICRC also corrects a non-zero UDP checksum, which the ICRC changed.
package layers
