package perftest

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// runReport is the part of --json output the fault and capture tests read.
type runReport struct {
	Results []report.BW `json:"results"`
	Faults  *struct {
		Seed  uint64          `json:"seed"`
		Rules []string        `json:"rules"`
		Send  report.DirStats `json:"send"`
		Recv  report.DirStats `json:"recv"`
	} `json:"faults"`
	Device        report.Device    `json:"device"`
	Transport     report.Transport `json:"transport"`
	PeerDevice    *report.Device   `json:"peer_device"`
	PeerTransport report.Transport `json:"peer_transport"`
	Capture       *report.Capture  `json:"capture"`
	LocalDropMode string           `json:"local_drop_mode"`
}

// runJSON runs a loopback test with --json and decodes its report.
func runJSON(t *testing.T, args ...string) runReport {
	t.Helper()
	args = append(args, "--loopback", "--udp-port", "0", "--json")
	out, errs, code := runCmd(t, args...)
	require.Equal(t, cli.ExitOK, code, "%v: %s", args, errs)
	var r runReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.NotNil(t, r.PeerDevice, "loopback reports the server's device too")
	return r
}

// dumpPackets decodes a capture with rxectl dump --strict --json in this
// process and returns one map per packet.
func dumpPackets(t *testing.T, c *report.Capture) []map[string]any {
	t.Helper()
	args := []string{"dump", "--strict", "--json"}
	for _, p := range c.Ports {
		args = append(args, "--port", strconv.Itoa(int(p)))
	}
	out, errs, code := runCmd(t, append(args, c.File)...)
	require.Equal(t, cli.ExitOK, code, "rxectl dump --strict: %s", errs)
	var pkts []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		pkts = append(pkts, m)
	}
	return pkts
}

func countOpcodes(pkts []map[string]any) map[string]int {
	n := map[string]int{}
	for _, p := range pkts {
		op, _ := p["opcode"].(string)
		n[op]++
	}
	return n
}

// TestPcapReadBW: a loopback READ test writes every datagram of both
// directions into one capture, which rxectl dump --strict decodes with
// every ICRC valid.
func TestPcapReadBW(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "read.pcap")
	const iters = 20
	// -u 20 (a 4.3 s ACK timeout) and no recovery timer: a tail probe re-reads
	// part of a READ, which the whole-READ counts below do not model.
	r := runJSON(t, "read-bw", "-n", strconv.Itoa(iters), "-s", "65536", "-m", "4096", "-u", "20", "--recovery=off", "--pcap", file)
	c := r.Capture
	require.NotNil(t, c)
	require.Equal(t, file, c.File)
	require.Empty(t, c.Error)
	require.Zero(t, c.Skipped)
	require.Len(t, c.Ports, 2, "both ephemeral RoCE ports, for dump --port")
	require.Equal(t, r.Device.SentPkts, c.Sent)
	// One READ request per iteration, and the requests the requester sent
	// again when a stalled machine let its ACK timer fire.
	require.Equal(t, uint64(iters)+r.Transport.Retransmits, c.Sent, "one READ request per iteration, plus retransmissions")

	pkts := dumpPackets(t, c)
	require.Len(t, pkts, int(c.Sent+c.Received))
	for _, p := range pkts {
		require.Equal(t, true, p["icrc_ok"], "%v", p)
	}
	ops := countOpcodes(pkts)
	reqs, reads := int(c.Sent), ops["RC_RDMA_READ_RESPONSE_FIRST"]
	require.GreaterOrEqual(t, reads, iters, "every READ is answered")
	require.Equal(t, uint64(reads*16), c.Received, "16 responses of 4096 bytes per 64 KiB READ")
	require.Equal(t, map[string]int{
		"RC_RDMA_READ_REQUEST":         reqs,
		"RC_RDMA_READ_RESPONSE_FIRST":  reads,
		"RC_RDMA_READ_RESPONSE_MIDDLE": reads * 14,
		"RC_RDMA_READ_RESPONSE_LAST":   reads,
	}, ops)
}

