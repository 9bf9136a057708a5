// Package flowstest reads the test captures of the flows, ladder and trace
// packages: classic pcap files with an Ethernet or raw IP link type. The
// rxectl dump reader handles every format; this is the small subset the
// tests need without importing the command.
package flowstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/google/gopacket/pcapgo"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/packet"
)

// ReadPcap reads the RoCEv2 packets (UDP to port 4791) of a capture,
// numbering frames from 1 and counting every frame; a packet whose ICRC is
// wrong has flows.Packet.BadICRC set.
func ReadPcap(name string) ([]flows.Packet, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		return nil, err
	}
	var out []flows.Packet
	for n := 1; ; n++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		ip := data
		switch r.LinkType() {
		case 1: // Ethernet, without VLAN tags in the test captures
			et := binary.BigEndian.Uint16(data[12:])
			if et != 0x0800 && et != 0x86DD {
				continue
			}
			ip = data[14:]
		case 101, 228, 229:
		default:
			return nil, fmt.Errorf("%s: link type %d", name, r.LinkType())
		}
		dg, err := packet.ParseIP(ip)
		if err != nil || dg.Pseudo.DstPort != packet.UDPPort {
			continue
		}
		p, err := packet.Parse(dg.Payload)
		if err != nil {
			continue
		}
		out = append(out, flows.Packet{Frame: n, Time: ci.Timestamp, Pkt: p,
			Src: netip.AddrPortFrom(dg.Pseudo.Src, dg.Pseudo.SrcPort), Dst: netip.AddrPortFrom(dg.Pseudo.Dst, dg.Pseudo.DstPort),
			BadICRC: !dg.ICRCOK()})
	}
}

// Analyse runs a flows.Analyzer over pkts.
func Analyse(pkts []flows.Packet, o flows.Options) *flows.Report {
	a := flows.NewAnalyzer(o)
	for _, p := range pkts {
		a.Add(p)
	}
	return a.Report()
}
