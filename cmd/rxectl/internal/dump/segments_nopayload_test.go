package dump

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// noPayloadCapture builds a capture of datagrams that each hold RoCE
// packets without a payload back to back, as GSO and GRO make them: frame
// 1 four READ requests, frame 2 their four ACKs, frame 3 two FETCH_ADDs,
// frame 4 their two atomic ACKs, frame 5 three ACKs over IPv6. With
// corrupt, one byte of frame 1's second READ request is flipped.
func noPayloadCapture(t *testing.T, corrupt bool) string {
	t.Helper()
	a4, b4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	req := packet.PseudoHeader{Src: a4, Dst: b4, SrcPort: 49152, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	resp := packet.PseudoHeader{Src: b4, Dst: a4, SrcPort: 49153, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	resp6 := packet.PseudoHeader{Src: netip.MustParseAddr("fd00::2"), Dst: netip.MustParseAddr("fd00::1"), SrcPort: 49153, DstPort: packet.UDPPort}
	counting := func(i int) uint16 { return 0x100 + uint16(i) }
	fixed := func(int) uint16 { return 0 }
	bth := func(op packet.Opcode, qp uint32, psn int, ackReq bool) packet.BTHFields {
		return packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: qp, PSN: packet.PSN(psn), AckReq: ackReq}
	}
	ack := func(psn int, msn uint32) gsoSegment {
		return gsoSegment{h: packet.Headers{BTH: bth(packet.RCAcknowledge, 0x11, psn, false),
			AETH: packet.AETHFields{Syndrome: packet.SyndromeACKUnlimited, MSN: msn}}}
	}
	var reads, acks, atomics, atomicAcks, acks6 []gsoSegment
	for i := range 4 {
		reads = append(reads, gsoSegment{h: packet.Headers{BTH: bth(packet.RCRDMAReadRequest, 0x22, 100+i, true),
			RETH: packet.RETHFields{VA: 0x10000 + uint64(i)*4096, RKey: 0x1ec, DMALen: 32}}})
		acks = append(acks, ack(100+i, uint32(1+i)))
	}
	for i := range 2 {
		atomics = append(atomics, gsoSegment{h: packet.Headers{BTH: bth(packet.RCFetchAdd, 0x22, 104+i, true),
			AtomicETH: packet.AtomicETHFields{VA: 0x20000 + uint64(i)*8, RKey: 0x1ec, SwapAdd: 1}}})
		atomicAcks = append(atomicAcks, gsoSegment{h: packet.Headers{BTH: bth(packet.RCAtomicAcknowledge, 0x11, 104+i, false),
			AETH: packet.AETHFields{Syndrome: packet.SyndromeACKUnlimited, MSN: uint32(5 + i)}, AtomicAck: uint64(41 + i)}})
	}
	for i := range 3 {
		acks6 = append(acks6, ack(200+i, uint32(10+i)))
	}
	datagrams := [][]byte{
		gsoFrame(t, req, reads, counting),
		gsoFrame(t, resp, acks, fixed),
		gsoFrame(t, req, atomics, counting),
		gsoFrame(t, resp, atomicAcks, counting),
		gsoFrame(t, resp6, acks6, fixed),
	}
	if corrupt {
		// Ethernet 14, IPv4 20, UDP 8, then the second READ request (32
		// bytes in): flip a byte of its RETH's VA.
		datagrams[0][14+20+8+32+12+2] ^= 0x01
	}
	var frames []capFrame
	for i, d := range datagrams {
		ts := time.Unix(1700000000, int64(i)*1000)
		frames = append(frames, capFrame{data: d, ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(d), Length: len(d)}})
	}
	return writeFile(t, "nopayload.pcap", pcapBytes(1, frames))
}

// TestDumpSplitsSegmentsWithoutPayload: a datagram of RoCE packets
// without a payload back to back (READ requests, ACKs, atomics and atomic
// ACKs) does not parse as one packet, yet is split into its packets, each
// with a valid ICRC; --strict passes and --flows counts every packet. A
// corrupted segment is a packet of its own with a bad ICRC, among the
// others of its datagram, which check: --strict fails on it.
func TestDumpSplitsSegmentsWithoutPayload(t *testing.T) {
	file := noPayloadCapture(t, false)
	stdout, stderr, code := runCmd(t, "dump", "--strict", file)
	got := stdout + "--- stderr ---\n" + stderr + "--- exit " + strconv.Itoa(code) + " ---\n"
	golden := filepath.Join("testdata", "gso_no_payload.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./cmd/rxectl/internal/dump -run TestDumpSplitsSegmentsWithoutPayload -update")
	require.Equal(t, string(want), got)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "rxectl dump: 5 frames, 15 RoCEv2 packets, 0 bad ICRC, 0 malformed\n", stderr)

	out, errs, code := runCmd(t, "dump", "--json", file)
	require.Equal(t, cli.ExitOK, code, errs)
	lines := decodeJSONLines(t, out)
	require.Len(t, lines, 15)
	counts := map[string]int{}
	for _, m := range lines {
		require.Equal(t, true, m["icrc_ok"], "%v", m)
		require.Contains(t, m, "segment")
		counts[m["opcode"].(string)]++
	}
	require.Equal(t, map[string]int{"RC_RDMA_READ_REQUEST": 4, "RC_ACKNOWLEDGE": 7, "RC_FETCH_ADD": 2, "RC_ATOMIC_ACKNOWLEDGE": 2}, counts)

	out, errs, code = runCmd(t, "dump", "--flows", file)
	require.Equal(t, cli.ExitOK, code, errs)
	for _, line := range []string{"RC_RDMA_READ_REQUEST 4 packets", "RC_FETCH_ADD 2 packets", "RC_ATOMIC_ACKNOWLEDGE 2 packets"} {
		require.Contains(t, strings.Join(strings.Fields(out), " "), line)
	}

	bad := noPayloadCapture(t, true)
	out, errs, code = runCmd(t, "dump", "--strict", bad)
	require.Equal(t, cli.ExitFail, code, errs)
	require.Equal(t, "rxectl dump: 5 frames, 15 RoCEv2 packets, 1 bad ICRC, 0 malformed\n", errs)
	first := strings.SplitN(out, "\n", 5)
	require.Contains(t, first[0], "RC_RDMA_READ_REQUEST qp=0x000022 psn=100 ")
	require.Contains(t, first[0], " ICRC ok (segment 1 of 4 ")
	require.Contains(t, first[1], "RC_RDMA_READ_REQUEST qp=0x000022 psn=101 ")
	require.Contains(t, first[1], " ICRC BAD (wire ")
	require.Contains(t, first[1], " (segment 2 of 4 ")
	require.Contains(t, first[2], " ICRC ok (segment 3 of 4 ")
	require.Contains(t, first[3], " ICRC ok (segment 4 of 4 ")
}
