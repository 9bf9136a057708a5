package dump

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

const (
	scapyPcap  = "../../../../testdata/scapy/scapy_fixtures.pcap"
	scapyJSONL = "../../../../testdata/scapy/scapy_fixtures.jsonl"
	cx4Pcap    = "../../../../testdata/captures/scapy_uts_cx4lx_cnp_and_uc_example.pcap"
	rdmacmPcap = "../../../../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap"
	udPcap     = "../../../../testdata/captures/kernel-rxe_ud_send_512B.pcap"
	huaweiPcap = "../../../../testdata/captures/huawei_hiroce_oferby_proxy.pcap"
)

// capFrame is one frame of a capture, for rewriting captures in tests.
type capFrame struct {
	data []byte
	ci   gopacket.CaptureInfo
}

// readPcap returns the frames of a classic pcap file.
// runCmd runs "rxectl dump" with args (args[0] is "dump") and returns
// its output and exit status.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCmdIn(t, strings.NewReader(""), args...)
}

// runCmdIn is runCmd with stdin as the standard input.
func runCmdIn(t testing.TB, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	require.Equal(t, "dump", args[0])
	var out, errb bytes.Buffer
	code = Run(args[1:], stdin, &out, &errb)
	return out.String(), errb.String(), code
}

func readPcap(t testing.TB, path string) []capFrame {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	require.NoError(t, err)
	var frames []capFrame
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return frames
		}
		require.NoError(t, err)
		frames = append(frames, capFrame{data: data, ci: ci})
	}
}

// pcapBytes builds a little-endian, microsecond classic pcap file of link
// type lt by hand (gopacket's writer cannot express link types above 255).
func pcapBytes(lt uint32, frames []capFrame) []byte {
	return pcapBytesOrder(binary.LittleEndian, false, lt, frames)
}

// pcapBytesOrder builds a classic pcap file in byte order o, with
// nanosecond timestamps if nano.
func pcapBytesOrder(o binary.AppendByteOrder, nano bool, lt uint32, frames []capFrame) []byte {
	magic, div := uint32(0xA1B2C3D4), 1000
	if nano {
		magic, div = 0xA1B23C4D, 1
	}
	var b []byte
	b = o.AppendUint32(b, magic)
	b = o.AppendUint16(b, 2)
	b = o.AppendUint16(b, 4)
	b = o.AppendUint32(b, 0) // thiszone
	b = o.AppendUint32(b, 0) // sigfigs
	b = o.AppendUint32(b, 65535)
	b = o.AppendUint32(b, lt)
	for _, f := range frames {
		b = o.AppendUint32(b, uint32(f.ci.Timestamp.Unix()))
		b = o.AppendUint32(b, uint32(f.ci.Timestamp.Nanosecond()/div))
		b = o.AppendUint32(b, uint32(len(f.data)))
		b = o.AppendUint32(b, uint32(max(f.ci.Length, len(f.data))))
		b = append(b, f.data...)
	}
	return b
}

// pcapngBytes builds a little-endian pcapng file with one interface of
// link type lt by hand, nanosecond timestamps.
func pcapngBytes(lt uint16, frames []capFrame) []byte { return pcapngBytesRes(lt, 9, frames) }

// pcapngBytesRes is pcapngBytes with the interface's if_tsresol: 10^-r s,
// or with the high bit set 2^-(r&0x7F) s.
func pcapngBytesRes(lt uint16, tsresol byte, frames []capFrame) []byte {
	units := func(t time.Time) uint64 {
		if tsresol&0x80 != 0 {
			e := tsresol & 0x7F
			return uint64(t.Unix())<<e + uint64(t.Nanosecond())<<e/1e9
		}
		u := uint64(t.Unix())
		for range tsresol {
			u *= 10
		}
		div := uint64(1e9)
		for range tsresol {
			div /= 10
		}
		return u + uint64(t.Nanosecond())/div
	}
	le := binary.LittleEndian
	var b []byte
	// Section Header Block without options.
	b = le.AppendUint32(b, 0x0A0D0D0A)
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 0x1A2B3C4D)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, ^uint64(0)) // section length unknown
	b = le.AppendUint32(b, 28)
	// Interface Description Block with if_tsresol.
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 32)
	b = le.AppendUint16(b, lt)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, 0) // snaplen: unlimited
	b = le.AppendUint16(b, 9) // if_tsresol
	b = le.AppendUint16(b, 1)
	b = append(b, tsresol, 0, 0, 0)
	b = le.AppendUint32(b, 0) // opt_endofopt
	b = le.AppendUint32(b, 32)
	for _, f := range frames {
		padded := (len(f.data) + 3) &^ 3
		total := uint32(32 + padded)
		ts := units(f.ci.Timestamp)
		b = le.AppendUint32(b, 6)
		b = le.AppendUint32(b, total)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint32(b, uint32(ts>>32))
		b = le.AppendUint32(b, uint32(ts))
		b = le.AppendUint32(b, uint32(len(f.data)))
		b = le.AppendUint32(b, uint32(len(f.data)))
		b = append(b, f.data...)
		b = append(b, make([]byte, padded-len(f.data))...)
		b = le.AppendUint32(b, total)
	}
	return b
}

