package dump

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// ipv6Frame builds an Ethernet frame carrying one RC_SEND_ONLY over IPv6
// with a valid ICRC; with hbh, an 8-byte Hop-by-Hop Options header (PadN)
// sits between the IPv6 header and UDP.
func ipv6Frame(t *testing.T, hbh bool) []byte {
	ph := packet.PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 50000, DstPort: 4791}
	f := gsoFrame(t, ph, []gsoSegment{{packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: 7}}, make([]byte, 32)}}, func(int) uint16 { return 0 })
	if !hbh {
		return f
	}
	ip := f[14:]
	out := append([]byte(nil), f[:14+40]...)
	out[14+6] = 0 // next header: Hop-by-Hop
	binary.BigEndian.PutUint16(out[14+4:], binary.BigEndian.Uint16(ip[4:])+8)
	out = append(out, 17, 0, 1, 4, 0, 0, 0, 0) // next UDP, length 0, PadN of 4
	return append(out, ip[40:]...)
}

// TestIPv6ExtensionHeader: a RoCEv2 datagram behind an IPv6 extension
// header is reported as malformed, with that reason, and counted, as
// tshark still finds its UDP port. It used to be skipped silently as
// another protocol, so its PSN looked lost.
func TestIPv6ExtensionHeader(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	frames := []capFrame{
		{ipv6Frame(t, false), gopacket.CaptureInfo{Timestamp: ts}},
		{ipv6Frame(t, true), gopacket.CaptureInfo{Timestamp: ts.Add(time.Millisecond)}},
	}
	path := writeFile(t, "v6ext.pcap", pcapBytes(1, frames))
	out, errOut, code := runCmd(t, "dump", path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "2 frames, 2 RoCEv2 packets, 0 bad ICRC, 1 malformed")
	require.Equal(t, 2, strings.Count(out, "\n"), out)
	require.Contains(t, out, "behind IPv6 extension headers")
}
