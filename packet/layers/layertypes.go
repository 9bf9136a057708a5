package layers

import (
	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
)

// Layer types of RoCEv2, in gopacket's range for application layer types
// (1000-1999, which gopacket looks up in an array). gorxe takes the block
// 1790-1809: 1790 is the BTH and 1791+h the extension header packet.Hdr h,
// in the order the headers follow the BTH; 1801-1809 are kept free for
// future gorxe layers.
const (
	LayerTypeBTH          gopacket.LayerType = 1790 // Base Transport Header
	LayerTypeRDETH        gopacket.LayerType = 1791 // Reliable Datagram ETH (packet.HdrRDETH)
	LayerTypeDETH         gopacket.LayerType = 1792 // Datagram ETH (packet.HdrDETH)
	LayerTypeFETH         gopacket.LayerType = 1793 // FLUSH ETH (packet.HdrFETH)
	LayerTypeRETH         gopacket.LayerType = 1794 // RDMA ETH (packet.HdrRETH)
	LayerTypeAtomicETH    gopacket.LayerType = 1795 // Atomic ETH (packet.HdrAtomicETH)
	LayerTypeAETH         gopacket.LayerType = 1796 // ACK ETH (packet.HdrAETH)
	LayerTypeAtomicAckETH gopacket.LayerType = 1797 // Atomic Acknowledge ETH (packet.HdrAtomicAckETH)
	LayerTypeImmDt        gopacket.LayerType = 1798 // Immediate Data (packet.HdrImmDt)
	LayerTypeIETH         gopacket.LayerType = 1799 // Invalidate ETH (packet.HdrIETH)
	LayerTypeCNP          gopacket.LayerType = 1800 // CNP body (packet.HdrCNP)
)

// hdrNames are the layer type names of the extension headers, by packet.Hdr.
var hdrNames = [packet.NumHdrs]string{"RDETH", "DETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "CNP"}

// hdrLayerType returns the layer type of extension header h: the layer
// types follow packet's header order, which TestRegistration checks.
func hdrLayerType(h packet.Hdr) gopacket.LayerType { return LayerTypeRDETH + gopacket.LayerType(h) }

// layerHdr returns the extension header of layer type t, if t is one.
func layerHdr(t gopacket.LayerType) (packet.Hdr, bool) {
	if t < LayerTypeRDETH || t >= LayerTypeRDETH+gopacket.LayerType(packet.NumHdrs) {
		return 0, false
	}
	return packet.Hdr(t - LayerTypeRDETH), true
}

func init() {
	gopacket.RegisterLayerType(int(LayerTypeBTH), gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
	for h := packet.Hdr(0); h < packet.NumHdrs; h++ {
		// A header decoded on its own: no BTH tells what follows it.
		gopacket.RegisterLayerType(int(hdrLayerType(h)), gopacket.LayerTypeMetadata{Name: hdrNames[h], Decoder: chain{h: h}})
	}
	RegisterPort(packet.UDPPort)
}

// RegisterPort makes gopacket decode UDP datagrams to (or, failing a
// decoder for the destination port, from) port as RoCEv2, starting with
// the BTH. Port 4791 is registered at init. Like
// gopacket/layers.RegisterUDPPortLayerType, which it calls, it writes a
// process-wide table without locking: call it before any decoding starts,
// for instance while parsing flags.
func RegisterPort(port uint16) {
	gplayers.RegisterUDPPortLayerType(gplayers.UDPPort(port), LayerTypeBTH)
}
