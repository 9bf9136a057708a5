package layers

import (
	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// link is embedded in every extension-header layer. An extension header
// does not say what follows it; the opcode of its BTH does, so the layer
// keeps a pointer to the BTH it belongs to (set by decodeBTH or by
// RoCE.DecodingLayers).
type link struct {
	bth  *BTH
	next gopacket.LayerType
}

// split checks that data holds extension header h, sets base to the
// header and what follows it, and chooses the next layer type. It returns
// the header bytes.
func split(base *gplayers.BaseLayer, k *link, data []byte, df gopacket.DecodeFeedback, h packet.Hdr) ([]byte, error) {
	n := h.Size()
	if len(data) < n {
		df.SetTruncated()
		return nil, packet.ErrTruncated
	}
	base.Contents, base.Payload = data[:n:n], data[n:]
	if k.bth != nil {
		k.next = nextLayer(k.bth.Opcode, h+1)
	} else {
		k.next = gopacket.LayerTypePayload
	}
	return data[:n:n], nil
}

// RDETH is the Reliable Datagram Extended Transport Header layer
// (IBA 9.3.1).
type RDETH struct {
	gplayers.BaseLayer
	EEC uint32 // 24-bit end-to-end context
	link
}

// LayerType returns LayerTypeRDETH.
func (l *RDETH) LayerType() gopacket.LayerType { return LayerTypeRDETH }

// CanDecode returns LayerTypeRDETH.
func (l *RDETH) CanDecode() gopacket.LayerClass { return LayerTypeRDETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *RDETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *RDETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = RDETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrRDETH)
	if err != nil {
		return err
	}
	l.EEC = packet.RDETH(b).EEC()
	return nil
}

// SerializeTo prepends the header to buf, reserved bits zero.
func (l *RDETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.RDETHSize)
	if err != nil {
		return err
	}
	packet.RDETH(b).SetEEC(l.EEC)
	return nil
}

// DETH is the Datagram Extended Transport Header layer (IBA 9.3.2), carried
// by UD and RD requests.
type DETH struct {
	gplayers.BaseLayer
	QKey  uint32 // queue key
	SrcQP uint32 // 24-bit source queue pair
	link
}

// LayerType returns LayerTypeDETH.
func (l *DETH) LayerType() gopacket.LayerType { return LayerTypeDETH }

// CanDecode returns LayerTypeDETH.
func (l *DETH) CanDecode() gopacket.LayerClass { return LayerTypeDETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *DETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = DETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrDETH)
	if err != nil {
		return err
	}
	l.QKey, l.SrcQP = packet.DETH(b).QKey(), packet.DETH(b).SrcQP()
	return nil
}

// SerializeTo prepends the header to buf, reserved bits zero.
func (l *DETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.DETHSize)
	if err != nil {
		return err
	}
	packet.DETH(b).Encode(l.QKey, l.SrcQP)
	return nil
}

// FETH is the FLUSH Extended Transport Header layer (IBA memory placement
// extensions; rxe_hdr.h).
type FETH struct {
	gplayers.BaseLayer
	Value uint32 // the raw FETH word
	link
}

// SelectivityLevel returns bits 5..4 of Value: 0 flushes a memory range,
// 1 a whole memory region.
func (l *FETH) SelectivityLevel() uint8 { return uint8(l.Value>>4) & 3 }

// PlacementType returns bits 3..0 of Value: bit 0 global visibility, bit 1
// persistence.
func (l *FETH) PlacementType() uint8 { return uint8(l.Value) & 0x0F }

// LayerType returns LayerTypeFETH.
func (l *FETH) LayerType() gopacket.LayerType { return LayerTypeFETH }

// CanDecode returns LayerTypeFETH.
func (l *FETH) CanDecode() gopacket.LayerClass { return LayerTypeFETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *FETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *FETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = FETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrFETH)
	if err != nil {
		return err
	}
	l.Value = packet.FETH(b).Value()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *FETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.FETHSize)
	if err != nil {
		return err
	}
	packet.FETH(b).SetValue(l.Value)
	return nil
}

// RETH is the RDMA Extended Transport Header layer (IBA 9.3.3) of RDMA
// WRITE, READ, FLUSH and ATOMIC_WRITE requests.
type RETH struct {
	gplayers.BaseLayer
	VA     uint64 // virtual address
	RKey   uint32 // remote key
	DMALen uint32 // length of the whole message
	link
}

// LayerType returns LayerTypeRETH.
func (l *RETH) LayerType() gopacket.LayerType { return LayerTypeRETH }

// CanDecode returns LayerTypeRETH.
func (l *RETH) CanDecode() gopacket.LayerClass { return LayerTypeRETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *RETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = RETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrRETH)
	if err != nil {
		return err
	}
	r := packet.RETH(b)
	l.VA, l.RKey, l.DMALen = r.VA(), r.RKey(), r.DMALen()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *RETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.RETHSize)
	if err != nil {
		return err
	}
	packet.RETH(b).Encode(&packet.RETHFields{VA: l.VA, RKey: l.RKey, DMALen: l.DMALen})
	return nil
}

// AtomicETH is the Atomic Extended Transport Header layer (IBA 9.3.4) of
// COMPARE_SWAP and FETCH_ADD requests.
type AtomicETH struct {
	gplayers.BaseLayer
	VA      uint64 // virtual address
	RKey    uint32 // remote key
	SwapAdd uint64 // swap (COMPARE_SWAP) or add (FETCH_ADD) operand; first on the wire
	Compare uint64 // compare operand (COMPARE_SWAP)
	link
}

