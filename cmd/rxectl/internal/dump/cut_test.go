package dump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// snapPcap is frames 1-8, 20-22 and 47-50 of the kernel rdmacm capture
// (rdmacmPcap) with every frame cut to 100 bytes, as a capture with a
// snap length of 100 has them: "editcap -F pcap -r -s 100
// kernel-rxe_rdmacm_send_4KiB.pcap rdmacm_snap100.pcap 1-8 20-22 47-50".
// It holds CM MADs (REQ, REP, RTU) cut inside their message, SEND_ONLYs
// and ACKs short enough to be whole, SEND_ONLYs and SEND_FIRST..LAST of
// 1 KiB cut inside their payload.
const snapPcap = "testdata/rdmacm_snap100.pcap"

// cutTestPH is the pseudo-header of the built test datagrams.
var cutTestPH = packet.PseudoHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 49152, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}

// writeFirst builds an Ethernet frame of one RDMA WRITE FIRST (RETH)
// with n bytes of payload.
func writeFirst(t testing.TB, n int) []byte {
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteFirst, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: 42},
		RETH: packet.RETHFields{VA: 0xABC000, RKey: 0x77, DMALen: 4096}}
	return gsoFrame(t, cutTestPH, []gsoSegment{{h, make([]byte, n)}}, func(int) uint16 { return 9 })
}

// readRequests builds an Ethernet frame of n READ requests back to back
// (a GRO merge), PSNs 10, 14, ...
func readRequests(t testing.TB, n int) []byte {
	var segs []gsoSegment
	for i := range n {
		segs = append(segs, gsoSegment{h: packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAReadRequest, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: packet.PSN(10 + 4*i)},
			RETH: packet.RETHFields{VA: 0x1000, RKey: 7, DMALen: 4096}}})
	}
	return gsoFrame(t, cutTestPH, segs, func(i int) uint16 { return uint16(i) })
}

// roceOff is where the BTH starts in the built Ethernet/IPv4 frames.
const roceOff = 14 + packet.IPv4HeaderSize + packet.UDPHeaderSize

// TestDecodeCutFrame: a frame the capture cut short (fewer bytes captured
// than were on the wire) is decoded as far as its bytes go: the BTH and
// the extension headers it holds whole, the payload length from the IP
// and UDP lengths; it is neither malformed nor of a bad ICRC.
func TestDecodeCutFrame(t *testing.T) {
	tests := []struct {
		name     string
		frame    []byte
		capLen   int // bytes kept
		origLen  int // 0: len(frame)
		kind     Kind
		captured int  // Frame.Captured of a truncated packet
		headers  bool // HeadersCaptured
		payload  int
		err      error  // KindMalformed
		text     string // in the line of a KindCut frame
	}{
		{name: "cut in the payload", frame: writeFirst(t, 1024), capLen: roceOff + 28 + 10, kind: KindRoCE, captured: 38, headers: true, payload: 1024},
		{name: "cut in the ICRC", frame: writeFirst(t, 8), capLen: roceOff + 28 + 8 + 2, kind: KindRoCE, captured: 38, headers: true, payload: 8},
		{name: "cut inside the RETH", frame: writeFirst(t, 1024), capLen: roceOff + 12 + 5, kind: KindRoCE, captured: 17, payload: 1024},
		{name: "cut right after the BTH", frame: writeFirst(t, 1024), capLen: roceOff + 12, kind: KindRoCE, captured: 12, payload: 1024},
		{name: "cut inside the BTH", frame: writeFirst(t, 1024), capLen: roceOff + 11, kind: KindCut,
			text: "): it ends before the end of the BTH (11 of the 1056-byte RoCE packet), no RoCE header to decode\n"},
		{name: "cut inside the UDP header", frame: writeFirst(t, 1024), capLen: roceOff - 3, kind: KindCut,
			text: "): it ends inside the IP or UDP header, no RoCE header to decode\n"},
		{name: "IP length beyond the wire", frame: func() []byte {
			f := writeFirst(t, 1024)
			binary.BigEndian.PutUint16(f[14+2:], 2000)
			return f
		}(), capLen: roceOff + 40, kind: KindMalformed, err: packet.ErrBadIPHeader},
		{name: "reserved opcode", frame: func() []byte {
			f := writeFirst(t, 1024)
			f[roceOff] = 0xA0 // XRC
			return f
		}(), capLen: roceOff + 40, kind: KindMalformed, err: packet.ErrUnknownOpcode},
		{name: "UDP length beyond the IP packet", frame: func() []byte {
			f := writeFirst(t, 1024)
			binary.BigEndian.PutUint16(f[14+20+4:], 3000)
			return f
		}(), capLen: roceOff + 40, kind: KindMalformed, err: packet.ErrBadIPHeader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.origLen
			if orig == 0 {
				orig = len(tc.frame)
			}
			data := tc.frame[:tc.capLen]
			f := Frame{Num: 1, CapLen: len(data), OrigLen: orig}
			DecodeFrame(&f, data, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, tc.kind, f.Kind, "%v", f.Err)
			require.Equal(t, cutTestPH.Dst, f.Dst.Addr())
			switch tc.kind {
			case KindRoCE:
				require.True(t, f.Truncated)
				require.False(t, f.ICRCOK)
				require.Equal(t, tc.captured, f.Captured)
				require.Equal(t, tc.headers, f.HeadersCaptured())
				require.Equal(t, tc.headers, f.HeaderCaptured(packet.HdrRETH))
				require.Equal(t, packet.RCRDMAWriteFirst, f.Packet.Opcode())
				require.Equal(t, packet.PSN(42), f.Packet.PSN())
				require.Equal(t, tc.payload, f.Packet.PayloadLen())
			case KindMalformed:
				require.ErrorIs(t, f.Err, tc.err)
				require.ErrorContains(t, f.Err, "frame cut by the capture")
			case KindCut:
				require.NoError(t, f.Err)
				require.Contains(t, string(AppendText(nil, &f, []byte("0"), false)), tc.text)
			}
			require.True(t, json.Valid(AppendJSON(nil, &f)))
			require.NotEmpty(t, AppendText(nil, &f, []byte("0.000000"), true))
		})
	}
}