// writeFile writes b to a new file in a test directory and returns its path.
func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// decodeJSONLines decodes one JSON object per line, numbers kept exact.
func decodeJSONLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var m map[string]any
		require.NoError(t, d.Decode(&m), "line %q", sc.Text())
		require.False(t, d.More(), "one object per line: %q", sc.Text())
		objs = append(objs, m)
	}
	require.NoError(t, sc.Err())
	return objs
}

// frameNum returns the frame number of a decoded JSON object.
func frameNum(t testing.TB, m map[string]any) int {
	t.Helper()
	n, ok := m["frame"].(json.Number)
	require.True(t, ok, "frame missing in %v", m)
	i, err := strconv.Atoi(string(n))
	require.NoError(t, err)
	return i
}

// TestDumpJSONMatchesScapy checks every field of every frame of the scapy
// fixture against the values scapy wrote (testdata/scapy/README.md).
func TestDumpJSONMatchesScapy(t *testing.T) {
	stdout, stderr, code := runCmd(t, "dump", "--json", scapyPcap)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "rxectl dump: 71 frames, 70 RoCEv2 packets, 1 bad ICRC, 1 malformed\n", stderr)

	got := map[int]map[string]any{}
	for _, m := range decodeJSONLines(t, stdout) {
		n := frameNum(t, m)
		require.NotContains(t, got, n, "frame %d reported twice", n)
		got[n] = m
	}
	wantRaw, err := os.ReadFile(scapyJSONL)
	require.NoError(t, err)
	want := decodeJSONLines(t, string(wantRaw))
	require.Len(t, want, 70)
	require.Len(t, got, len(want))
	require.NotContains(t, got, 70, "frame 70 is DNS, not RoCE")

	// feth is the one key rxectl adds that the jsonl leaves out (the README
	// gives its values in prose).
	feth := map[int]string{38: "18", 50: "1"}
	for _, w := range want {
		n := frameNum(t, w)
		g, ok := got[n]
		require.True(t, ok, "frame %d missing from the output", n)
		if _, isErr := w["error"]; isErr {
			require.IsType(t, "", g["error"], "frame %d: want an error string", n)
			require.NotEmpty(t, g["error"])
			continue
		}
		if v, ok := feth[n]; ok {
			require.Equal(t, json.Number(v), g["feth"], "frame %d feth", n)
			delete(g, "feth")
		}
		wantKeys, gotKeys := keys(w), keys(g)
		require.Equal(t, wantKeys, gotKeys, "frame %d key set", n)
		for k, wv := range w {
			require.Equal(t, wv, g[k], "frame %d key %q", n, k)
		}
	}
	require.Equal(t, false, got[69]["icrc_ok"])
	require.Equal(t, "packet: truncated: a RoCE packet takes at least 16 bytes, a BTH and an ICRC", got[71]["error"])
	require.Equal(t, "192.168.10.2:4791", got[71]["dst"])
}

// keys returns the sorted keys of m.
func keys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestDumpRealCaptures checks that every RoCEv2 packet of the real
// captures has a good ICRC, and the counts and summary.
func TestDumpRealCaptures(t *testing.T) {
	want := map[string]struct{ frames, roce int }{
		"huawei_hiroce_oferby_proxy.pcap":         {123, 105},
		"scapy_uts_cx4lx_cnp_and_uc_example.pcap": {2, 2},
		// tshark -r F | wc -l; tshark -r F -Y udp.dstport==4791 | wc -l
		"kernel-rxe_rdmacm_send_4KiB.pcap": {154, 154},
		"kernel-rxe_uc_write_64KiB.pcap":   {681, 640},
		"kernel-rxe_ud_send_512B.pcap":     {49, 20},
	}
	paths, err := filepath.Glob("../../../../testdata/captures/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			stdout, stderr, code := runCmd(t, "dump", "--strict", "--json", path)
			require.Equal(t, cli.ExitOK, code, stderr)
			objs := decodeJSONLines(t, stdout)
			for _, m := range objs {
				require.NotContains(t, m, "error", "frame %d", frameNum(t, m))
				require.Equal(t, true, m["icrc_ok"], "frame %d", frameNum(t, m))
				require.True(t, strings.HasSuffix(m["dst"].(string), ":4791"), "frame %d", frameNum(t, m))
			}
			w, ok := want[filepath.Base(path)]
			if !ok {
				return // a new capture: the ICRC checks above still apply
			}
			require.Len(t, objs, w.roce)
			require.Equal(t, "rxectl dump: "+strconv.Itoa(w.frames)+" frames, "+strconv.Itoa(w.roce)+" RoCEv2 packets, 0 bad ICRC, 0 malformed\n", stderr)

			text, stderr2, code := runCmd(t, "dump", path)
			require.Equal(t, cli.ExitOK, code)
			require.Equal(t, stderr, stderr2)
			require.Equal(t, w.roce, strings.Count(text, " ICRC ok\n"))
		})
	}
}

// TestDumpHuaweiSourcePorts: the Huawei capture uses UDP source ports 69
// and 72 (TFTP to a port-based decoder); rxectl decides by destination port.
func TestDumpHuaweiSourcePorts(t *testing.T) {
	stdout, _, code := runCmd(t, "dump", "--json", huaweiPcap)
	require.Equal(t, cli.ExitOK, code)
	srcPorts := map[string]int{}
	for _, m := range decodeJSONLines(t, stdout) {
		src := m["src"].(string)
		srcPorts[src[strings.LastIndex(src, ":")+1:]]++
		require.Equal(t, true, m["migreq"])
	}
	require.Equal(t, 105, srcPorts["69"]+srcPorts["72"])
}

