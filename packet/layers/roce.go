package layers

import (
	"github.com/google/gopacket"

	"github.com/gorxe/gorxe/packet"
)

// RoCE holds one layer of each RoCEv2 type, for a
// gopacket.DecodingLayerParser. Its extension headers are linked to its BTH,
// whose opcode tells each of them which header follows it. A RoCE must not
// be copied after DecodingLayers has been called.
type RoCE struct {
	BTH          BTH
	RDETH        RDETH
	DETH         DETH
	FETH         FETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
	CNP          CNP
}

// DecodingLayers links r's extension headers to r.BTH and returns the
// eleven layers, to pass to gopacket.NewDecodingLayerParser or
// AddDecodingLayer (together with gopacket.Payload for the payload). A
// parser may use some of r's layers only, once DecodingLayers has linked
// them.
func (r *RoCE) DecodingLayers() []gopacket.DecodingLayer {
	for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
		r.ext(h).linkTo(&r.BTH)
	}
	return []gopacket.DecodingLayer{&r.BTH, &r.RDETH, &r.DETH, &r.FETH, &r.RETH, &r.AtomicETH,
		&r.AETH, &r.AtomicAckETH, &r.ImmDt, &r.IETH, &r.CNP}
}

// ext returns r's layer for extension header h.
func (r *RoCE) ext(h packet.Hdr) extLayer {
	switch h {
	case packet.HdrRDETH:
		return &r.RDETH
	case packet.HdrDETH:
		return &r.DETH
	case packet.HdrFETH:
		return &r.FETH
	case packet.HdrRETH:
		return &r.RETH
	case packet.HdrAtomicETH:
		return &r.AtomicETH
	case packet.HdrAETH:
		return &r.AETH
	case packet.HdrAtomicAckETH:
		return &r.AtomicAckETH
	case packet.HdrImmDt:
		return &r.ImmDt
	case packet.HdrIETH:
		return &r.IETH
	default:
		return &r.CNP
	}
}

// newExt returns a new layer for extension header h: one of a fresh
// RoCE's, so that ext alone maps headers to layers (gopacket's decoding
// path allocates its layers anyway).
func newExt(h packet.Hdr) extLayer { return new(RoCE).ext(h) }

// extLayer is what every extension-header layer implements.
type extLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
	linkTo(*BTH)
}

func (k *link) linkTo(b *BTH) { k.bth = b }

// chain is the gopacket.Decoder of extension header h of a datagram whose
// BTH is bth (nil for a header decoded on its own).
type chain struct {
	bth *BTH
	h   packet.Hdr
}

// Decode decodes the header, adds it to p and goes on with what follows.
func (c chain) Decode(data []byte, p gopacket.PacketBuilder) error {
	l := newExt(c.h)
	l.linkTo(c.bth)
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return p.NextDecoder(decoderFor(c.bth, l.NextLayerType()))
}

// decoderFor returns the decoder of layer type t following BTH b: a linked
// chain decoder for an extension header, else t's registered decoder.
func decoderFor(b *BTH, t gopacket.LayerType) gopacket.Decoder {
	if h, ok := layerHdr(t); ok {
		return chain{bth: b, h: h}
	}
	return t
}