// LayerType returns LayerTypeAtomicETH.
func (l *AtomicETH) LayerType() gopacket.LayerType { return LayerTypeAtomicETH }

// CanDecode returns LayerTypeAtomicETH.
func (l *AtomicETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *AtomicETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = AtomicETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrAtomicETH)
	if err != nil {
		return err
	}
	a := packet.AtomicETH(b)
	l.VA, l.RKey, l.SwapAdd, l.Compare = a.VA(), a.RKey(), a.SwapAdd(), a.Compare()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *AtomicETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.AtomicETHSize)
	if err != nil {
		return err
	}
	packet.AtomicETH(b).Encode(&packet.AtomicETHFields{VA: l.VA, RKey: l.RKey, SwapAdd: l.SwapAdd, Compare: l.Compare})
	return nil
}

// AETH is the ACK Extended Transport Header layer (IBA 9.3.5) of
// acknowledgements and RDMA READ responses.
type AETH struct {
	gplayers.BaseLayer
	Syndrome packet.Syndrome // ACK, RNR NAK or NAK, with credits, timer or code
	MSN      uint32          // 24-bit message sequence number
	link
}

// LayerType returns LayerTypeAETH.
func (l *AETH) LayerType() gopacket.LayerType { return LayerTypeAETH }

// CanDecode returns LayerTypeAETH.
func (l *AETH) CanDecode() gopacket.LayerClass { return LayerTypeAETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *AETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = AETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrAETH)
	if err != nil {
		return err
	}
	l.Syndrome, l.MSN = packet.AETH(b).Syndrome(), packet.AETH(b).MSN()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *AETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.AETHSize)
	if err != nil {
		return err
	}
	packet.AETH(b).Encode(l.Syndrome, l.MSN)
	return nil
}

// AtomicAckETH is the Atomic Acknowledge Extended Transport Header layer
// (IBA 9.3.6).
type AtomicAckETH struct {
	gplayers.BaseLayer
	Orig uint64 // the original remote data
	link
}

// LayerType returns LayerTypeAtomicAckETH.
func (l *AtomicAckETH) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }

// CanDecode returns LayerTypeAtomicAckETH.
func (l *AtomicAckETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicAckETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *AtomicAckETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = AtomicAckETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrAtomicAckETH)
	if err != nil {
		return err
	}
	l.Orig = packet.AtomicAckETH(b).Orig()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *AtomicAckETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.AtomicAckETHSize)
	if err != nil {
		return err
	}
	packet.AtomicAckETH(b).SetOrig(l.Orig)
	return nil
}

// ImmDt is the Immediate Data header layer (IBA 9.3.7).
type ImmDt struct {
	gplayers.BaseLayer
	Imm uint32 // the immediate data, read big-endian
	link
}

// LayerType returns LayerTypeImmDt.
func (l *ImmDt) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// CanDecode returns LayerTypeImmDt.
func (l *ImmDt) CanDecode() gopacket.LayerClass { return LayerTypeImmDt }

// NextLayerType returns the next header of the opcode, or payload.
func (l *ImmDt) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = ImmDt{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrImmDt)
	if err != nil {
		return err
	}
	l.Imm = packet.ImmDt(b).Imm()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *ImmDt) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.ImmDtSize)
	if err != nil {
		return err
	}
	packet.ImmDt(b).SetImm(l.Imm)
	return nil
}

// IETH is the Invalidate Extended Transport Header layer (IBA 9.3.8) of
// SEND WITH INVALIDATE.
type IETH struct {
	gplayers.BaseLayer
	RKey uint32 // the R_Key to invalidate
	link
}

// LayerType returns LayerTypeIETH.
func (l *IETH) LayerType() gopacket.LayerType { return LayerTypeIETH }

// CanDecode returns LayerTypeIETH.
func (l *IETH) CanDecode() gopacket.LayerClass { return LayerTypeIETH }

// NextLayerType returns the next header of the opcode, or payload.
func (l *IETH) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the header at the start of data; the rest is
// the layer's payload. It returns packet.ErrTruncated for short data.
func (l *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = IETH{link: link{bth: l.bth}}
	b, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrIETH)
	if err != nil {
		return err
	}
	l.RKey = packet.IETH(b).RKey()
	return nil
}

// SerializeTo prepends the header to buf.
func (l *IETH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.IETHSize)
	if err != nil {
		return err
	}
	packet.IETH(b).SetRKey(l.RKey)
	return nil
}

// CNP is the body of a RoCEv2 congestion notification packet (IBA A17.9.2):
// 16 reserved bytes after the BTH. It has no fields; Contents holds the
// bytes as received, and SerializeTo writes zeros.
type CNP struct {
	gplayers.BaseLayer
	link
}

// LayerType returns LayerTypeCNP.
func (l *CNP) LayerType() gopacket.LayerType { return LayerTypeCNP }

// CanDecode returns LayerTypeCNP.
func (l *CNP) CanDecode() gopacket.LayerClass { return LayerTypeCNP }

// NextLayerType returns gopacket.LayerTypePayload: nothing follows the
// CNP body in a valid packet.
func (l *CNP) NextLayerType() gopacket.LayerType { return l.next }

// DecodeFromBytes decodes the 16-byte body at the start of data; the rest
// is the layer's payload. It returns packet.ErrTruncated for short data.
func (l *CNP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = CNP{link: link{bth: l.bth}}
	_, err := split(&l.BaseLayer, &l.link, data, df, packet.HdrCNP)
	return err
}

// SerializeTo prepends 16 zero bytes to buf.
func (l *CNP) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(packet.CNPSize)
	if err != nil {
		return err
	}
	clear(b)
	return nil
}