// goldenCase is one golden-output test of the text format.
type goldenCase struct {
	name string
	args func(t *testing.T) []string
}

func TestDumpGolden(t *testing.T) {
	someScapy := func(t *testing.T) string {
		// A few frames with every kind of extension header, a bad ICRC and a
		// truncated packet, plus the DNS frame (skipped).
		all := readPcap(t, scapyPcap)
		var pick []capFrame
		for _, n := range []int{4, 10, 16, 18, 26, 33, 34, 36, 38, 46, 50, 65, 67, 69, 70, 71} {
			pick = append(pick, all[n-1])
		}
		return writeFile(t, "some.pcap", pcapBytes(1, pick))
	}
	tests := []goldenCase{
		{"cx4lx", func(t *testing.T) []string { return []string{"dump", cx4Pcap} }},
		{"cx4lx_v", func(t *testing.T) []string { return []string{"dump", "-v", cx4Pcap} }},
		{"scapy", func(t *testing.T) []string { return []string{"dump", scapyPcap} }},
		{"kernel_rdmacm", func(t *testing.T) []string { return []string{"dump", rdmacmPcap} }},
		{"kernel_ud", func(t *testing.T) []string { return []string{"dump", udPcap} }},
		{"scapy_some_v_abs", func(t *testing.T) []string {
			return []string{"dump", someScapy(t), "-v", "--time", "abs"}
		}},
		{"scapy_some_epoch_nano", func(t *testing.T) []string {
			return []string{"dump", "--time=epoch", "--nano", someScapy(t)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(t, tc.args(t)...)
			got := stdout + "--- stderr ---\n" + stderr + "--- exit " + strconv.Itoa(code) + " ---\n"
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./cmd/rxectl -run TestDumpGolden -update")
			require.Equal(t, string(want), got)
		})
	}
}

func TestDumpVerboseHexDump(t *testing.T) {
	stdout, _, code := runCmd(t, "dump", "-v", cx4Pcap)
	require.Equal(t, cli.ExitOK, code)
	// Frame 1 is the ConnectX CNP: BTH 81 00 ff ff 40 00 01 18, then the ICRC.
	require.Contains(t, stdout, "      00000000  81 00 ff ff 40 00 01 18  00 00 00 00 00 00 00 00  |....@...........|\n")
	require.Contains(t, stdout, "ipv4 ihl=20 tos=0xc2 len=60 id=0x718c flags=DF frag=0 ttl=64")
	require.Contains(t, stdout, "udp sport=0 dport=4791 len=40 csum=0x0000")
	require.Contains(t, stdout, "bth opcode=0x81 se=0 m=0 pad=0 tver=0 pkey=0xffff fecn=0 becn=1 resv6a=0x00 dqpn=0x000118 ackreq=0 resv7=0x00 psn=0")
}

func TestDumpFlagPlacement(t *testing.T) {
	ref, refErr, code := runCmd(t, "dump", "--json", scapyPcap)
	require.Equal(t, cli.ExitOK, code)
	for _, args := range [][]string{
		{"dump", scapyPcap, "--json"},
		{"dump", "-json", scapyPcap},
		{"dump", "--json", "--", scapyPcap},
		{"dump", "--port", "4791", scapyPcap, "--json=true"},
	} {
		stdout, stderr, code := runCmd(t, args...)
		require.Equal(t, cli.ExitOK, code, "%v", args)
		require.Equal(t, ref, stdout, "%v", args)
		require.Equal(t, refErr, stderr, "%v", args)
	}
}

func TestDumpUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"dump"}, "want exactly one FILE, got 0"},
		{[]string{"dump", "a", "b"}, "want exactly one FILE, got 2"},
		{[]string{"dump", "--bogus", scapyPcap}, "flag provided but not defined: -bogus"},
		{[]string{"dump", "--time", "local", scapyPcap}, "want rel, abs or epoch"},
		{[]string{"dump", "--port", "0", scapyPcap}, "want a port number 1..65535"},
		{[]string{"dump", "--port", "65536", scapyPcap}, "want a port number 1..65535"},
		{[]string{"dump", "-v", "--json", scapyPcap}, "-v and --json cannot be combined"},
		{[]string{"dump", scapyPcap, "--port"}, "flag needs an argument: -port"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runCmd(t, tc.args...)
			require.Equal(t, cli.ExitUsage, code)
			require.Empty(t, stdout)
			require.True(t, strings.HasPrefix(stderr, "rxectl dump: "), stderr)
			require.Contains(t, stderr, tc.want)
			require.Contains(t, stderr, "usage: rxectl dump [flags] FILE")
		})
	}
}

func TestDumpStrict(t *testing.T) {
	_, _, code := runCmd(t, "dump", "--strict", scapyPcap)
	require.Equal(t, cli.ExitFail, code, "the fixture has a bad ICRC and a truncated packet")
	_, _, code = runCmd(t, "dump", scapyPcap)
	require.Equal(t, cli.ExitOK, code, "findings are not failures without --strict")
	_, _, code = runCmd(t, "dump", "--strict", cx4Pcap)
	require.Equal(t, cli.ExitOK, code)
}