// TestCutFrameText: the line of a cut packet shows the headers it holds,
// the payload length, and says what the capture held and what could not
// be checked; a header the capture cut is not shown with zeros.
func TestCutFrameText(t *testing.T) {
	line := func(frame []byte, capLen int) string {
		f := Frame{Num: 3, CapLen: capLen, OrigLen: len(frame)}
		DecodeFrame(&f, frame[:capLen], packet.LinkEthernet, Ports{packet.UDPPort})
		return string(AppendText(nil, &f, []byte("0.000001"), false))
	}
	full := writeFirst(t, 1024)
	require.Equal(t, "    3 0.000001 10.0.0.1:49152 → 10.0.0.2:4791 RC_RDMA_WRITE_FIRST qp=0x000011 psn=42 reth va=0xabc000 rkey=0x77 len=4096 payload=1024"+
		" TRUNCATED by the capture (100 of 1098 bytes captured): payload and ICRC not checked\n", line(full, 100))
	require.Equal(t, "    3 0.000001 10.0.0.1:49152 → 10.0.0.2:4791 RC_RDMA_WRITE_FIRST qp=0x000011 psn=42 payload=1024"+
		" TRUNCATED by the capture (60 of 1098 bytes captured): RETH not captured; payload and ICRC not checked\n", line(full, 60))
	require.Equal(t, "    3 0.000001 10.0.0.1:49152 → 10.0.0.2:4791 TRUNCATED by the capture (50 of 1098 bytes captured):"+
		" it ends before the end of the BTH (8 of the 1056-byte RoCE packet), no RoCE header to decode\n", line(full, 50))
	small := writeFirst(t, 8)
	require.Equal(t, "    3 0.000001 10.0.0.1:49152 → 10.0.0.2:4791 RC_RDMA_WRITE_FIRST qp=0x000011 psn=42 reth va=0xabc000 rkey=0x77 len=4096 payload=8"+
		" TRUNCATED by the capture (80 of 82 bytes captured): ICRC not checked\n", line(small, 80))

	// JSON: the headers captured, the lengths, no ICRC verdict.
	f := Frame{Num: 3, CapLen: 60, OrigLen: len(full)}
	DecodeFrame(&f, full[:60], packet.LinkEthernet, Ports{packet.UDPPort})
	var m map[string]any
	require.NoError(t, json.Unmarshal(AppendJSON(nil, &f), &m))
	require.Equal(t, true, m["truncated"])
	require.Equal(t, 60.0, m["caplen"])
	require.Equal(t, 1098.0, m["origlen"])
	require.Equal(t, 18.0, m["captured"])
	require.Equal(t, 1024.0, m["payload_len"])
	require.NotContains(t, m, "reth")
	require.NotContains(t, m, "icrc")
	require.NotContains(t, m, "icrc_ok")

	// Verbose: the hex dump holds the captured bytes only.
	f = Frame{Num: 3, CapLen: 100, OrigLen: len(full)}
	DecodeFrame(&f, full[:100], packet.LinkEthernet, Ports{packet.UDPPort})
	v := string(AppendText(nil, &f, []byte("0.000001"), true))
	require.Contains(t, v, " icrc=(not captured)\n      captured 58 of the packet's 1056 bytes:\n")
	require.Contains(t, v, "      00000030  00 00 00 00 00 00 00 00  00 00                    |..........|\n")
}

