package flows

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// readPcap reads the RoCEv2 packets of a classic pcap with an Ethernet or
// raw IP link type: enough for the test captures.
func readPcap(t testing.TB, name string) []Packet {
	t.Helper()
	fh, err := os.Open(name)
	require.NoError(t, err)
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	require.NoError(t, err)
	var out []Packet
	for n := 1; ; n++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		ip := data
		switch r.LinkType() {
		case 1: // Ethernet, no VLAN tags in the test captures
			et := binary.BigEndian.Uint16(data[12:])
			if et != 0x0800 && et != 0x86DD {
				continue
			}
			ip = data[14:]
		case 101, 228, 229:
		default:
			t.Fatalf("%s: link type %d", name, r.LinkType())
		}
		dg, err := packet.ParseIP(ip)
		if err != nil || dg.Pseudo.DstPort != packet.UDPPort {
			continue
		}
		p, err := packet.Parse(dg.Payload)
		if err != nil {
			continue
		}
		out = append(out, Packet{Frame: n, Time: ci.Timestamp, Pkt: p,
			Src: netip.AddrPortFrom(dg.Pseudo.Src, dg.Pseudo.SrcPort), Dst: netip.AddrPortFrom(dg.Pseudo.Dst, dg.Pseudo.DstPort)})
	}
}

// analyse runs an Analyzer over pkts.
func analyse(pkts []Packet, o Options) *Report {
	a := NewAnalyzer(o)
	for _, p := range pkts {
		a.Add(p)
	}
	return a.Report()
}

func TestPreview(t *testing.T) {
	name := os.Getenv("FLOWS_PCAP")
	if name == "" {
		t.Skip("set FLOWS_PCAP to print the report of a capture")
	}
	rep := analyse(readPcap(t, name), Options{})
	require.NoError(t, rep.WriteText(os.Stdout))
}