func TestDumpPort(t *testing.T) {
	// Frame 70 is a DNS query: with --port 53 it is decoded as RoCEv2 too
	// (whatever it then looks like), and 4791 is still decoded.
	stdout, stderr, code := runCmd(t, "dump", "--json", "--port", "53", scapyPcap)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, stderr, "71 frames, 71 RoCEv2 packets")
	objs := decodeJSONLines(t, stdout)
	require.Len(t, objs, 71)
	require.Equal(t, 70, frameNum(t, objs[69]))
	require.Equal(t, "192.168.10.2:53", objs[69]["dst"])

	// Another port: move the cx4lx packets to UDP port 4792.
	frames := readPcap(t, cx4Pcap)
	for i := range frames {
		frames[i].data[14+20+2], frames[i].data[14+20+3] = 0x12, 0xb8 // 4792
	}
	path := writeFile(t, "4792.pcap", pcapBytes(1, frames))
	stdout, stderr, code = runCmd(t, "dump", path)
	require.Equal(t, cli.ExitOK, code)
	require.Empty(t, stdout)
	require.Equal(t, "rxectl dump: 2 frames, 0 RoCEv2 packets, 0 bad ICRC, 0 malformed\n", stderr)
	stdout, stderr, code = runCmd(t, "dump", "--port=4792", path)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, stdout, "10.0.17.1:0 → 10.0.18.1:4792 CNP qp=0x000118")
	// The destination port is covered by the ICRC (IBA A17.4.4).
	require.Equal(t, "rxectl dump: 2 frames, 2 RoCEv2 packets, 2 bad ICRC, 0 malformed\n", stderr)
}

// TestDumpPcapNg: a pcapng copy (written by gopacket's NgWriter) gives the
// same output as the pcap.
func TestDumpPcapNg(t *testing.T) {
	for _, src := range []string{scapyPcap, cx4Pcap, huaweiPcap} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			var buf bytes.Buffer
			w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
			require.NoError(t, err)
			for _, f := range readPcap(t, src) {
				f.ci.InterfaceIndex = 0
				require.NoError(t, w.WritePacket(f.ci, f.data))
			}
			require.NoError(t, w.Flush())
			ng := writeFile(t, "copy.pcapng", buf.Bytes())
			for _, mode := range [][]string{{"--json"}, {}, {"-v", "--nano"}, {"--time=abs"}} {
				wantOut, wantErr, wantCode := runCmd(t, append([]string{"dump", src}, mode...)...)
				gotOut, gotErr, gotCode := runCmd(t, append([]string{"dump", ng}, mode...)...)
				require.Equal(t, wantCode, gotCode)
				require.Equal(t, wantOut, gotOut, "%v", mode)
				require.Equal(t, wantErr, gotErr)
			}
		})
	}
}

// relink wraps the IP packet of every Ethernet frame in another link
// layer.
type relink struct {
	name  string
	lt    uint32
	wrap  func(ip []byte, ethType uint16) []byte
	ngAlt bool // also test as pcapng
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var macs = []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1}

var relinks = []relink{
	{"ethernet 802.1Q", 1, func(ip []byte, et uint16) []byte {
		return cat(macs, be16(0x8100), be16(0x6064), be16(et), ip)
	}, false},
	{"ethernet QinQ", 1, func(ip []byte, et uint16) []byte {
		return cat(macs, be16(0x88a8), be16(0x0010), be16(0x8100), be16(0x0020), be16(et), ip)
	}, false},
	{"linux SLL", 113, func(ip []byte, et uint16) []byte {
		return cat(be16(0), be16(1), be16(6), macs[6:], []byte{0, 0}, be16(et), ip)
	}, true},
	{"linux SLL with VLAN", 113, func(ip []byte, et uint16) []byte {
		return cat(be16(4), be16(1), be16(6), macs[6:], []byte{0, 0}, be16(0x8100), be16(7), be16(et), ip)
	}, false},
	{"linux SLL2", 276, func(ip []byte, et uint16) []byte {
		return cat(be16(et), be16(0), []byte{0, 0, 0, 3}, be16(1), []byte{0, 6}, macs[6:], []byte{0, 0}, ip)
	}, true},
	{"raw", 101, func(ip []byte, _ uint16) []byte { return ip }, true},
	{"null little-endian", 0, func(ip []byte, et uint16) []byte {
		af := []byte{2, 0, 0, 0}
		if et == 0x86DD {
			af = []byte{30, 0, 0, 0} // Darwin AF_INET6
		}
		return cat(af, ip)
	}, false},
	{"loop", 108, func(ip []byte, et uint16) []byte {
		af := []byte{0, 0, 0, 2}
		if et == 0x86DD {
			af = []byte{0, 0, 0, 24}
		}
		return cat(af, ip)
	}, false},
}

// TestDumpLinkTypes rewrites the scapy fixture in other link layers and
// checks that the output is unchanged.
func TestDumpLinkTypes(t *testing.T) {
	eth := readPcap(t, scapyPcap)
	want, wantErr, code := runCmd(t, "dump", "--json", scapyPcap)
	require.Equal(t, cli.ExitOK, code)
	wantText, _, _ := runCmd(t, "dump", scapyPcap)
	for _, rl := range relinks {
		t.Run(rl.name, func(t *testing.T) {
			frames := make([]capFrame, len(eth))
			for i, f := range eth {
				frames[i] = capFrame{data: rl.wrap(f.data[14:], binary.BigEndian.Uint16(f.data[12:])), ci: f.ci}
			}
			files := []string{writeFile(t, "relinked.pcap", pcapBytes(rl.lt, frames))}
			if rl.ngAlt {
				files = append(files, writeFile(t, "relinked.pcapng", pcapngBytes(uint16(rl.lt), frames)))
			}
			for _, path := range files {
				got, gotErr, code := runCmd(t, "dump", path, "--json")
				require.Equal(t, cli.ExitOK, code, gotErr)
				require.Equal(t, want, got, path)
				require.Equal(t, wantErr, gotErr)
				gotText, _, _ := runCmd(t, "dump", path)
				require.Equal(t, wantText, gotText, path)
			}
		})
	}
}

