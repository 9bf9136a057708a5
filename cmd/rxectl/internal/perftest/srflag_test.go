package perftest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/stretchr/testify/require"
)

// srReport is the selective-repeat part of --json.
type srReport struct {
	Flag string `json:"selective_repeat"`
	Peer bool   `json:"peer_selective_repeat"`
	Used bool   `json:"selective_repeat_used"`
}

// TestSelectiveRepeatFlag: two rxectl ends use selective repeat by
// default; --selective-repeat=off on both gives go-back-N; UC offers
// nothing.
func TestSelectiveRepeatFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want srReport
	}{
		{[]string{"write-bw", "-n", "20"}, srReport{"on", true, true}},
		{[]string{"read-bw", "-n", "20", "--selective-repeat=off"}, srReport{"off", false, false}},
		{[]string{"send-bw", "-n", "20", "-c", "UC", "--selective-repeat", "on"}, srReport{"on", false, false}},
	} {
		t.Run(tc.args[0]+"/"+tc.want.Flag, func(t *testing.T) {
			args := append(tc.args, "--loopback", "--udp-port", "0", "--json")
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			var got srReport
			require.NoError(t, json.Unmarshal([]byte(out), &got), out)
			require.Equal(t, tc.want, got)
		})
	}
	_, errs, code := runCmd(t, "write-bw", "--loopback", "--selective-repeat=maybe")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "not on or off")
}

func TestSRSummary(t *testing.T) {
	for _, tc := range []struct {
		off, rxectl, peerSR bool
		conn                string
		want                string
	}{
		{false, true, true, "RC", "on, in use (the peer offers it too)"},
		{false, true, false, "RC", "on, not in use (the peer does not offer it: go-back-N)"},
		{false, false, false, "RC", "on, not in use (perftest offers nothing: go-back-N)"},
		{true, true, true, "RC", "off, not in use (go-back-N)"},
		{false, true, true, "UC", "on, not in use (RC only)"},
	} {
		s := &session{o: &options{noSR: srOffFlag(tc.off), connType: tc.conn}}
		s.peer.RxeCtl, s.peer.SelectiveRepeat = tc.rxectl, tc.peerSR
		require.Equal(t, tc.want, s.srSummary())
	}
}

// TestSRCaptureDecodes: a lossy WRITE run with selective repeat carries
// hole reports; rxectl dump --strict decodes every datagram of the capture
// as RoCEv2 (none skipped, every ICRC valid and verified, nothing
// malformed: an opcode it does not know would be) and names the hole
// reports' NAK code, and Wireshark (tshark, when installed) dissects every
// frame as RoCEv2 with nothing malformed and no expert error.
func TestSRCaptureDecodes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sr.pcap")
	r := runJSON(t, "write-bw", "-n", "20", "-s", "65536", "--drop=0.03,dir=send", "--seed", "3", "--pcap", file)
	require.Positive(t, r.PeerTransport.SRHolesReported, "the server's responder reported holes")
	require.Positive(t, r.Transport.SRHolesReceived)
	require.Equal(t, r.PeerTransport.SRHolesReported, r.Transport.SRHolesReceived+lostHoleReports(r), "every hole report sent arrives (no loss on responses)")
	pkts := dumpPackets(t, r.Capture)
	require.Len(t, pkts, int(r.Capture.Sent+r.Capture.Received), "every datagram of the capture decodes as RoCEv2")
	holes, progress := 0, 0
	for _, p := range pkts {
		require.Equal(t, true, p["icrc_ok"], "ICRC verified and valid: %v", p)
		// AETH syndrome 0x70: a NAK (0x60) with code 0x10; a progress
		// report has its MSN field equal to its PSN.
		if a, ok := p["aeth"].(map[string]any); ok && a["syndrome"] == float64(0x70) {
			if a["msn"] == p["psn"] {
				progress++
			} else {
				holes++
			}
		}
	}
	require.Equal(t, int(r.PeerTransport.SRHolesReported), holes, "each hole report is in the capture")
	require.Equal(t, int(r.PeerTransport.SRProgressReports), progress, "each progress report is in the capture")
	args := []string{"dump"}
	for _, p := range r.Capture.Ports {
		args = append(args, "--port", strconv.Itoa(int(p)))
	}
	out, errs, code := runCmd(t, append(args, "--strict", file)...)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, errs, fmt.Sprintf(", %d RoCEv2 packets, 0 bad ICRC, 0 malformed\n", len(pkts)), "rxectl dump --strict's summary")
	require.Equal(t, holes+progress, strings.Count(out, "SR_HOLE"), "rxectl dump names the NAK code")
	tsharkDecodes(t, file, len(pkts), r.Capture.Ports)
}

// tsharkDecodes has Wireshark judge a capture of rxectl's
// (testutil.RequireRoCEFrames): with ports (rxectl's UDP ports other than
// 4791) decoded as RoCEv2, tshark must dissect each of its frames (frames
// of them) as Ethernet, IPv4, UDP and InfiniBand, then at most payload
// data, none malformed and none with an expert error. Without tshark it
// logs that the check was skipped.
func tsharkDecodes(t *testing.T, file string, frames int, ports []uint16) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark not installed: Wireshark's check skipped")
		return
	}
	testutil.RequireRoCEFrames(t, tshark, file, frames, "", ports...)
	t.Logf("tshark dissected all %d frames as RoCEv2", frames)
}

// lostHoleReports is zero: the test drops only what the client sends.
func lostHoleReports(r runReport) uint64 { return r.Faults.Recv.Dropped }

// TestSelectiveRepeatRDMACM: with -R the offers travel in the exchange of
// versions over the rdma_cm control connection, before the data QPs
// connect; selective repeat is used, and a lossy WRITE recovers by it.
func TestSelectiveRepeatRDMACM(t *testing.T) {
	port := sharedUDPPort(t)
	out, errs, code := runCmd(t, "write-bw", "-R", "--loopback", "--udp-port", port, "-n", "20", "--drop=0.02,dir=send", "--seed", "5", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var got struct {
		srReport
		Transport report.Transport `json:"transport"`
		Peer      report.Transport `json:"peer_transport"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, srReport{"on", true, true}, got.srReport)
	require.Positive(t, got.Peer.SRHolesReported, "the server's responder reported holes")
	require.Positive(t, got.Transport.SRPacketsResent)
}
