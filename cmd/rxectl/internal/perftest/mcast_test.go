package perftest

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

// TestMcastSendBW runs send-bw -g in loopback: the server attaches its UD
// QP to the group of -M (both of its forms) and the client sends to it.
// The header and address lines are perftest's for a multicast run: the
// title, "MultiCast runs on UD!", the connection type UD without -c, and
// the group as the client's remote address (MGID, QPN 0xffffff); the row
// counts every iteration, which the server received through the group.
func TestMcastSendBW(t *testing.T) {
	for _, tc := range []struct{ mgid, last string }{
		{"239.58.1.1", "01"},
		{"0:0:0:0:0:0:0:0:0:0:255:255:239:58:1:2", "02"},
	} {
		t.Run(tc.mgid, func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, "send-bw", "-g", "-M", tc.mgid, "--loopback", "--udp-port", "0", "-n", "40", "-s", "1024")
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, "                    Send BW Multicast Test\n MultiCast runs on UD!\n")
			require.Contains(t, out, " Connection type : UD\t\tUsing SRQ      : OFF\n")
			require.Contains(t, out, " remote address: LID 0000 QPN 0xffffff ")
			require.Contains(t, out, "\n MGID: 00:00:00:00:00:00:00:00:00:00:255:255:239:58:01:"+tc.last+"\n")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			f := fields(t, cFormatRE(fmtReport), lines[len(lines)-2])
			require.Equal(t, "1024", f[0])
			require.Equal(t, "40", f[1])
		})
	}
}

// TestMcastRefusals: -g and -M where perftest refuses them (another verb
// than SEND, -b, more than one QP, -R), and where rxectl does (a
// connection type other than UD given, -M without -g or not a multicast
// GID); -g makes a send test UD.
func TestMcastRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string // "": taken
	}{
		{[]string{"send-bw", "-g"}, ""},
		{[]string{"send-bw", "-g", "-c", "UD", "-M", "ff0e::1"}, ""},
		{[]string{"send-bw", "--mcg", "--MGID", "0x0:0:0:0:0:0:0:0:0:0:0xff:255:239:1:1:1"}, ""},
		{[]string{"send-bw", "-g", "-b"}, "Bidirectional mode not supported in multicast"},
		{[]string{"send-bw", "-g", "-q", "2"}, "Only 1 QP supported in multicast"},
		{[]string{"send-bw", "-g", "-R"}, "doesn't support Multicast with rdma_cm"},
		{[]string{"send-bw", "-g", "-c", "RC"}, "multicast runs on UD"},
		{[]string{"send-lat", "-g", "-M", "239.1.1.1"}, ""},
		{[]string{"send-bw", "-M", "239.1.1.1"}, "add -g"},
		{[]string{"send-bw", "-g", "-M", "10.1.1.1"}, "not a multicast address"},
		{[]string{"send-bw", "-g", "-M", "1:2:3"}, "16 colon-separated bytes"},
		{[]string{"send-bw", "-g", "-M", "0:0:0:0:0:0:0:0:0:0:255:256:239:1:1:1"}, "byte 11"},
	} {
		o, err := parsePerftest(findTest(t, tc.args[0]), append(tc.args[1:], "192.0.2.1"))
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
			require.Equal(t, "UD", o.connType, "%v", tc.args)
			continue
		}
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	_, errs, code := runCmd(t, "write-bw", "-g", "--loopback")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "MultiCast feature only available on SEND verb")
}

// TestMcastDefaultMGIDIsIPv6: without -M the group is perftest's MCG_GID,
// an IPv6 address, which an IPv4 device refuses with advice.
func TestMcastDefaultMGIDIsIPv6(t *testing.T) {
	t.Parallel()
	require.Equal(t, netip.MustParseAddr("ff01:0:2:c985::"), defaultMGID)
	_, errs, code := runCmd(t, "send-bw", "-g", "--loopback", "--udp-port", "0", "-n", "5")
	require.NotEqual(t, cli.ExitOK, code)
	require.Contains(t, errs, "not of the device's IP version")
	require.Contains(t, errs, "give -M")
}

// TestMcastSendLat runs send-lat -g in loopback with one -M group on both
// ends, on one UDP port as two hosts' ends are (4791): each end attaches
// its QP to the group and sends to the group the other announced, and its
// own messages, which loop back to the group's sockets of the host, its
// QP does not receive (rxe.QPInitAttr.BlockSelfMcastLoopback): no message
// finds a QP without a receive WQE, as its own would take the WQE of the
// peer's next. The row counts every iteration; by default the CQ is
// busy-polled as in the other latency tests (rxe.CQ.BusyPoll reads the
// group's socket too), and with --busy-poll 0 it is not. It does not run
// in parallel: the default spin is left out while any device of the
// process has sockets no spinner reads (spinFor's unreadSockets), which a
// parallel test with --pcap, --ladder or queueing fault rules opens, as
// TestCQPollingReported does not either.
func TestMcastSendLat(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		polling string
	}{
		{nil, " CQ polling      : busy (spins up to 1s a completion, reading the socket)\n"},
		{[]string{"--busy-poll", "0"}, " CQ polling      : wait (CQ.Wait)\n"},
	} {
		var out, errs string
		var code int
		for range 5 {
			port := sharedLoopbackPort(t)
			args := append([]string{"send-lat", "-g", "-M", "239.58.2.1", "--loopback", "--udp-port", strconv.Itoa(int(port)), "-n", "50",
				"-W", "hw_counters/ucud_no_recv_wqe"}, tc.args...)
			out, errs, code = runCmd(t, args...)
			if code == cli.ExitOK || !strings.Contains(errs, "is taken") {
				break // else the port was taken since the probe: another
			}
		}
		require.Equal(t, cli.ExitOK, code, errs)
		require.Contains(t, out, "                    Send Latency Multicast Test\n MultiCast runs on UD!\n")
		require.Contains(t, out, tc.polling)
		require.Equal(t, 2, strings.Count(out, "address: LID 0000 QPN 0xffffff "), out)
		require.Contains(t, out, "\thw_counters/ucud_no_recv_wqe=0\n")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var row string
		for _, l := range lines {
			if strings.HasPrefix(l, " 2 ") {
				row = l
			}
		}
		f := fields(t, cFormatRE(fmtReportLat), row)
		require.Equal(t, "2", f[0])
		require.Equal(t, "50", f[1])
	}
}

// sharedLoopbackPort returns a UDP port free on both 127.0.0.1 and
// 127.0.0.2, the addresses of a --loopback run's two ends.
func sharedLoopbackPort(t *testing.T) uint16 {
	t.Helper()
	for range 10 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return uint16(port)
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and 127.0.0.2 in 10 tries")
	return 0
}

// TestMcastGID: an end attaches to -M's group; without -M to perftest's
// MCG_GID, whose last byte send-lat's client adds one to
// (set_multicast_gid), so the two ends' default groups differ.
func TestMcastGID(t *testing.T) {
	g := netip.MustParseAddr("::ffff:239.1.2.3")
	for _, tc := range []struct {
		mgid   netip.Addr
		client bool
		want   netip.Addr
	}{
		{netip.Addr{}, false, netip.MustParseAddr("ff01:0:2:c985::")},
		{netip.Addr{}, true, netip.MustParseAddr("ff01:0:2:c985::1")},
		{g, false, g},
		{g, true, g},
	} {
		s := &session{o: &options{mgidAddr: tc.mgid}, client: tc.client}
		require.Equal(t, tc.want, s.mcastGID(), "%+v", tc)
	}
}