func TestDumpStdinAndGzip(t *testing.T) {
	want, wantErr, code := runCmd(t, "dump", scapyPcap)
	require.Equal(t, cli.ExitOK, code)
	raw, err := os.ReadFile(scapyPcap)
	require.NoError(t, err)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	got, gotErr, code := runCmd(t, "dump", writeFile(t, "f.pcap.gz", gz.Bytes()))
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, want, got)
	require.Equal(t, wantErr, gotErr)

	got, gotErr, code = runCmdIn(t, bytes.NewReader(raw), "dump", "-")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, want, got)
	require.Equal(t, wantErr, gotErr)
}

func TestDumpTime(t *testing.T) {
	frames := readPcap(t, cx4Pcap)
	frames[0].ci.Timestamp = time.Unix(1700000000, 123456789).UTC()
	frames[1].ci.Timestamp = time.Unix(1700000000, 23456000).UTC() // before frame 1
	ng := writeFile(t, "t.pcapng", pcapngBytes(1, frames))
	tests := []struct {
		args   []string
		first  string
		second string
	}{
		{nil, "    1 0.000000 ", "    2 -0.100000 "},
		{[]string{"--nano"}, "    1 0.000000000 ", "    2 -0.100000789 "},
		{[]string{"--time", "abs"}, "    1 2023-11-14T22:13:20.123456Z ", "    2 2023-11-14T22:13:20.023456Z "},
		{[]string{"--time", "abs", "--nano"}, "    1 2023-11-14T22:13:20.123456789Z ", "    2 2023-11-14T22:13:20.023456000Z "},
		{[]string{"--time", "epoch"}, "    1 1700000000.123456 ", "    2 1700000000.023456 "},
		{[]string{"--time", "relative"}, "    1 0.000000 ", "    2 -0.100000 "},
		{[]string{"--time", "absolute"}, "    1 2023-11-14T22:13:20.123456Z ", "    2 2023-11-14T22:13:20.023456Z "},
	}
	for _, tc := range tests {
		stdout, _, code := runCmd(t, append([]string{"dump", ng}, tc.args...)...)
		require.Equal(t, cli.ExitOK, code)
		lines := strings.Split(stdout, "\n")
		require.True(t, strings.HasPrefix(lines[0], tc.first), "%v: %q", tc.args, lines[0])
		require.True(t, strings.HasPrefix(lines[1], tc.second), "%v: %q", tc.args, lines[1])
	}
}

