package dump

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

const lossyRead = "../ladder/testdata/read_lossy.pcap"

func TestFlows(t *testing.T) {
	out, errs, code := runCmd(t, "dump", "--flows", lossyRead)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "psn_gaps 1 (16 PSNs missing), psn_rewinds 1, first gap at frame 4")
	require.Contains(t, out, "1. sequence NAK: frames 4-135")
	require.Contains(t, out, "explain: Requests lost before the capture point (16 PSNs in 1 gap, first at frame 4); READ response PSN 5843916 (frame 8) lost after the capture point")

	out, errs, code = runCmd(t, "dump", lossyRead, "--flows", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var v struct {
		Connections []struct {
			Recoveries []struct {
				Cause      string `json:"cause"`
				FirstFrame int    `json:"first_frame"`
			} `json:"recoveries"`
			Explain []string `json:"explain"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, "sequence NAK", v.Connections[0].Recoveries[0].Cause)
	require.Equal(t, 4, v.Connections[0].Recoveries[0].FirstFrame)
	require.Len(t, v.Connections[0].Explain, 1)
}

// corruptPcap is a capture of a write-bw --corrupt run: 7 packets with a bad
// ICRC, 6 of which carried the PSNs of the flow's 6 gaps (see
// ../flows/testdata/README.md).
const corruptPcap = "../flows/testdata/corrupt.pcap"

// TestFlowsBadICRC checks that dump --flows counts the packets with a bad
// ICRC and explains the gaps they carried as corrupted, in text and JSON,
// and that ReadPackets gives them marked.
func TestFlowsBadICRC(t *testing.T) {
	f, err := os.Open(corruptPcap)
	require.NoError(t, err)
	defer f.Close()
	pkts, err := ReadPackets(f, Ports{4791})
	require.NoError(t, err)
	var bad []int
	for _, p := range pkts {
		if p.BadICRC {
			bad = append(bad, p.Frame)
		}
	}
	require.Len(t, pkts, 106)
	require.Equal(t, []int{18, 23, 29, 53, 65, 73, 94}, bad)

	const explain = "Requests corrupted before the capture point (6 PSNs in 6 gaps, first at frame 18): the capture holds them with a bad ICRC, and the receiver dropped them"
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--flows"}, []string{
			"    messages 20, psn_gaps 6 (6 PSNs missing), psn_rewinds 2, first gap at frame 19\n" +
				"    bad_icrc 7, psn_corrupt 6 (dropped by the receiver), frames 18, 23, 29, 53, 65, 73, 94\n",
			"  explain: " + explain + ";",
		}},
		{[]string{"--flows", "--json"}, []string{
			`"bad_icrc": 7,`,
			`"psn_corrupt": 6`,
			`"` + explain + `;`,
		}},
	}
	for _, tc := range tests {
		out, errs, code := runCmd(t, append(append([]string{"dump"}, tc.args...), corruptPcap)...)
		require.Equal(t, cli.ExitOK, code, errs)
		for _, w := range tc.want {
			require.Contains(t, out, w, tc.args)
		}
		require.NotContains(t, out, "lost before the capture point", tc.args)
	}
}

func TestLadderFlag(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--ladder", dir + "/a.svg", lossyRead},
		{"--ladder", dir + "/b.png", "--qp", "0x12", "--frames", "40-70", lossyRead},
		{"--ladder", dir + "/c.svg", "--time", "2ms-8ms", lossyRead},
		{"--ladder", dir + "/d.svg", "--time", "0.002-0.008", "--time", "abs", lossyRead},
		{"--ladder", dir + "/e.svg", "--frames", "4-4", lossyRead}, // A-B with A = B: one frame
	} {
		_, errs, code := runCmd(t, append([]string{"dump"}, args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", args, errs)
		st, err := os.Stat(args[1])
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--qp", "3", lossyRead}, "give --ladder"},
		{[]string{"--ladder", dir + "/x.svg", "--frames", "5-2", lossyRead}, "want A-B"},
		{[]string{"--ladder", dir + "/x.svg", "--frames", "1-2", "--time", "0-1", lossyRead}, "cannot be combined"},
		{[]string{"--flows", "-v", lossyRead}, "-v and --flows"},
		{[]string{"--time", "never", lossyRead}, "want rel, abs or epoch"},
		{[]string{"--ladder", dir + "/x.svg", "--time", "0.1-0.1", lossyRead}, "want rel, abs or epoch (or T1-T2 with --ladder)"},
		{[]string{"--ladder", dir + "/x.svg", "--qp", "0x1000000", lossyRead}, "want a QP number below 2^24"},
		{[]string{"--ladder", dir + "/x.svg", "--json", lossyRead}, "--json with --ladder needs --flows"},
	} {
		_, errs, code := runCmd(t, append([]string{"dump"}, tc.args...)...)
		require.Equal(t, cli.ExitUsage, code, tc.args)
		require.Contains(t, errs, tc.want)
	}
	_, errs, code := runCmd(t, "dump", "--ladder", dir+"/y.svg", "--qp", "99", lossyRead)
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "no flow to QP 0x63")
}