// TestPcapStderr: without --json the capture is described on stderr,
// with the dump command that decodes it.
func TestPcapStderr(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "send.pcap")
	out, errs, code := runCmd(t, "send-lat", "--loopback", "--udp-port", "0", "-n", "10", "--pcap", file)
	require.Equal(t, cli.ExitOK, code, errs)
	require.NotContains(t, out, "Faults")
	// A datagram whose write or read was under way when the device closed
	// its capture is counted as not recorded.
	require.Regexp(t, `(?m)^ Capture `+regexp.QuoteMeta(file)+`: \d+ packets \(\d+ sent, \d+ received\)(, [0-9] not recorded)?$`, errs)
	require.Regexp(t, `(?m)^   decode with: rxectl dump --port \d+ --port \d+ `+regexp.QuoteMeta(file)+`$`, errs)
	require.Regexp(t, `(?m)^ Device rxe0 127\.0\.0\.2:\d+: sent \d+ packets`, errs)
	require.Regexp(t, `(?m)^ Peer device rxe0 127\.0\.0\.1:\d+: `, errs)
}

// TestFaultsDrop: 2% of the datagrams lost both ways; the transport
// retransmits and every WRITE completes. The ACK timeout is perftest's
// (-u 14: 67 ms) and the send queue 32 deep: with shorter timeouts or a
// 128-deep window, a loaded 2-core machine running -race (CI runs every
// package at once) sometimes timed out 7 times in a row while the data was
// still on its way, and the run failed with RETRY_EXC_ERR.
func TestFaultsDrop(t *testing.T) {
	t.Parallel()
	const iters, size = 200, 65536
	r := runJSON(t, "write-bw", "-n", strconv.Itoa(iters), "-s", strconv.Itoa(size), "-u", "14", "-t", "32", "--drop=0.02")
	require.Len(t, r.Results, 1)
	require.Equal(t, uint64(iters), r.Results[0].Iters)
	require.Equal(t, uint64(size), r.Results[0].Size)
	require.Positive(t, r.Results[0].Avg)
	require.NotNil(t, r.Faults)
	require.Equal(t, uint64(1), r.Faults.Seed)
	require.Equal(t, []string{"drop=0.02"}, r.Faults.Rules)
	require.Positive(t, r.Faults.Send.Dropped, "WRITE packets dropped")
	require.Positive(t, r.Transport.Retransmits)
	// The server accepted at least every packet of every WRITE once.
	mtu := 4096
	require.GreaterOrEqual(t, r.PeerDevice.RcvdPkts, uint64(iters*size/mtu))
	require.Zero(t, r.Device.QPErrors+r.PeerDevice.QPErrors)
}

// TestFaultsCorrupt: corrupted datagrams fail their ICRC at the receiving
// device, which drops them; the run still completes.
func TestFaultsCorrupt(t *testing.T) {
	t.Parallel()
	// --gso=off: the accounting below counts every packet verified under a
	// non-zero IPv4 ID as a corruption that escaped, and GSO segments after
	// the first carry IDs 1, 2, ... (icrc_recovered counts them).
	r := runJSON(t, "write-bw", "-n", "200", "-u", "14", "-t", "32", "--corrupt=0.02", "--seed", "7", "--gso=off")
	require.Equal(t, uint64(200), r.Results[0].Iters)
	require.Equal(t, uint64(7), r.Faults.Seed)
	corrupted := r.Faults.Send.Corrupted + r.Faults.Recv.Corrupted
	require.Positive(t, r.Faults.Send.Corrupted)
	bad := r.Device.BadICRC + r.PeerDevice.BadICRC
	require.Positive(t, r.PeerDevice.BadICRC, "the server received corrupted WRITEs")
	require.LessOrEqual(t, bad, corrupted)
	// A bit flip escapes the ICRC check only if an IPv4 ID happens to
	// explain it (about 2^-16 per packet).
	require.Equal(t, corrupted, bad+r.Device.ICRCRecovered+r.PeerDevice.ICRCRecovered+r.Device.Malformed+r.PeerDevice.Malformed)
}

