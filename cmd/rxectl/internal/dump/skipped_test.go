package dump

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// fragmentIPv4 splits the Ethernet/IPv4 frame whole into IP fragments
// with identification id: the first holds the IP header and the first
// first bytes (a multiple of 8) of its IP payload, the second the rest.
func fragmentIPv4(whole []byte, id uint16, first int) [][]byte {
	const eth = 14
	hdr, payload := whole[eth:eth+packet.IPv4HeaderSize], whole[eth+packet.IPv4HeaderSize:]
	frag := func(off int, part []byte, more bool) []byte {
		ip := slices.Clone(hdr)
		binary.BigEndian.PutUint16(ip[2:], uint16(packet.IPv4HeaderSize+len(part)))
		binary.BigEndian.PutUint16(ip[4:], id)
		fl := uint16(off / 8)
		if more {
			fl |= 0x2000 // MF (RFC 791)
		}
		binary.BigEndian.PutUint16(ip[6:], fl)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
		return slices.Concat(whole[:eth], ip, part)
	}
	return [][]byte{frag(0, payload[:first], true), frag(first, payload[first:], false)}
}

// fragmentIPv6 is fragmentIPv4 for an Ethernet/IPv6 frame: a Fragment
// header (RFC 8200 4.5) with identification id follows the fixed header.
func fragmentIPv6(whole []byte, id uint32, first int) [][]byte {
	const eth = 14
	hdr, payload := whole[eth:eth+packet.IPv6HeaderSize], whole[eth+packet.IPv6HeaderSize:]
	frag := func(off int, part []byte, more bool) []byte {
		ip := slices.Clone(hdr)
		ip[6] = 44
		binary.BigEndian.PutUint16(ip[4:], uint16(8+len(part)))
		fh := []byte{17, 0, 0, 0}
		fo := uint16(off)
		if more {
			fo |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], fo)
		fh = binary.BigEndian.AppendUint32(fh, id)
		return slices.Concat(whole[:eth], ip, fh, part)
	}
	return [][]byte{frag(0, payload[:first], true), frag(first, payload[first:], false)}
}

// TestSkippedSaid: what dump leaves out without decoding it is said on
// standard error, once, in the packet dump and in --flows: the IP
// fragments after the first of datagrams whose first fragment went to a
// RoCEv2 port (they carry no UDP header; the first is MALFORMED), over
// IPv4 and IPv6, and UDP datagrams between two ports neither of which
// is a RoCEv2 port whose RoCE packets check (rxectl --udp-port 0), with
// the --port that decodes them. A later fragment whose first fragment
// went elsewhere (DNS) counts not, nor does a datagram between other
// ports that is no RoCE; with the --ports the port note goes.
func TestSkippedSaid(t *testing.T) {
	send := gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: 5, AckReq: true}},
		payload: make([]byte, 64)}
	ack := gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCAcknowledge, PKey: packet.DefaultPKey, DestQP: 0x12, PSN: 5},
		AETH: packet.AETHFields{Syndrome: packet.SyndromeACKUnlimited, MSN: 1}}}
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	noID := func(int) uint16 { return 0 }
	to4791 := packet.PseudoHeader{Src: a, Dst: b, SrcPort: 49152, DstPort: packet.UDPPort}
	to4791v6 := packet.PseudoHeader{Src: a6, Dst: b6, SrcPort: 49152, DstPort: packet.UDPPort}
	toDNS := packet.PseudoHeader{Src: a, Dst: b, SrcPort: 49152, DstPort: 53}
	ab := packet.PseudoHeader{Src: a, Dst: b, SrcPort: 40000, DstPort: 40001, IPFlags: packet.IPv4FlagDF}
	ba := packet.PseudoHeader{Src: b, Dst: a, SrcPort: 40001, DstPort: 40000, IPFlags: packet.IPv4FlagDF}
	notRoCE := gsoFrame(t, ab, []gsoSegment{send}, noID)
	notRoCE[len(notRoCE)-1] ^= 0xFF // its ICRC no longer checks: some other protocol's bytes

	frag4 := fragmentIPv4(gsoFrame(t, to4791, []gsoSegment{send}, noID), 0x1234, 48)
	frag6 := fragmentIPv6(gsoFrame(t, to4791v6, []gsoSegment{send}, noID), 0x12345678, 48)
	dns := fragmentIPv4(gsoFrame(t, toDNS, []gsoSegment{send}, noID), 0x4321, 48)
	frames := [][]byte{
		frag4[0], frag4[1], frag6[1], frag6[0], // a later fragment may come first
		dns[0], dns[1],
		gsoFrame(t, ab, []gsoSegment{send}, noID),
		gsoFrame(t, ba, []gsoSegment{ack}, noID),
		gsoFrame(t, ba, []gsoSegment{ack}, noID),
		notRoCE,
	}
	var cf []capFrame
	for i, fr := range frames {
		cf = append(cf, capFrame{fr, gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1000), CaptureLength: len(fr), Length: len(fr)}})
	}
	file := writeFile(t, "skipped.pcap", pcapBytes(1, cf))
	const (
		fragNote = "rxectl dump: 2 IP fragments after the first of datagrams to a RoCEv2 port not decoded: they carry no UDP header (the first fragment of each is MALFORMED)\n"
		portNote = "rxectl dump: 2 UDP datagrams from port 40001 to port 40000 hold RoCEv2 packets (their ICRCs check), not decoded: add --port 40000\n" +
			"rxectl dump: 1 UDP datagram from port 40000 to port 40001 holds RoCEv2 packets (their ICRCs check), not decoded: add --port 40001\n"
	)
	tests := []struct {
		args []string
		want string // the end of standard error
	}{
		{[]string{"dump", file}, "rxectl dump: 10 frames, 2 RoCEv2 packets, 0 bad ICRC, 2 malformed\n" + fragNote + portNote},
		{[]string{"dump", "--flows", file}, fragNote + portNote},
		{[]string{"dump", "--port", "40000", "--port", "40001", file}, "rxectl dump: 10 frames, 6 RoCEv2 packets, 1 bad ICRC, 2 malformed\n" + fragNote},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args[:len(tc.args)-1], " "), func(t *testing.T) {
			_, errs, code := runCmd(t, tc.args...)
			require.Equal(t, cli.ExitOK, code, errs)
			require.True(t, strings.HasSuffix(errs, tc.want), "standard error:\n%s", errs)
			require.Equal(t, 1, strings.Count(errs, "IP fragments"), "said once:\n%s", errs)
			if !strings.Contains(tc.want, "add --port") {
				require.NotContains(t, errs, "add --port")
			}
		})
	}
}