// TestFlowsTimeStepsAndJumps: a capture whose frame 20 is stamped 2 s
// before its first frame, or an hour or 34 years late, is analysed
// and drawn without a panic, in output whose size does not depend on the
// jump.
func TestFlowsTimeStepsAndJumps(t *testing.T) {
	const name = "../../../../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap"
	frames := readPcap(t, name)
	require.Greater(t, len(frames), 20)
	tests := []struct {
		name string
		at   func(first, own time.Time) time.Time
	}{
		{"as captured", func(_, own time.Time) time.Time { return own }},
		{"2 s before the first frame", func(first, _ time.Time) time.Time { return first.Add(-2 * time.Second) }},
		{"an hour later", func(_, own time.Time) time.Time { return own.Add(time.Hour) }},
		{"seconds' high byte flipped", func(_, own time.Time) time.Time { return own.Add(0x40 << 24 * time.Second) }},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := slices.Clone(frames)
			fs[19].ci.Timestamp = tc.at(fs[0].ci.Timestamp, fs[19].ci.Timestamp)
			file := writeFile(t, fmt.Sprintf("steps%d.pcap", i), pcapBytes(1, fs))
			for _, args := range [][]string{{"--flows"}, {"--flows", "--json"}} {
				out, errs, code := runCmd(t, append(append([]string{"dump"}, args...), file)...)
				require.Equal(t, cli.ExitOK, code, "%v: %s", args, errs)
				require.Less(t, len(out), 32<<10, args)
				require.Contains(t, out, "RC_SEND_FIRST", args)
			}
			svg := filepath.Join(dir, fmt.Sprintf("steps%d.svg", i))
			_, errs, code := runCmd(t, "dump", "--ladder", svg, file)
			require.Equal(t, cli.ExitOK, code, errs)
			st, err := os.Stat(svg)
			require.NoError(t, err)
			require.Less(t, st.Size(), int64(1<<20))
		})
	}
}

// TestFlowsStrict: --strict fails the run on a bad ICRC or a malformed
// datagram with --flows and --ladder as it does for the packet dump (the
// flag's help and docs/rxectl.md), and only with --strict.
func TestFlowsStrict(t *testing.T) {
	frames := readPcap(t, scapyPcap)
	require.Len(t, frames, 71)
	dir := t.TempDir()
	good := writeFile(t, "good.pcap", pcapBytes(1, frames[:1]))
	badICRC := writeFile(t, "bad_icrc.pcap", pcapBytes(1, frames[68:69]))    // RC_SEND_ONLY, ICRC BAD
	malformed := writeFile(t, "malformed.pcap", pcapBytes(1, frames[70:71])) // 8 bytes of RoCE
	ladderOut := filepath.Join(dir, "l.svg")
	tests := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"flows, bad ICRC", []string{"--flows", "--strict", badICRC}, cli.ExitFail, "--strict: 1 bad ICRC, 0 malformed"},
		{"flows, malformed", []string{"--flows", "--strict", malformed}, cli.ExitFail, "--strict: 0 bad ICRC, 1 malformed"},
		{"flows JSON, corrupt run", []string{"--flows", "--json", "--strict", corruptPcap}, cli.ExitFail, "--strict: 7 bad ICRC, 0 malformed"},
		{"ladder, corrupt run", []string{"--ladder", ladderOut, "--strict", corruptPcap}, cli.ExitFail, "--strict: 7 bad ICRC, 0 malformed"},
		{"flows, clean", []string{"--flows", "--strict", good}, cli.ExitOK, ""},
		{"flows, bad ICRC, no --strict", []string{"--flows", badICRC}, cli.ExitOK, ""},
		{"flows, malformed, no --strict", []string{"--flows", malformed}, cli.ExitOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, append([]string{"dump"}, tc.args...)...)
			require.Equal(t, tc.want, code, errs)
			if tc.msg != "" {
				require.Contains(t, errs, tc.msg)
			} else {
				require.NotContains(t, errs, "--strict")
			}
		})
	}
}

// TestParseWindowExponents: dump's --time takes seconds in exponent form,
// the range's '-' told apart from an exponent's sign.
func TestParseWindowExponents(t *testing.T) {
	var a analysis
	require.True(t, parseWindow("1e-05-2e-05", &a))
	require.Equal(t, 10*time.Microsecond, a.sel.FromTime)
	require.Equal(t, 20*time.Microsecond, a.sel.ToTime)
	require.False(t, parseWindow("2e-05-1e-05", &a))
}