// TestFaultsLocalDrop: sends refused with ENOBUFS are sent again by the
// device; the header names the faults and stderr has their counts.
func TestFaultsLocalDrop(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-n", "100", "--local-drop=0.05")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "\n Data ex. method : Ethernet\n Local drop mode : adaptive\n Selective repeat: on, in use (the peer offers it too)\n Faults          : local-drop=0.05 (seed 1)\n"+report.ResultLine+"\n")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Regexp(t, cFormatRE(fmtReport), lines[len(lines)-2])
	require.Contains(t, errs, " Faults (seed 1): local-drop=0.05\n")
	m := regexp.MustCompile(`(?m)^   sent: +dropped 0, duplicated 0, reordered 0, delayed 0, corrupted 0, local drops (\d+), lost 0$`).FindStringSubmatch(errs)
	require.NotNil(t, m, errs)
	n, _ := strconv.Atoi(m[1])
	require.Positive(t, n)
	m = regexp.MustCompile(`(?m)^ Device rxe0 127\.0\.0\.2:\d+: .* local drops (\d+),`).FindStringSubmatch(errs)
	require.NotNil(t, m, errs)
	require.Equal(t, strconv.Itoa(n), m[1], "the device counts every refused send")
}

// TestFaultsScriptedReadResponse: the 3rd READ_RESPONSE_MIDDLE the client
// receives is lost; with go-back-N (--selective-repeat=off) the requester
// reads again from the gap to the end of the READ. The capture still has
// the lost response (receive faults act after the capture).
func TestFaultsScriptedReadResponse(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "scripted.pcap")
	const iters = 20
	r := runJSON(t, "read-bw", "-n", strconv.Itoa(iters), "-s", "65536", "-m", "4096", "-u", "14",
		"--drop=RC_RDMA_READ_RESPONSE_MIDDLE#3", "--pcap", file, "--selective-repeat=off")
	require.Equal(t, uint64(iters), r.Results[0].Iters)
	require.Equal(t, report.DirStats{}, r.Faults.Send)
	require.Equal(t, report.DirStats{Dropped: 1}, r.Faults.Recv)
	require.Positive(t, r.Transport.Retransmits, "the READ is requested again")
	require.Positive(t, r.PeerTransport.DuplicateRequest, "the server answers a duplicate READ")

	ops := countOpcodes(dumpPackets(t, r.Capture))
	require.Greater(t, ops["RC_RDMA_READ_REQUEST"], iters)
	require.GreaterOrEqual(t, ops["RC_RDMA_READ_RESPONSE_MIDDLE"], iters*14+1)
}

