package dump

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// TestHintOtherPort: two devices on one address (rxectl --loopback
// --ipv6) send to each other's own UDP port, one of them not 4791: the
// datagrams from 4791 to the other port (here the ACKs) are RoCEv2 too,
// which the default ports leave out. The packet dump and the flow
// analysis say how many such datagrams there were (UDP from a RoCEv2
// port, holding packets whose ICRCs check) and which --port decodes
// them; a datagram from 4791 that is no RoCE (DNS, say) counts not, and
// with the --port nothing is left to say.
func TestHintOtherPort(t *testing.T) {
	server := netip.MustParseAddr("::1")
	toServer := packet.PseudoHeader{Src: server, Dst: server, SrcPort: 35853, DstPort: packet.UDPPort}
	toClient := packet.PseudoHeader{Src: server, Dst: server, SrcPort: packet.UDPPort, DstPort: 35853}
	send := gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: 5, AckReq: true}},
		payload: []byte("hello")}
	ack := gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCAcknowledge, PKey: packet.DefaultPKey, DestQP: 0x12, PSN: 5},
		AETH: packet.AETHFields{Syndrome: packet.SyndromeACKUnlimited, MSN: 1}}}
	notRoCE := gsoFrame(t, toClient, []gsoSegment{send}, func(int) uint16 { return 0 })
	notRoCE[len(notRoCE)-1] ^= 0xFF // its ICRC no longer checks: some other protocol's bytes
	frames := [][]byte{
		gsoFrame(t, toServer, []gsoSegment{send}, func(int) uint16 { return 0 }),
		gsoFrame(t, toClient, []gsoSegment{ack}, func(int) uint16 { return 0 }),
		gsoFrame(t, toClient, []gsoSegment{ack, ack}, func(int) uint16 { return 0 }),
		notRoCE,
	}
	var cf []capFrame
	for i, b := range frames {
		cf = append(cf, capFrame{b, gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1000), CaptureLength: len(b), Length: len(b)}})
	}
	file := writeFile(t, "twoports.pcap", pcapBytes(1, cf))
	const hint = "rxectl dump: 2 UDP datagrams from port 4791 to port 35853 hold RoCEv2 packets (their ICRCs check), not decoded: add --port 35853\n"
	tests := []struct {
		args []string
		want string // the end of standard error
	}{
		{[]string{"dump", file}, "rxectl dump: 4 frames, 1 RoCEv2 packet, 0 bad ICRC, 0 malformed\n" + hint},
		{[]string{"dump", "--flows", file}, hint},
		{[]string{"dump", "--port", "35853", file}, "rxectl dump: 4 frames, 5 RoCEv2 packets, 1 bad ICRC, 0 malformed\n"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args[:len(tc.args)-1], " "), func(t *testing.T) {
			_, errs, code := runCmd(t, tc.args...)
			require.Equal(t, cli.ExitOK, code, errs)
			require.True(t, strings.HasSuffix(errs, tc.want), "standard error:\n%s", errs)
			if !strings.Contains(tc.want, "add --port") {
				require.NotContains(t, errs, "--port")
			}
		})
	}
}
