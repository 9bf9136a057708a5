package dump

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// gsoDatagram builds an Ethernet frame whose UDP datagram holds one RDMA
// WRITE MIDDLE packet per payload size, back to back, each with the ICRC
// of a datagram of its own length; over IPv4 segment i has IP ID id(i),
// and the frame's IP header carries id(0).
func gsoDatagram(t testing.TB, ph packet.PseudoHeader, sizes []int, id func(i int) uint16) []byte {
	t.Helper()
	var segs []gsoSegment
	for i, n := range sizes {
		h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteMiddle, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: packet.PSN(100 + i)}}
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(i*7 + j)
		}
		segs = append(segs, gsoSegment{h, payload})
	}
	return gsoFrame(t, ph, segs, id)
}

// gsoSegment is one RoCE packet of a gsoFrame.
type gsoSegment struct {
	h       packet.Headers
	payload []byte
}

// gsoFrame builds an Ethernet frame whose UDP datagram holds segs back to
// back, each with the ICRC of a datagram of its own length; over IPv4
// segment i has IP ID id(i), and the frame's IP header carries id(0).
func gsoFrame(t testing.TB, ph packet.PseudoHeader, segs []gsoSegment, id func(i int) uint16) []byte {
	t.Helper()
	var roce []byte
	for i, sg := range segs {
		seg := ph
		seg.IPID = id(i)
		b := make([]byte, packet.PacketLen(sg.h.BTH.Opcode, len(sg.payload)))
		_, err := packet.Build(b, &sg.h, sg.payload, &seg)
		require.NoError(t, err)
		roce = append(roce, b...)
	}
	udp := binary.BigEndian.AppendUint16(nil, ph.SrcPort)
	udp = binary.BigEndian.AppendUint16(udp, ph.DstPort)
	udp = binary.BigEndian.AppendUint16(udp, uint16(packet.UDPHeaderSize+len(roce)))
	udp = append(append(udp, 0, 0), roce...)
	var ip []byte
	et := uint16(0x0800)
	if ph.Is4() {
		ip = []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0}
		binary.BigEndian.PutUint16(ip[2:], uint16(packet.IPv4HeaderSize+len(udp)))
		binary.BigEndian.PutUint16(ip[4:], id(0))
		s, d := ph.Src.As4(), ph.Dst.As4()
		ip = append(append(ip, s[:]...), d[:]...)
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
	} else {
		et = 0x86DD
		ip = []byte{0x60, 0, 0, 0, 0, 0, 17, 64}
		binary.BigEndian.PutUint16(ip[4:], uint16(len(udp)))
		s, d := ph.Src.As16(), ph.Dst.As16()
		ip = append(append(ip, s[:]...), d[:]...)
	}
	binary.BigEndian.PutUint16(udp[6:], packet.UDPChecksum(ip, udp))
	eth := append(make([]byte, 12), byte(et>>8), byte(et))
	return append(append(eth, ip...), udp...)
}