// TestFaultsScriptedReadResponseSR: the same loss under selective repeat
// costs a re-read of the missing response only: the responses after it
// are placed where they belong and not sent again. On a slow machine the
// recovery timer (or, with an RTT near -u 14's 67 ms, the IB timer) may
// fire before the re-read is answered; its probe re-reads the rest of the
// READ, so the exact counts are checked only when no timer fired.
func TestFaultsScriptedReadResponseSR(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "scripted.pcap")
	const iters = 20
	r := runJSON(t, "read-bw", "-n", strconv.Itoa(iters), "-s", "65536", "-m", "4096", "-u", "14",
		"--drop=RC_RDMA_READ_RESPONSE_MIDDLE#3", "--pcap", file)
	require.Equal(t, uint64(iters), r.Results[0].Iters)
	require.Equal(t, report.DirStats{Dropped: 1}, r.Faults.Recv)
	rereads := int(r.Transport.ReadHoleRereads)
	require.Positive(t, rereads, "the hole is re-read")

	ops := countOpcodes(dumpPackets(t, r.Capture))
	extra := ops["RC_RDMA_READ_REQUEST"] - iters
	answers := ops["RC_RDMA_READ_RESPONSE_ONLY"] + ops["RC_RDMA_READ_RESPONSE_FIRST"] - iters
	// A probe's re-read that a queued train still covers draws no stream
	// of its own, and one sent just before the last hole filled may be
	// answered after the capture ends.
	require.Positive(t, answers, "the hole's re-read is answered")
	require.LessOrEqual(t, answers, extra, "no READ is answered twice")
	if r.Transport.RTOExpiries+r.Transport.IBTimeouts == 0 {
		require.Equal(t, extra, answers, "every extra READ request is answered")
		require.Equal(t, rereads, extra, "the READs and their hole re-reads")
		require.Equal(t, iters*14, ops["RC_RDMA_READ_RESPONSE_MIDDLE"], "no middle response is sent twice")
		require.Equal(t, rereads, ops["RC_RDMA_READ_RESPONSE_ONLY"], "each re-read of one packet is answered with one ONLY response")
	}
}

func TestInjectUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"read-bw", "--loopback", "--drop=2"}, "probability"},
		{[]string{"read-bw", "--loopback", "--drop=NOPE#3"}, "unknown opcode"},
		{[]string{"read-bw", "--loopback", "--local-drop=0.1,dir=recv"}, "sends only"},
		{[]string{"read-bw", "--loopback", "--reorder=0.1,by=0"}, "by="},
		{[]string{"read-bw", "--loopback", "--seed", "x"}, "seed"},
		{[]string{"read-bw", "--loopback", "-a", "--plot", "x.jpg"}, ".svg or .png"},
		{[]string{"read-bw", "--loopback", "--plot", "x.svg"}, "-a"},
		{[]string{"read-bw", "-a", "--plot", "x.svg"}, "the server of read-bw does not measure"},
		{[]string{"read-bw", "--loopback", "-a", "--plot", "x.svg", "--pcap", "x.svg"}, "same file"},
	}
	for _, tc := range tests {
		_, errs, code := runCmd(t, tc.args...)
		require.Equal(t, cli.ExitUsage, code, "%v", tc.args)
		require.Contains(t, errs, tc.want, "%v", tc.args)
	}
	// The server of send-bw measures every size: it may plot.
	_, err := parsePerftest(findTest(t, "send-bw"), []string{"-a", "--plot", "x.png"})
	require.NoError(t, err)
	// Flags are repeatable and keep their order.
	o, err := parsePerftest(findTest(t, "write-bw"), []string{"--loopback", "--drop=0.01", "--dup=1%,dir=recv", "--drop=RC_SEND_FIRST#3-4"})
	require.NoError(t, err)
	require.Equal(t, "drop=0.01 dup=0.01,dir=recv drop=RC_SEND_FIRST#3-4", o.ruleList())
	out, _, _ := runCmd(t, "help", "write-bw")
	for _, f := range []string{"-drop RULE", "-dup RULE", "-reorder RULE", "-delay RULE", "-corrupt RULE", "-local-drop RULE", "-seed", "-pcap FILE", "-plot FILE"} {
		require.Contains(t, out, f)
	}
}

// TestFaultsFailure: with every datagram lost the run fails; the
// counters still follow, and the error names the faults.
func TestFaultsFailure(t *testing.T) {
	t.Parallel()
	_, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "5", "-u", "8", "--drop=1,dir=send", "--json")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "RETRY_EXC_ERR")
	require.Contains(t, errs, "or the faults injected here (drop=1,dir=send): see their counters above")
	require.Regexp(t, `(?m)^   sent: +dropped [1-9]\d*, `, errs)
	require.Regexp(t, `(?m)^ Device rxe0 .* QP errors 1$`, errs)
}
