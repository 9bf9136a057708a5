package layers_test

import (
	"fmt"
	"net"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gorxe/gorxe/packet"
	rocelayers "github.com/gorxe/gorxe/packet/layers"
)

// Writing a packet as the package documentation says: serialize the
// layers with the UDP layer told its IP layer (for its checksum), then
// FixICRC.
func ExampleFixICRC() {
	eth := layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}
	ip4 := layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{192, 0, 2, 1}, DstIP: net.IP{192, 0, 2, 2}}
	udp := layers.UDP{SrcPort: 0xC000, DstPort: packet.UDPPort}
	if err := udp.SetNetworkLayerForChecksum(&ip4); err != nil {
		fmt.Println(err)
		return
	}
	bth := rocelayers.BTH{Opcode: packet.RCRDMAWriteOnly, PKey: packet.DefaultPKey, DestQP: 0x11, AckReq: true, PSN: 7}
	reth := rocelayers.RETH{VA: 0x1000, RKey: 0x1234, DMALen: 5}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&eth, &ip4, &udp, &bth, &reth, gopacket.Payload("hello"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := rocelayers.FixICRC(buf.Bytes(), layers.LinkTypeEthernet); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ICRC check:", rocelayers.CheckICRC(buf.Bytes(), layers.LinkTypeEthernet))
	d, _ := rocelayers.Datagram(buf.Bytes(), layers.LinkTypeEthernet)
	fmt.Println("UDP checksum right:", d.Checksum == d.UDPChecksum())
	p, err := packet.Parse(d.Payload)
	fmt.Println(p.Opcode(), p.PadCnt(), string(p.Payload()), err)
	// Output:
	// ICRC check: <nil>
	// UDP checksum right: true
	// RC_RDMA_WRITE_ONLY 3 hello <nil>
}