// TestDumpSplitsSegments: a datagram holding several RoCE packets (a GSO
// buffer or GRO-merged datagrams) gives one line per packet, each saying
// which segment it is, with a valid ICRC, or a bad one for a segment that
// was corrupted while the others check (the others are whole packets of
// their own, which a receiver of the segmented datagrams accepts). A
// datagram whose ICRCs show no split stays one packet with a bad ICRC:
// over IPv4 that includes one in which only the first segment checks,
// since then nothing shows the IDs the others were sent with.
func TestDumpSplitsSegments(t *testing.T) {
	ph4 := packet.PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49152, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	ph6 := packet.PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 49152, DstPort: packet.UDPPort}
	counting := func(i int) uint16 { return 0x1234 + uint16(i) }
	fixed := func(int) uint16 { return 0 }
	scattered := func(i int) uint16 { return uint16(i * 7919) }
	// seg is the offset in the RoCE payload of byte 100 of segment i's
	// payload, for packets of 1024 payload bytes.
	seg := func(i int) int { return i*(1024+12+4) + 12 + 100 }
	tests := []struct {
		name    string
		ph      packet.PseudoHeader
		sizes   []int
		id      func(int) uint16
		corrupt int // byte of the RoCE payload to flip, -1 for none
		want    int // lines, each a segment when > 1
		// bad is the segment (from 1) with a bad ICRC; -1 for one line
		// with a bad ICRC, the datagram not split; 0 for none.
		bad int
	}{
		{"IPv4 GSO, counting IDs, shorter last", ph4, []int{1024, 1024, 1024, 512}, counting, -1, 4, 0},
		{"IPv4, one ID for all", ph4, []int{256, 256, 256}, fixed, -1, 3, 0},
		{"IPv4, IDs neither counting nor fixed", ph4, []int{4096, 4096}, scattered, -1, 1, -1},
		{"IPv6 GRO", ph6, []int{2048, 2048, 100}, fixed, -1, 3, 0},
		{"one packet", ph4, []int{1024}, fixed, -1, 1, 0},
		{"corrupted second segment", ph4, []int{1024, 1024, 1024}, counting, seg(1), 3, 2},
		{"corrupted second segment, one ID for all", ph4, []int{1024, 1024, 1024}, fixed, seg(1), 3, 2},
		{"corrupted first segment", ph4, []int{1024, 1024, 1024}, counting, seg(0), 3, 1},
		{"corrupted last segment", ph4, []int{1024, 1024, 1024}, counting, seg(2), 3, 3},
		{"IPv6, corrupted second segment", ph6, []int{1024, 1024, 1024}, fixed, seg(1), 3, 2},
		{"IPv6, corrupted first of two", ph6, []int{1024, 1024}, fixed, seg(0), 2, 1},
		{"IPv4, corrupted second of two: its ID unknown", ph4, []int{1024, 1024}, counting, seg(1), 1, -1},
		{"IPv4, every segment corrupted", ph4, []int{1024, 1024, 1024}, counting, -2, 1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frame := gsoDatagram(t, tc.ph, tc.sizes, tc.id)
			roce := len(frame)
			for _, n := range tc.sizes {
				roce -= n + 12 + 4 // RoCE packets from the end: BTH, payload, ICRC
			}
			switch {
			case tc.corrupt >= 0:
				frame[roce+tc.corrupt] ^= 0x20
			case tc.corrupt == -2:
				for i := range tc.sizes {
					frame[roce+seg(i)] ^= 0x20
				}
			}
			first := capFrame{data: frame, ci: gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(frame), Length: len(frame)}}
			path := writeFile(t, "gso.pcap", pcapBytes(1, []capFrame{first}))
			out, errs, code := runCmd(t, "dump", "--json", path)
			require.Equal(t, cli.ExitOK, code, errs)
			lines := decodeJSONLines(t, out)
			require.Len(t, lines, tc.want)
			for i, m := range lines {
				require.Equal(t, 1, frameNum(t, m), "every segment has the datagram's frame number")
				require.Equal(t, "RC_RDMA_WRITE_MIDDLE", m["opcode"])
				if tc.bad < 0 {
					require.Equal(t, false, m["icrc_ok"])
					require.NotContains(t, m, "segment")
					require.Equal(t, tc.sizes[0]*len(tc.sizes)+(len(tc.sizes)-1)*16, jsonInt(t, m["payload_len"]), "the whole datagram as one packet")
					continue
				}
				require.Equal(t, i+1 != tc.bad, m["icrc_ok"], "%v", m)
				require.Equal(t, 100+i, jsonInt(t, m["psn"]))
				require.Equal(t, tc.sizes[i], jsonInt(t, m["payload_len"]))
				if tc.want == 1 {
					require.NotContains(t, m, "segment")
				} else {
					require.Equal(t, i+1, jsonInt(t, m["segment"]))
					require.Equal(t, tc.want, jsonInt(t, m["segments"]))
				}
			}
			text, errs, code := runCmd(t, "dump", path)
			require.Equal(t, cli.ExitOK, code)
			summary := fmt.Sprintf("rxectl dump: 1 frame, %d RoCEv2 packets, %d bad ICRC, 0 malformed\n", tc.want, min(tc.bad, 1))
			if tc.want == 1 {
				summary = "rxectl dump: 1 frame, 1 RoCEv2 packet, 0 bad ICRC, 0 malformed\n"
			}
			if tc.bad < 0 {
				summary = "rxectl dump: 1 frame, 1 RoCEv2 packet, 1 bad ICRC, 0 malformed\n"
			}
			require.Equal(t, summary, errs)
			if tc.want > 1 {
				require.Equal(t, tc.want, strings.Count(text, " in one UDP datagram: GSO/GRO)\n"))
				if tc.bad > 0 {
					// The bad segment's expected ICRC is the one for its
					// own datagram, the IDs as the good segments show them.
					d, err := packet.ParseFrame(frame, packet.LinkEthernet)
					require.NoError(t, err)
					n := 1024 + 12 + 4
					b := d.Payload[(tc.bad-1)*n : tc.bad*n]
					ph := tc.ph
					ph.IPID = tc.id(tc.bad - 1)
					want, err := ph.ICRC(b)
					require.NoError(t, err)
					require.Contains(t, text, fmt.Sprintf("ICRC BAD (wire %#08x want %#08x) (segment %d of %d in one UDP datagram: GSO/GRO)\n",
						binary.LittleEndian.Uint32(b[n-4:]), want, tc.bad, tc.want))
				} else {
					require.Contains(t, text, "ICRC ok (segment 2 of ")
				}
			}
		})
	}
}

// jsonInt is a JSON number of decodeJSONLines as an int.
func jsonInt(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "%v is not a number", v)
	i, err := n.Int64()
	require.NoError(t, err)
	return int(i)
}

// TestReadPacketsNumbersSegments checks that ReadPackets gives each packet
// of a datagram that holds several the datagram's frame number and its own
// segment (1, 2, 3), and a datagram of one packet segment 0, so the flow
// analysis can note each packet of a GSO buffer apart.
func TestReadPacketsNumbersSegments(t *testing.T) {
	ph := packet.PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49152, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	ts := time.Unix(1700000000, 0)
	gso := gsoDatagram(t, ph, []int{1024, 1024, 512}, func(i int) uint16 { return 0x1234 + uint16(i) })
	one := gsoDatagram(t, ph, []int{256}, func(int) uint16 { return 0 })
	b := pcapBytes(1, []capFrame{
		{data: gso, ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(gso), Length: len(gso)}},
		{data: one, ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(one), Length: len(one)}},
	})
	pkts, err := ReadPackets(strings.NewReader(string(b)), Ports{packet.UDPPort})
	require.NoError(t, err)
	var got [][2]int
	for _, p := range pkts {
		got = append(got, [2]int{p.Frame, p.Segment})
	}
	require.Equal(t, [][2]int{{1, 1}, {1, 2}, {1, 3}, {2, 0}}, got)
}