// TestCutGRODatagram: a datagram of several packets back to back that the
// capture cut is split by lengths as far as it goes: the packets it holds
// whole are checked, the one it cuts is truncated, those after it are
// counted.
func TestCutGRODatagram(t *testing.T) {
	const reqLen = 12 + 16 + 4
	frame := readRequests(t, 4)
	data := frame[:roceOff+reqLen+30] // the first whole, the second cut in its ICRC
	var got []Frame
	rd, err := NewReader(strings.NewReader(string(pcapBytes(1, []capFrame{{data: data, ci: ciLen(len(frame))}}))), Ports{packet.UDPPort})
	require.NoError(t, err)
	for {
		var f Frame
		if _, err := rd.Next(&f); err != nil {
			break
		}
		got = append(got, f)
	}
	require.Len(t, got, 2)
	require.True(t, got[0].ICRCOK)
	require.False(t, got[0].Truncated)
	require.Equal(t, packet.PSN(10), got[0].Packet.PSN())
	require.True(t, got[1].Truncated)
	require.Equal(t, packet.PSN(14), got[1].Packet.PSN())
	require.Equal(t, 30, got[1].Captured)
	require.True(t, got[1].HeadersCaptured())
	require.Equal(t, 2, got[1].Uncaptured())
	for _, f := range got {
		require.Equal(t, 4, f.Segments)
	}
	text := string(AppendText(nil, &got[1], []byte("0"), false))
	require.Contains(t, text, " TRUNCATED by the capture (104 of 170 bytes captured): ICRC not checked (segment 2 of 4 in one UDP datagram: GSO/GRO; the capture holds none of the 2 after it)\n")

	// RDMA WRITE MIDDLEs of 256 bytes: the second BTH in the capture
	// gives the length, the first packet's own ICRC confirms it.
	frame = gsoDatagram(t, cutTestPH, []int{256, 256, 100}, func(i int) uint16 { return uint16(i) })
	f := Frame{Num: 1, CapLen: roceOff + 272 + 30, OrigLen: len(frame)}
	DecodeFrame(&f, frame[:f.CapLen], packet.LinkEthernet, Ports{packet.UDPPort})
	require.Equal(t, KindRoCE, f.Kind)
	require.Equal(t, 3, f.Segments)
	require.True(t, f.ICRCOK)
	require.Equal(t, 1, f.Uncaptured())
}

// TestDumpSnaplenCapture: a capture taken with a snap length is decoded,
// not reported malformed: the summary counts its cut packets apart, and
// --strict does not fail on them but says what it could not verify.
func TestDumpSnaplenCapture(t *testing.T) {
	stdout, stderr, code := runCmd(t, "dump", "--strict", snapPcap)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.NotContains(t, stdout, "MALFORMED")
	require.Equal(t, 9, strings.Count(stdout, "TRUNCATED by the capture"))
	require.Contains(t, stdout, "    1 0.000000 10.77.0.3:55410 → 10.77.0.2:4791 UD_SEND_ONLY qp=0x000001 psn=6 AckReq deth qkey=0x80010000 srcqp=0x000001 payload=256 cm=REQ tid=0x00000002958e0854 (message not captured) TRUNCATED by the capture (100 of 322 bytes captured): payload and ICRC not checked\n")
	require.Contains(t, stdout, "   12 0.132244 10.77.0.3:57533 → 10.77.0.2:4791 RC_SEND_FIRST qp=0x00003e psn=2756019 payload=1024 TRUNCATED by the capture (100 of 1082 bytes captured): payload and ICRC not checked\n")
	require.Equal(t, "rxectl dump: 15 frames, 15 RoCEv2 packets, 0 bad ICRC, 0 malformed, 9 truncated by the capture (snap length)\n"+
		"rxectl dump: --strict: the ICRC and payload of 9 packets truncated by the capture could not be verified (not counted as failures)\n", stderr)

	stdout, _, code = runCmd(t, "dump", "--json", snapPcap)
	require.Equal(t, cli.ExitOK, code)
	lines := decodeJSONLines(t, stdout)
	require.Len(t, lines, 15)
	require.Equal(t, true, lines[11]["truncated"])
	require.Equal(t, "RC_SEND_FIRST", lines[11]["opcode"])
	require.Equal(t, json.Number("1024"), lines[11]["payload_len"])
	require.NotContains(t, lines[11], "error")
}

