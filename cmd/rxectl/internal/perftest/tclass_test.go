package perftest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/stretchr/testify/require"
)

// TestTrafficClassFlag: -T, --tos and --tclass set the traffic class of
// what each end sends (rxe.Options.TrafficClass, which TestTrafficClass
// of package rxe checks on the socket); --json reports it, the capture
// shows it in the sent packets' IPv4 headers, and every ICRC still checks.
func TestTrafficClassFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag string
		want int
	}{{"--tclass=0xb8", 0xb8}, {"-T=106", 106}, {"--tos=0", 0}} {
		file := filepath.Join(t.TempDir(), "tc.pcap")
		out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "8192", tc.flag, "--pcap", file, "--json")
		require.Equal(t, cli.ExitOK, code, "%s: %s", tc.flag, errs)
		var doc struct {
			TrafficClass int `json:"traffic_class"`
			Capture      struct {
				Ports []int `json:"udp_ports"`
			} `json:"capture"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		require.Equal(t, tc.want, doc.TrafficClass)

		sent := 0
		for _, frame := range pcapFrames(t, file) {
			if bytes.Equal(frame[6:12], pcapdump.LocalMAC[:]) {
				require.Equal(t, byte(tc.want), frame[14+1], "%s: the IPv4 TOS of a sent packet", tc.flag)
				sent++
			}
		}
		require.Positive(t, sent)
		require.Len(t, doc.Capture.Ports, 2)
		args := []string{"dump", "--strict"}
		for _, p := range doc.Capture.Ports {
			args = append(args, "--port", strconv.Itoa(p))
		}
		_, derrs, code := runCmd(t, append(args, file)...)
		require.Equal(t, cli.ExitOK, code, derrs)
		require.Regexp(t, ` [1-9]\d* RoCEv2 packets, 0 bad ICRC, 0 malformed`, derrs)
	}
}

// TestSocketOptionsFlags: the device's sockets are opened with --tclass,
// --gso=off and --no-force-buffers.
func TestSocketOptionsFlags(t *testing.T) {
	o, err := parsePerftest(findTest(t, "read-bw"), []string{"--tclass", "106", "--gso=off", "--no-force-buffers"})
	require.NoError(t, err)
	so := (&session{o: o}).socketOptions()
	require.Equal(t, uint8(106), so.TOS)
	require.True(t, so.NoGSO)
	require.True(t, so.NoForce)
	o, err = parsePerftest(findTest(t, "read-bw"), nil)
	require.NoError(t, err)
	so = (&session{o: o}).socketOptions()
	require.Zero(t, so.TOS)
	require.False(t, so.NoGSO)
	require.False(t, so.NoForce)
}
