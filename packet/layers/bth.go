package layers

import (
	"encoding/binary"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// BTH is the Base Transport Header layer (IBA 9.2) of a RoCEv2 datagram.
//
// Decoding checks the whole datagram, BTH through ICRC, with packet.Parse.
// Contents is the 12-byte BTH; Payload is the extension headers and the
// payload, without the pad bytes and the ICRC (kept in ICRC).
//
// Serializing writes the BTH in front of what the later layers wrote, and
// appends PadCnt zero bytes and the ICRC field as a placeholder; FixICRC
// computes the real ICRC once the IP and UDP headers are in place.
type BTH struct {
	gplayers.BaseLayer

	Opcode packet.Opcode // selects the extension headers that follow
	SE     bool          // solicited event
	MigReq bool          // migration state
	PadCnt uint8         // pad bytes after the payload, 0..3
	TVer   uint8         // transport header version; 0 on the wire
	PKey   uint16        // partition key
	FECN   bool          // forward explicit congestion notification
	BECN   bool          // backward explicit congestion notification
	Resv6a uint8         // the 6 reserved bits after BECN
	DestQP uint32        // 24-bit destination queue pair
	AckReq bool          // acknowledge request
	Resv7  uint8         // the 7 reserved bits after AckReq
	PSN    packet.PSN    // 24-bit packet sequence number

	// ICRC is the invariant CRC, the datagram's last 4 bytes read
	// little-endian (the CRC-32 value, as packet.Packet.ICRC returns it).
	ICRC uint32

	pkt  packet.Packet      // the parsed datagram, BTH through ICRC
	next gopacket.LayerType // the first extension header, or payload
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the layer type of the first extension header the
// opcode carries, or gopacket.LayerTypePayload if it carries none.
func (b *BTH) NextLayerType() gopacket.LayerType { return b.next }

// Packet returns the datagram (BTH through ICRC) as packet.Parse returned
// it, or the zero Packet if the last decode failed. Its accessors point
// into the decoded data.
func (b *BTH) Packet() packet.Packet { return b.pkt }

// Fields returns the BTH fields as a packet.BTHFields.
func (b *BTH) Fields() packet.BTHFields {
	return packet.BTHFields{
		Opcode: b.Opcode, SE: b.SE, MigReq: b.MigReq, PadCnt: b.PadCnt, TVer: b.TVer, PKey: b.PKey,
		FECN: b.FECN, BECN: b.BECN, Resv6a: b.Resv6a, DestQP: b.DestQP, AckReq: b.AckReq, Resv7: b.Resv7, PSN: b.PSN,
	}
}

// SetFields sets the BTH fields from f.
func (b *BTH) SetFields(f *packet.BTHFields) {
	b.Opcode, b.SE, b.MigReq, b.PadCnt, b.TVer, b.PKey = f.Opcode, f.SE, f.MigReq, f.PadCnt&3, f.TVer&0x0F, f.PKey
	b.FECN, b.BECN, b.Resv6a, b.DestQP = f.FECN, f.BECN, f.Resv6a&0x3F, f.DestQP&packet.QPNMask
	b.AckReq, b.Resv7, b.PSN = f.AckReq, f.Resv7&0x7F, f.PSN&packet.PSNMask
}

// DecodeFromBytes decodes data, a whole RoCEv2 datagram (BTH through ICRC),
// into b; the layer refers to data, it does not copy it. It returns
// packet.Parse's error for a datagram Parse rejects, calling
// df.SetTruncated for packet.ErrTruncated; the BTH fields are then still
// decoded if data holds 12 bytes, but Payload, ICRC and Packet are zero.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*b = BTH{}
	if len(data) >= packet.BTHSize {
		f := packet.BTH(data).Fields()
		b.SetFields(&f)
		b.Contents = data[:packet.BTHSize:packet.BTHSize]
	}
	p, err := packet.Parse(data)
	if err != nil {
		if err == packet.ErrTruncated {
			df.SetTruncated()
		}
		return err
	}
	b.pkt = p
	b.ICRC = p.ICRC()
	end := len(data) - packet.ICRCSize - p.PadCnt()
	b.Payload = data[packet.BTHSize:end:end]
	b.next = nextLayer(p.Opcode(), 0)
	return nil
}

// SerializeTo writes the BTH in front of the bytes already in buf (the
// extension headers and payload), then appends the pad and a 4-byte ICRC
// placeholder holding the ICRC field. With opts.FixLengths it first sets
// PadCnt from the length of those bytes. Every byte it adds is written.
// The opcode is not checked, so that malformed packets can be made.
func (b *BTH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if opts.FixLengths {
		// Extension headers are multiples of 4 bytes long, so the pad of
		// everything after the BTH is the pad of the payload (IBA 9.2).
		b.PadCnt = uint8(packet.PadLen(len(buf.Bytes())))
	}
	pad := int(b.PadCnt & 3)
	tail, err := buf.AppendBytes(pad + packet.ICRCSize)
	if err != nil {
		return err
	}
	clear(tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], b.ICRC)
	hdr, err := buf.PrependBytes(packet.BTHSize)
	if err != nil {
		return err
	}
	f := b.Fields()
	packet.BTH(hdr).Encode(&f)
	return nil
}

// decodeBTH is the gopacket decoder of LayerTypeBTH: the extension headers
// that follow are linked to this BTH, so that they know the opcode.
func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	return p.NextDecoder(decoderFor(b, b.next))
}

// nextLayer returns the layer type that follows the extension headers
// before from in a datagram of opcode op: the first header from on that op
// carries, else gopacket.LayerTypePayload.
func nextLayer(op packet.Opcode, from packet.Hdr) gopacket.LayerType {
	m := op.Info().Mask
	for h := from; h < packet.NumHdrs; h++ {
		if m&h.Mask() != 0 {
			return hdrLayerType(h)
		}
	}
	return gopacket.LayerTypePayload
}