// TestFlowsSnaplenCapture: the flow analysis of a capture cut to 96 bytes
// a frame is that of the whole capture: PSNs, opcodes, NAKs and READ
// spans come from the headers, the lengths from IP and UDP.
func TestFlowsSnaplenCapture(t *testing.T) {
	want, _, code := runCmd(t, "dump", "--flows", "../flows/testdata/read_request_lost.pcap")
	require.Equal(t, cli.ExitOK, code)
	got, stderr, code := runCmd(t, "dump", "--flows", "../flows/testdata/read_request_lost_snap96.pcap")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, want, got)
	require.NotContains(t, got, "bad_icrc")
}

// TestCMMADDisplay: a REQ with a reserved path MTU code shows the code,
// not a size; a CM MAD of class version 1 shows its header and says why
// its message is not decoded.
func TestCMMADDisplay(t *testing.T) {
	line := func(mad []byte) string { return madLine(t, mad) }
	req := func(mtu uint8) []byte {
		mad := make([]byte, packet.MADSize)
		packet.EncodeCM(mad, 9, &packet.REQ{LocalCommID: 0x1234, ServiceID: 0x0002C90300001234, LocalQPN: 0x42, PathMTU: mtu})
		return mad
	}
	for _, tc := range []struct {
		code uint8
		want string
	}{
		{1, " mtu=256 "}, {3, " mtu=1024 "}, {5, " mtu=4096 "},
		{0, " mtu=code 0 (reserved) "}, {6, " mtu=code 6 (reserved) "}, {15, " mtu=code 15 (reserved) "},
	} {
		require.Contains(t, line(req(tc.code)), tc.want)
	}
	v1 := req(3)
	v1[2] = 1 // class version
	require.Equal(t, " cm=REQ tid=0x0000000000000009 class_version=1 (not the CM's 2: message not decoded)", line(v1))
	other := slices.Clone(v1)
	other[1] = 0x03 // SA
	require.Equal(t, " mad class=0x03", line(other))
	base := slices.Clone(v1)
	base[0] = 2 // base version
	require.Equal(t, " mad base_version=2", line(base))
	require.Equal(t, " mad MALFORMED", line(v1[:20]))
}

// ciLen is the capture information of a frame of n bytes on the wire.
func ciLen(n int) gopacket.CaptureInfo { return gopacket.CaptureInfo{Length: n} }

// TestCutMergedUnsplit: a datagram of several packets (GSO/GRO) that the
// capture cut before the second one's BTH cannot be split: its first
// packet's headers are shown, with a payload longer than any path MTU,
// and the line says that the datagram holds several packets whose
// boundaries were not captured. The flow analysis leaves it out rather
// than take it for one packet (a PSN gap after each, a PMTU of 8 KiB).
func TestCutMergedUnsplit(t *testing.T) {
	frame := gsoDatagram(t, cutTestPH, []int{4096, 4096, 100}, func(i int) uint16 { return uint16(i) })
	f := Frame{Num: 1, CapLen: roceOff + 40, OrigLen: len(frame)}
	DecodeFrame(&f, frame[:f.CapLen], packet.LinkEthernet, Ports{packet.UDPPort})
	require.Equal(t, KindRoCE, f.Kind)
	require.True(t, f.Truncated)
	require.True(t, f.Merged)
	require.Equal(t, packet.PSN(100), f.Packet.PSN())
	text := string(AppendText(nil, &f, []byte("0"), false))
	require.Contains(t, text, " payload=8324 TRUNCATED by the capture (82 of 8382 bytes captured): several RoCE packets in one UDP datagram"+
		" (GSO/GRO: a payload beyond 4096 bytes), only the first one's headers captured; payload and ICRC not checked\n")
	var m map[string]any
	require.NoError(t, json.Unmarshal(AppendJSON(nil, &f), &m))
	require.Equal(t, true, m["merged"])

	file := writeFile(t, "merged.pcap", pcapBytes(1, []capFrame{{data: frame[:f.CapLen], ci: ciLen(len(frame))}}))
	stdout, stderr, code := runCmd(t, "dump", "--flows", file)
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, "no RoCEv2 flows\n", stdout)
	require.Contains(t, stderr, "rxectl dump: 1 packet left out of the analysis: a UDP datagram cut by the capture that holds several RoCE packets it does not show the boundaries of (frame 1)\n")
}