func TestDumpBadInputs(t *testing.T) {
	raw, err := os.ReadFile(scapyPcap)
	require.NoError(t, err)
	rec1 := 16 + int(binary.LittleEndian.Uint32(raw[24+8:]))
	rec2 := 16 + int(binary.LittleEndian.Uint32(raw[24+rec1+8:]))
	cx4 := readPcap(t, cx4Pcap)
	ng := pcapngBytes(1, cx4)
	epb1 := 32 + (len(cx4[0].data)+3)&^3 // SHB 28, IDB 32, then frame 1's EPB
	hugeEPB := slices.Clone(ng)
	binary.LittleEndian.PutUint32(hugeEPB[28+32+20:], 0xFFFFFFF0)
	var emptyGz bytes.Buffer // gzip of no bytes at all
	require.NoError(t, gzip.NewWriter(&emptyGz).Close())
	hugeRecord := pcapBytes(1, nil)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 0)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 0)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 0x7FFFFFF0)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 0x7FFFFFF0)

	tests := []struct {
		name       string
		path       string // or content
		content    []byte
		code       int
		stdout     string // prefix of stdout; "" means empty
		lines      int    // lines of stdout
		wantStderr []string
	}{
		{name: "nonexistent", path: "/nonexistent/x.pcap", code: cli.ExitFail,
			wantStderr: []string{"rxectl dump: open /nonexistent/x.pcap: no such file or directory"}},
		{name: "directory", path: "testdata", code: cli.ExitFail,
			wantStderr: []string{"rxectl dump: testdata: is a directory"}},
		{name: "empty", content: []byte{}, code: cli.ExitFail,
			wantStderr: []string{"empty.pcap: empty file, not a capture"}},
		{name: "text", content: []byte("hello, world\n"), code: cli.ExitFail,
			wantStderr: []string{"text.pcap: not a pcap or pcapng capture (starts with 68 65 6c 6c)"}},
		{name: "tiny", content: []byte("ab"), code: cli.ExitFail,
			wantStderr: []string{"not a pcap or pcapng capture (starts with 61 62)"}},
		{name: "gzip garbage", content: []byte{0x1f, 0x8b, 0, 0, 0}, code: cli.ExitFail,
			wantStderr: []string{"gzip"}},
		{name: "gzip of nothing", content: emptyGz.Bytes(), code: cli.ExitFail,
			wantStderr: []string{"gzip-compressed, but the content is empty or unreadable (EOF)"}},
		{name: "cut file header", content: raw[:10], code: cli.ExitFail,
			wantStderr: []string{"reading pcap file header: unexpected EOF"}},
		{name: "cut in record data", content: raw[:24+rec1+rec2+16+10], code: cli.ExitFail, lines: 2,
			stdout: "    1 0.000000 192.168.10.1:49374 → 192.168.10.2:4791 RC_SEND_FIRST",
			wantStderr: []string{
				"cut_in_record_data.pcap: capture file ends in the middle of a record after frame 2\n",
				"rxectl dump: 2 frames, 2 RoCEv2 packets, 0 bad ICRC, 0 malformed\n",
			}},
		{name: "cut in record header", content: raw[:24+rec1+7], code: cli.ExitFail, lines: 1,
			stdout:     "    1 0.000000 192.168.10.1:49374",
			wantStderr: []string{"ends in the middle of a record after frame 1\n", "1 frame, 1 RoCEv2 packet,"}},
		// The whole record header and not one byte of its data: pcapgo
		// took this for the clean end of the file (found by FuzzDump).
		{name: "cut after record header", content: raw[:24+rec1+16], code: cli.ExitFail, lines: 1,
			stdout:     "    1 0.000000 192.168.10.1:49374",
			wantStderr: []string{"ends in the middle of a record after frame 1\n", "1 frame, 1 RoCEv2 packet,"}},
		{name: "header only", content: raw[:24], code: cli.ExitOK,
			wantStderr: []string{"rxectl dump: 0 frames, 0 RoCEv2 packets, 0 bad ICRC, 0 malformed\n"}},
		{name: "huge record", content: hugeRecord, code: cli.ExitFail,
			wantStderr: []string{"reading frame 1: capture length exceeds snap length"}},
		{name: "unsupported link type", content: pcapBytes(105, nil), code: cli.ExitFail,
			wantStderr: []string{"unsupported link type 105"}},
		{name: "pcapng cut", content: ng[:len(ng)-30], code: cli.ExitFail, lines: 1,
			stdout:     "    1 0.000000 10.0.17.1:0 → 10.0.18.1:4791 CNP",
			wantStderr: []string{"capture file ends in the middle of a record after frame 1\n", "rxectl dump: 1 frame, 1 RoCEv2 packet,"}},
		{name: "pcapng cut in block header", content: ng[:28+32+epb1+3], code: cli.ExitFail, lines: 1,
			wantStderr: []string{"capture file ends in the middle of a record after frame 1\n"},
			stdout:     "    1 "},
		{name: "pcapng garbage block", content: append(slices.Clone(ng[:28]), 0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff), code: cli.ExitFail,
			wantStderr: []string{"corrupt pcapng block (impossible length)", "rxectl dump: 0 frames"}},
		{name: "pcapng captured length beyond its block", content: hugeEPB, code: cli.ExitFail, lines: 0,
			wantStderr: []string{"reading frame 1: corrupt pcapng block (impossible length)"}},
		{name: "pcapng no section header", content: ng[28:], code: cli.ExitFail,
			wantStderr: []string{"not a pcap or pcapng capture (starts with 01 00 00 00)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = writeFile(t, strings.ReplaceAll(tc.name, " ", "_")+".pcap", tc.content)
			}
			stdout, stderr, code := runCmd(t, "dump", path)
			require.Equal(t, tc.code, code, stderr)
			if tc.stdout == "" {
				require.Empty(t, stdout)
			} else {
				require.True(t, strings.HasPrefix(stdout, tc.stdout), stdout)
			}
			require.Equal(t, tc.lines, strings.Count(stdout, "\n"))
			for _, w := range tc.wantStderr {
				require.Contains(t, stderr, w)
			}
		})
	}
}

// TestDumpPcapNgUnsupportedInterface: frames of a pcapng interface with an
// unsupported link type are skipped with one warning.
func TestDumpPcapNgUnsupportedInterface(t *testing.T) {
	frames := readPcap(t, cx4Pcap)
	path := writeFile(t, "usb.pcapng", pcapngBytes(220, frames))
	stdout, stderr, code := runCmd(t, "dump", path)
	require.Equal(t, cli.ExitOK, code)
	require.Empty(t, stdout)
	require.Equal(t, 1, strings.Count(stderr, "skipping frames of unsupported link type 220 (first: frame 1)"))
	require.Equal(t, 1, strings.Count(stderr, "skipping frames"), "one warning per link type, not per frame")
	require.Contains(t, stderr, "rxectl dump: 2 frames, 0 RoCEv2 packets")
}

// summaryRE matches dump's summary line: the counts of frames, RoCEv2
// packets, bad ICRC and malformed packets, with the s of a plural noun.
var summaryRE = regexp.MustCompile(`^rxectl dump: (\d+) frame(s?), (\d+) RoCEv2 packet(s?), (\d+) bad ICRC, (\d+) malformed`)