// TestFlowsMalformedLeftOut: --flows and --ladder leave malformed
// datagrams out of the analysis, and say so on standard error (how many,
// the first one's frame, and where the reason is), with or without
// --strict: a capture whose RoCE datagrams are all malformed (here IP
// fragments, which RoCEv2 forbids) is not "no RoCEv2 flows" and nothing
// more.
func TestFlowsMalformedLeftOut(t *testing.T) {
	frames := readPcap(t, scapyPcap)
	one := writeFile(t, "malformed.pcap", pcapBytes(1, frames[69:71])) // frame 2: 8 bytes of RoCE
	var frags []capFrame
	for _, f := range frames[:3] {
		b := append([]byte(nil), f.data...)
		b[14+6] |= 0x20 // MF: the first fragment of a datagram
		binary.BigEndian.PutUint16(b[14+10:], 0)
		binary.BigEndian.PutUint16(b[14+10:], packet.IPv4HeaderChecksum(b[14:14+packet.IPv4HeaderSize]))
		frags = append(frags, capFrame{b, f.ci})
	}
	fragged := writeFile(t, "frag.pcap", pcapBytes(1, frags))
	ladderOut := filepath.Join(t.TempDir(), "l.svg")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"flows", []string{"--flows", one}, cli.ExitOK,
			"rxectl dump: 1 malformed datagram to a RoCEv2 port left out of the analysis (frame 2; rxectl dump " + one + " says why)\n"},
		{"flows, all fragments", []string{"--flows", fragged}, cli.ExitOK,
			"rxectl dump: 3 malformed datagrams to a RoCEv2 port left out of the analysis (first: frame 1; rxectl dump " + fragged + " says why)\n"},
		{"ladder, all fragments", []string{"--ladder", ladderOut, fragged}, cli.ExitFail,
			"rxectl dump: 3 malformed datagrams to a RoCEv2 port left out of the analysis (first: frame 1; rxectl dump " + fragged + " says why)\n" +
				"rxectl dump: --ladder " + ladderOut + ": no RoCEv2 packet in the selection\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, append([]string{"dump"}, tc.args...)...)
			require.Equal(t, tc.code, code, errs)
			require.Equal(t, tc.want, errs)
		})
	}
}

// TestFlowsCutHeadersLeftOut: --flows and --ladder leave out the packets a
// snap length cut inside their headers, and say so on standard error with
// the snap length that keeps every header: READ requests (BTH and RETH,
// 28 bytes) cut at 60 bytes of frame used to vanish from the analysis
// without a word, taking the lost request's explanation with them, and a
// capture cut inside every BTH was "no RoCEv2 flows" and nothing more.
func TestFlowsCutHeadersLeftOut(t *testing.T) {
	// The snap length named keeps the longest RoCE headers (an RD atomic:
	// BTH, RDETH, DETH, AtomicETH) behind the longest link, IP and UDP
	// headers dump decodes (Ethernet with QinQ, IPv6 and UDP).
	longest := 0
	for op := range 256 {
		if o := packet.Opcode(op); o.Valid() {
			longest = max(longest, o.Info().Length)
		}
	}
	require.LessOrEqual(t, 14+8+packet.IPv6HeaderSize+packet.UDPHeaderSize+longest, cutHeadersSnap)

	frames := readPcap(t, "../flows/testdata/read_request_lost.pcap")
	cut := func(n int) string {
		var out []capFrame
		for _, f := range frames {
			ci := f.ci
			ci.Length = len(f.data)
			out = append(out, capFrame{f.data[:min(n, len(f.data))], ci})
		}
		return writeFile(t, fmt.Sprintf("snap%d.pcap", n), pcapBytes(1, out))
	}
	s60, s50 := cut(60), cut(50)
	ladderOut := filepath.Join(t.TempDir(), "l.svg")
	note := func(n, first int) string {
		return fmt.Sprintf("rxectl dump: %d packets cut by the capture inside their headers left out of the analysis (first: frame %d): a snap length of %d bytes keeps every RoCE header\n",
			n, first, cutHeadersSnap)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"READ requests cut inside their RETH", []string{"--flows", s60}, cli.ExitOK, note(8, 1)},
		{"every packet cut inside its BTH", []string{"--flows", s50}, cli.ExitOK, note(41, 1)},
		{"ladder", []string{"--ladder", ladderOut, s50}, cli.ExitFail,
			note(41, 1) + "rxectl dump: --ladder " + ladderOut + ": no RoCEv2 packet in the selection\n"},
		{"whole", []string{"--flows", "../flows/testdata/read_request_lost.pcap"}, cli.ExitOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, append([]string{"dump"}, tc.args...)...)
			require.Equal(t, tc.code, code, errs)
			require.Equal(t, tc.want, errs)
		})
	}
}