// madLine is the CM part of dump's line for a QP1 datagram carrying mad.
func madLine(t *testing.T, mad []byte) string {
	t.Helper()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN},
		DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
	b := make([]byte, packet.PacketLen(packet.UDSendOnly, len(mad)))
	_, err := packet.Build(b, &h, mad, nil)
	require.NoError(t, err)
	p, err := packet.Parse(b)
	require.NoError(t, err)
	return string(appendCM(nil, &Frame{Kind: KindRoCE, Packet: p}))
}

// TestCutDatagramBoundaries: where the capture's cut falls decides what a
// datagram's frames say. A packet the capture holds to its last byte is
// checked, not truncated, whether it ends the datagram's UDP bytes or is
// a segment of several; packets without payload (READ requests) split by
// their fixed length even when the cut falls inside the first one; a
// segment the capture holds less than a BTH of is not decoded but
// counted; one READ request stays one packet; a payload of exactly the
// largest path MTU is one packet, not a merge; and only the line of the
// last segment decoded says how many the capture holds none of.
func TestCutDatagramBoundaries(t *testing.T) {
	const reqLen = 12 + 16 + 4 // READ request: BTH, RETH, ICRC
	padded := func() []byte {
		// A WRITE FIRST whose IP packet carries 4 bytes after its UDP
		// datagram (IP length beyond the UDP length).
		f := append(writeFirst(t, 8), 0xEE, 0xEE, 0xEE, 0xEE)
		ip := f[14 : 14+packet.IPv4HeaderSize]
		binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+4)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
		return f
	}()
	type seg struct {
		psn      packet.PSN
		captured int // -1: whole (checked)
	}
	tests := []struct {
		name     string
		frame    []byte
		capLen   int
		segs     []seg
		segments int // Frame.Segments
		merged   bool
	}{
		{"cut in the IP bytes after the UDP datagram", padded, len(padded) - 4, []seg{{42, -1}}, 0, false},
		{"READ requests cut inside the first", readRequests(t, 4), roceOff + 20, []seg{{10, 20}}, 4, false},
		{"READ requests cut at a segment's end", readRequests(t, 3), roceOff + 2*reqLen, []seg{{10, -1}, {14, -1}}, 3, false},
		{"READ requests cut inside the second BTH", readRequests(t, 3), roceOff + reqLen + 4, []seg{{10, -1}}, 3, false},
		{"one READ request cut in its ICRC", readRequests(t, 1), roceOff + 30, []seg{{10, 30}}, 0, false},
		{"payload of the largest path MTU", writeFirst(t, maxPMTU), roceOff + 40, []seg{{42, 40}}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.frame[:tc.capLen]
			rd, err := NewReader(strings.NewReader(string(pcapBytes(1, []capFrame{{data: data, ci: ciLen(len(tc.frame))}}))), Ports{packet.UDPPort})
			require.NoError(t, err)
			var got []Frame
			for {
				var f Frame
				if _, err := rd.Next(&f); err != nil {
					break
				}
				got = append(got, f)
			}
			require.Len(t, got, len(tc.segs))
			for i, want := range tc.segs {
				f := &got[i]
				require.Equal(t, KindRoCE, f.Kind, "%v", f.Err)
				require.Equal(t, want.psn, f.Packet.PSN(), "frame %d", i)
				require.Equal(t, want.captured >= 0, f.Truncated, "frame %d", i)
				if want.captured >= 0 {
					require.Equal(t, want.captured, f.Captured, "frame %d", i)
				} else {
					require.True(t, f.ICRCOK || tc.segments == 0, "frame %d: a whole segment checks", i)
				}
				require.Equal(t, tc.segments, f.Segments, "frame %d", i)
				require.Equal(t, tc.merged, f.Merged, "frame %d", i)
				text := string(AppendText(nil, f, []byte("0"), false))
				last := i == len(tc.segs)-1 && tc.segments > len(tc.segs)
				require.Equal(t, last, strings.Contains(text, "; the capture holds none of the "), "frame %d: %s", i, text)
			}
		})
	}
}