// FuzzDump feeds whole files to the dump loop, as text, --json and -v
// with the same ports, and checks what the output says against the file:
//   - the summary is the last line of standard error, the same in all
//     three modes, and its frame count is the number of records in the
//     file (counted by Capture, and for a classic pcap file read to its end
//     by walking its record headers here);
//   - each RoCEv2 packet the summary counts has exactly one text line and
//     one JSON line (a GSO/GRO datagram one per segment, numbered 1..k of
//     N, k <= N, with the datagram's frame number), and -v's lines that
//     are not indented details are the text lines;
//   - the frame numbers, in 1..frames, never go down;
//   - the JSON lines parse, and those with "error", "truncated" and
//     "icrc_ok": false are the malformed, truncated and bad-ICRC counts,
//     and the text line of the same packet says MALFORMED, TRUNCATED or
//     ICRC BAD just when they do;
//   - the exit status is 0 when the file was read to its end, 1 otherwise
//     with an error line before the summary; a file that is no capture
//     gives no summary and no output.
func FuzzDump(f *testing.F) {
	for _, p := range []string{cx4Pcap, scapyPcap, snapPcap} {
		raw, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Add(pcapBytes(276, readPcap(f, cx4Pcap)))
	f.Add(pcapngBytes(276, readPcap(f, cx4Pcap)))
	f.Add(pcapngBytes(220, readPcap(f, cx4Pcap)))
	// A GSO datagram of three packets, whole and cut by a snap length,
	// beside a frame with a bad ICRC, and a file that ends inside a record.
	cx4 := readPcap(f, cx4Pcap)
	gso := gsoDatagram(f, cutTestPH, []int{256, 256, 100}, func(i int) uint16 { return uint16(i) })
	bad := slices.Clone(cx4[1].data)
	bad[len(bad)-1] ^= 1
	frames := []capFrame{cx4[0], {gso, gopacket.CaptureInfo{Timestamp: cx4[1].ci.Timestamp, CaptureLength: len(gso), Length: len(gso)}},
		{gso[:400], gopacket.CaptureInfo{Timestamp: cx4[1].ci.Timestamp, CaptureLength: 400, Length: len(gso)}},
		{bad, cx4[1].ci}}
	f.Add(pcapBytes(1, frames))
	whole := pcapBytes(1, cx4)
	f.Add(whole[:len(whole)-5])
	f.Fuzz(func(t *testing.T, data []byte) {
		ports := Ports{4791, 53}
		run := func(o options) (stdout string, stderr []string, code int) {
			var out, errb bytes.Buffer
			o.ports = ports
			code = dump(bytes.NewReader(data), "fuzz", &o, &out, &errb, false)
			require.Contains(t, []int{cli.ExitOK, cli.ExitFail}, code)
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			for _, l := range lines {
				if !strings.HasPrefix(l, "rxectl dump: ") {
					require.Fail(t, "stderr line without the prefix", "%q", l)
				}
			}
			return out.String(), lines, code
		}
		text, textErr, code := run(options{})
		jsonOut, jsonErr, jcode := run(options{json: true})
		verbose, verboseErr, vcode := run(options{verbose: true})
		require.Equal(t, code, jcode)
		require.Equal(t, code, vcode)
		require.Equal(t, textErr, jsonErr)
		require.Equal(t, textErr, verboseErr)

		c, err := Open(bytes.NewReader(data))
		if err == nil && c.pcap != nil && !c.LinkType.Supported() {
			err = errors.New("unsupported link type")
		}
		if err != nil { // not a capture dump reads: one error line
			require.Equal(t, cli.ExitFail, code)
			require.Len(t, textErr, 1)
			require.NotRegexp(t, summaryRE, textErr[0])
			require.Empty(t, text)
			require.Empty(t, jsonOut)
			return
		}
		records := 0
		var readErr error
		for {
			if _, readErr = c.Next(); readErr != nil {
				break
			}
			records++
		}

		summary := textErr[len(textErr)-1]
		var st stats
		m := summaryRE.FindStringSubmatch(summary)
		require.NotNil(t, m, summary)
		for i, p := range map[int]*int{1: &st.frames, 3: &st.roce, 5: &st.badICRC, 6: &st.malformed} {
			*p, err = strconv.Atoi(m[i])
			require.NoError(t, err, summary)
		}
		require.Equal(t, st.frames == 1, m[2] == "", "frame in the singular for 1 only: %s", summary)
		require.Equal(t, st.roce == 1, m[4] == "", "packet in the singular for 1 only: %s", summary)
		if i := strings.Index(summary, " malformed, "); i >= 0 {
			_, err = fmt.Sscanf(summary[i:], " malformed, %d truncated by the capture (snap length)", &st.truncated)
			require.NoError(t, err, summary)
			require.Positive(t, st.truncated)
		}
		require.Equal(t, records, st.frames, "summary frames vs records in the file")
		if readErr == io.EOF {
			require.Equal(t, cli.ExitOK, code)
		} else {
			require.Equal(t, cli.ExitFail, code)
			require.GreaterOrEqual(t, len(textErr), 2)
			last := textErr[len(textErr)-2]
			require.True(t, strings.Contains(last, "reading frame") || strings.Contains(last, "after frame"), last)
		}
		if code == cli.ExitOK && len(data) >= 24 && binary.LittleEndian.Uint32(data) == 0xA1B2C3D4 {
			// Walk the classic pcap records by their incl_len.
			n, off := 0, 24
			for off+16 <= len(data) {
				off += 16 + int(binary.LittleEndian.Uint32(data[off+8:]))
				n++
			}
			require.Equal(t, len(data), off, "a file read to its end ends after a record")
			require.Equal(t, n, st.frames)
		}

		textLines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		jsonLines := strings.Split(strings.TrimSuffix(jsonOut, "\n"), "\n")
		if text == "" {
			textLines, jsonLines = nil, nil
		}
		require.Len(t, textLines, st.roce, "one text line per RoCEv2 packet")
		require.Len(t, jsonLines, st.roce, "one JSON line per RoCEv2 packet")
		var summaries []string
		for l := range strings.Lines(verbose) {
			if l != "\n" && !strings.HasPrefix(l, "      ") {
				summaries = append(summaries, strings.TrimSuffix(l, "\n"))
			}
		}
		require.Equal(t, textLines, summaries, "-v's packet lines")

		var malformed, truncated, bad int
		prev, seg, segs := 0, 0, 0
		for i, jl := range jsonLines {
			var j struct {
				Frame     int
				Error     *string
				Truncated bool
				ICRCOK    *bool `json:"icrc_ok"`
				Segment   int
				Segments  int
			}
			// The checks call require only when they fail: its
			// t.Helper walks the stack on every call, which would cost
			// most of a run of a file of many packets.
			if err := json.Unmarshal([]byte(jl), &j); err != nil {
				require.NoError(t, err, jl)
			}
			tl := textLines[i]
			num, err := strconv.Atoi(strings.Fields(tl)[0])
			if err != nil || j.Frame != num {
				require.NoError(t, err, tl)
				require.Equal(t, j.Frame, num, "frame of text line %q and JSON line %q", tl, jl)
			}
			if j.Frame < 1 || j.Frame > st.frames || j.Frame < prev {
				require.True(t, j.Frame >= 1 && j.Frame <= st.frames, jl)
				require.GreaterOrEqual(t, j.Frame, prev, "frame numbers never go down")
			}
			wantSeg, wantSegs := j.Segment, j.Segments
			switch {
			case j.Frame == prev: // the next segment of the same datagram
				wantSeg, wantSegs = seg+1, segs
			case j.Segments > 0:
				wantSeg = 1
			}
			if j.Segment != wantSeg || j.Segments != wantSegs || j.Segment > j.Segments {
				require.Equal(t, wantSeg, j.Segment, jl)
				require.Equal(t, wantSegs, j.Segments, jl)
				require.LessOrEqual(t, j.Segment, j.Segments, jl)
			}
			prev, seg, segs = j.Frame, j.Segment, j.Segments
			isBad := j.ICRCOK != nil && !*j.ICRCOK
			says := func(ok bool, substr string) {
				if ok != strings.Contains(tl, substr) {
					require.Equal(t, ok, strings.Contains(tl, substr), "%q in %q", substr, tl)
				}
			}
			says(j.Segment > 0, fmt.Sprintf(" (segment %d of %d in one UDP datagram", j.Segment, j.Segments))
			says(j.Error != nil, " MALFORMED: ")
			says(j.Truncated, " TRUNCATED by the capture (")
			says(isBad, " ICRC BAD (wire ")
			if ok := j.ICRCOK != nil && *j.ICRCOK; ok != strings.HasSuffix(strings.Split(tl, " (segment ")[0], " ICRC ok") {
				require.Fail(t, "the line's ICRC ok and the JSON's icrc_ok disagree", "icrc_ok %v: %q", ok, tl)
			}
			switch {
			case j.Error != nil:
				malformed++
			case j.Truncated:
				truncated++
			case isBad:
				bad++
			case j.ICRCOK == nil || !*j.ICRCOK:
				require.Fail(t, "a packet neither malformed, truncated, of a bad ICRC nor of a good one", jl)
			}
		}
		require.Equal(t, st.malformed, malformed, summary)
		require.Equal(t, st.truncated, truncated, summary)
		require.Equal(t, st.badICRC, bad, summary)
	})
}

// TestDumpPcapVariants: big-endian and nanosecond pcap files, and FCS bits
// in the link type word, give the same output.
func TestDumpPcapVariants(t *testing.T) {
	frames := readPcap(t, scapyPcap)
	want, wantErr, code := runCmd(t, "dump", "--nano", scapyPcap)
	require.Equal(t, cli.ExitOK, code)
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"big-endian", pcapBytesOrder(binary.BigEndian, false, 1, frames)},
		{"nanosecond", pcapBytesOrder(binary.LittleEndian, true, 1, frames)},
		{"big-endian nanosecond", pcapBytesOrder(binary.BigEndian, true, 1, frames)},
		{"FCS length bits", pcapBytesOrder(binary.LittleEndian, false, 1|0x1<<28|0x2<<29, frames)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gotErr, code := runCmd(t, "dump", "--nano", writeFile(t, "v.pcap", tc.file))
			require.Equal(t, cli.ExitOK, code, gotErr)
			require.Equal(t, want, got)
			require.Equal(t, wantErr, gotErr)
		})
	}
}

// BenchmarkDump measures decoding and printing the Huawei capture (123
// frames) from memory.
func BenchmarkDump(b *testing.B) {
	raw, err := os.ReadFile(huaweiPcap)
	require.NoError(b, err)
	for _, mode := range []struct {
		name string
		o    options
	}{
		{"text", options{ports: Ports{4791}}},
		{"json", options{json: true, ports: Ports{4791}}},
		{"verbose", options{verbose: true, ports: Ports{4791}}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if dump(bytes.NewReader(raw), "bench", &mode.o, io.Discard, io.Discard, false) != cli.ExitOK {
					b.Fatal("dump failed")
				}
			}
		})
	}
}
