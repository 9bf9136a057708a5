package perftest

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/packet"
)

// perftest's outstanding reads (user_param->out_reads) are the device's
// max_qp_rd_atom, or -o, in READ and atomic tests, and 1 in the others
// (perftest_parameters.c, after ctx_set_out_reads), whatever the QPs'
// max_rd_atomic: with -R a WRITE or SEND test's QPs have 0 (its
// rdma_conn_param asks for none), and its key messages still carry 1
// (set_up_connection copies out_reads into each pingpong_dest). Its
// header (ctx_print_test_info) prints " Outstand reads" for READ and
// atomic tests only, " Max inline data" for the others, and its address
// lines (ctx_print_pingpong_data) the OUT field for READ tests only.

// cmKeyMsgs returns the rdma_cm key messages of the pcap file: the
// payloads of its RC SEND ONLY packets of oob.CMKeyMsgSize bytes (over
// Ethernet, IPv4 and UDP), but the zeroed messages of the exchange before
// the test QPs exist (QPN 0).
func cmKeyMsgs(t *testing.T, file string) []oob.KeyMsg {
	t.Helper()
	const bth = 14 + 20 + 8
	const payload = bth + 12
	var ks []oob.KeyMsg
	for _, frame := range pcapFrames(t, file) {
		if len(frame) != payload+oob.CMKeyMsgSize+4 || frame[bth] != byte(packet.RCSendOnly) {
			continue
		}
		k, err := oob.ParseCMKeyMsg(frame[payload : payload+oob.CMKeyMsgSize])
		require.NoError(t, err)
		if k.QPN != 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// TestRDMACMKeyOutReads: the -R key messages of rxectl carry the OUT of
// perftest's: 1 in WRITE and SEND tests, as perftest's ib_send_bw -R sends
// (its capture, kernel-rxe_rdmacm_send_4KiB.pcap), and the outstanding
// reads in READ and atomic tests; the header shows them in READ and
// atomic tests only (" Outstand reads"), the max inline data in the
// others, and the address lines the OUT field in READ tests only.
func TestRDMACMKeyOutReads(t *testing.T) {
	perftest := cmKeyMsgs(t, "../../../../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap")
	require.GreaterOrEqual(t, len(perftest), 2, "perftest's key messages, client and server")
	for _, k := range perftest {
		require.Equal(t, uint16(1), k.OutReads, "perftest's ib_send_bw -R key message: OUT")
	}
	t.Parallel()
	for _, tc := range []struct {
		cmd   string
		extra []string
		out   uint16 // the key messages' OUT
	}{
		{"write-bw", nil, 1},
		{"send-bw", nil, 1},
		{"write-lat", nil, 1},
		{"send-lat", nil, 1},
		{"read-bw", []string{"-o", "4"}, 4},
		{"read-lat", nil, 128}, // the device's max_qp_rd_atom
		{"atomic-bw", []string{"-o", "2"}, 2},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "cm.pcap")
			args := append([]string{tc.cmd, "-R", "--loopback", "--udp-port", "0", "-n", "20", "--pcap", file}, tc.extra...)
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			ks := cmKeyMsgs(t, file)
			require.GreaterOrEqual(t, len(ks), 2, "the key messages of the test QPs, both ends")
			for _, k := range ks {
				require.Equal(t, tc.out, k.OutReads, "OUT")
				require.Equal(t, perftest[0].LID, k.LID)
				require.Equal(t, perftest[0].SRQN, k.SRQN)
			}
			isRead := strings.HasPrefix(tc.cmd, "read")
			if isRead || strings.HasPrefix(tc.cmd, "atomic") {
				require.Contains(t, out, "\n Outstand reads  : "+strconv.Itoa(int(tc.out))+"\n")
				require.NotContains(t, out, "Max inline data")
			} else {
				require.Contains(t, out, "\n Max inline data : 0[B]\n")
				require.NotContains(t, out, "Outstand reads")
			}
			require.Equal(t, isRead, strings.Contains(out, " OUT 0x"), "the OUT field of the address lines:\n%s", out)
		})
	}
}