// TestReadPacketsLeavesOutCutHeaders: the flow analysis takes a packet
// the capture cut only when it holds all its headers: one cut inside its
// RETH would read zeros as the rest of the RETH (ReadPackets).
func TestReadPacketsLeavesOutCutHeaders(t *testing.T) {
	frame := writeFirst(t, 1024)
	for _, tc := range []struct {
		capLen int
		want   int
	}{
		{roceOff + 12 + 5, 0},  // inside the RETH
		{roceOff + 12 + 16, 1}, // right after it
	} {
		file := pcapBytes(1, []capFrame{{data: frame[:tc.capLen], ci: ciLen(len(frame))}})
		pkts, err := ReadPackets(strings.NewReader(string(file)), Ports{packet.UDPPort})
		require.NoError(t, err)
		require.Len(t, pkts, tc.want, "captured %d", tc.capLen)
	}
}

// TestDecodeCutFrameIPHeaders: the RoCE packet of a frame the capture cut
// starts after the IP header as its own length field gives it (an IPv4
// header with options, IHL 6; the fixed IPv6 header, whose payload
// length leaves it out), and the bytes the capture did not hold read as
// zeros, in the frame and in what ReadPackets gives the flow analysis.
func TestDecodeCutFrameIPHeaders(t *testing.T) {
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteFirst, PKey: packet.DefaultPKey, DestQP: 0x11, PSN: 42},
		RETH: packet.RETHFields{VA: 0xABC000, RKey: 0x77, DMALen: 4096}}
	payload := bytes.Repeat([]byte{0xAB}, 1024)
	ph6 := packet.PseudoHeader{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 49152, DstPort: packet.UDPPort}
	v6 := gsoFrame(t, ph6, []gsoSegment{{h, payload}}, func(int) uint16 { return 0 })
	v4 := gsoFrame(t, cutTestPH, []gsoSegment{{h, payload}}, func(int) uint16 { return 9 })
	opts := slices.Concat(v4[:14+packet.IPv4HeaderSize], []byte{1, 1, 1, 1}, v4[14+packet.IPv4HeaderSize:]) // 4 NOPs
	ip := opts[14 : 14+24]
	ip[0] = 0x46
	binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+4)
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))

	const captured = 12 + 16 + 10 // BTH, RETH, 10 bytes of payload
	for _, tc := range []struct {
		name  string
		frame []byte
		roce  int // where the BTH starts
	}{
		{"IPv4 with options", opts, 14 + 24 + packet.UDPHeaderSize},
		{"IPv6", v6, 14 + packet.IPv6HeaderSize + packet.UDPHeaderSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.frame[:tc.roce+captured]
			f := Frame{Num: 1, CapLen: len(data), OrigLen: len(tc.frame)}
			DecodeFrame(&f, data, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, KindRoCE, f.Kind, "%v", f.Err)
			require.True(t, f.Truncated)
			require.Equal(t, captured, f.Captured)
			require.Equal(t, packet.PSN(42), f.Packet.PSN())
			require.Equal(t, uint32(0x77), f.Packet.RETH().RKey())
			require.Equal(t, len(payload), f.Packet.PayloadLen())

			file := pcapBytes(1, []capFrame{{data: data, ci: ciLen(len(tc.frame))}})
			pkts, err := ReadPackets(bytes.NewReader(file), Ports{packet.UDPPort})
			require.NoError(t, err)
			require.Len(t, pkts, 1)
			got := pkts[0].Pkt.Payload()
			require.Equal(t, payload[:10], got[:10])
			require.Equal(t, make([]byte, len(payload)-10), got[10:], "not captured: zeros")
		})
	}
}

// TestCutMergedLeftOutFirst: the flow analysis names the first of the
// cut datagrams of several packets it leaves out, however many follow.
func TestCutMergedLeftOutFirst(t *testing.T) {
	frame := gsoDatagram(t, cutTestPH, []int{4096, 4096, 100}, func(i int) uint16 { return uint16(i) })
	cut := capFrame{data: frame[:roceOff+40], ci: ciLen(len(frame))}
	file := writeFile(t, "merged2.pcap", pcapBytes(1, []capFrame{cut, cut, cut}))
	_, stderr, code := runCmd(t, "dump", "--flows", file)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, stderr, "rxectl dump: 3 packets left out of the analysis: UDP datagrams cut by the capture that hold several RoCE packets it does not show the boundaries of (first: frame 1)\n")
}
