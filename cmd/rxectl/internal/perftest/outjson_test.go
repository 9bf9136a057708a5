package perftest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// outJSONDoc is what perftest's --out_json file holds, as a script reads it.
type outJSONDoc struct {
	TestInfo map[string]any `json:"test_info"`
	Results  map[string]any `json:"results"`
}

// readOutJSON runs args with --out_json into a file of its own and
// returns the file's text, parsed and raw.
func readOutJSON(t *testing.T, args ...string) (outJSONDoc, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "out.json")
	// Not about retries: loadProof's ACK timeout.
	_, errs, code := runCmd(t, loadProof(append(args, "--out_json", "--out_json_file", file)...)...)
	require.Equal(t, cli.ExitOK, code, "%v: %s", args, errs)
	raw, err := os.ReadFile(file)
	require.NoError(t, err, "%v", args)
	var doc outJSONDoc
	require.NoError(t, json.Unmarshal(raw, &doc), "%v: %s", args, raw)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "perftest's open_file_write mode")
	return doc, string(raw)
}

// TestOutJSON: --out_json writes perftest's report file, its lines and
// keys in perftest's order, for bandwidth and latency tests, with -D,
// --output, -a (the last size's row) and -e.
func TestOutJSON(t *testing.T) {
	t.Parallel()
	// The whole file of a loopback write-bw: the test's information as
	// write_test_info_to_file writes it, then REPORT_FMT_JSON's results.
	_, raw := readOutJSON(t, "write-bw", "--loopback", "--udp-port", "0", "-s", "4096", "-n", "100")
	want := regexp.QuoteMeta(`{
"test_info": {
"test": "RDMA_Write_BW_Test",
"Dual_port": "OFF",
"Device": "rxe0",
"Number_of_qps": 1,
"Transport_type": "IB",
"Connection_type": "RC",
"Using_SRQ": "OFF",
"PCIe_relax_order": "ON",
"ibv_wr_API": "ON",
"TX_depth": 100,
"CQ_Moderation": 100,
"Mtu": 4096,
"Link_type": "Ethernet",
"GID_index": 0,
"Max_inline_data": 0,
"rdma_cm_QPs": "OFF",
"Use_ROCm_memory": "OFF",
"Use_MUSA_memory": "OFF",
"Data_ex_method": "Ethernet"
},
"results": {
"MsgSize": 4096,
"n_iterations": 100,
"BW_peak": `) + `\d+\.\d\d,\n"BW_average": \d+\.\d\d,\n"MsgRate": \d+\.\d{6}\n}\n}\n$`
	require.Regexp(t, "^"+want, raw)

	for _, tc := range []struct {
		args   []string
		test   string
		keys   []string // the results' keys
		size   float64  // the results' MsgSize (0: none)
		checks func(t *testing.T, doc outJSONDoc)
	}{
		{[]string{"read-bw", "-e", "-n", "50"}, "RDMA_Read_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}, 65536,
			func(t *testing.T, doc outJSONDoc) {
				require.Equal(t, "Using_rxe0_comp0", doc.TestInfo["Test with events"])
				require.Equal(t, 128.0, doc.TestInfo["Outstand_reads"])
			}},
		{[]string{"send-bw", "-a", "-n", "5", "-q", "2", "-l", "5"}, "Send_Post_List_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}, 8 << 20,
			func(t *testing.T, doc outJSONDoc) {
				require.Equal(t, 2.0, doc.TestInfo["Number_of_qps"])
				require.Equal(t, 5.0, doc.TestInfo["Post_List"])
				require.Equal(t, 10.0, doc.Results["n_iterations"], "5 each on 2 QPs")
			}},
		{[]string{"write-bw", "-D", "1", "-f", "0", "--cpu_util"}, "RDMA_Write_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate", "CPU_util"}, 65536, nil},
		{[]string{"write-bw", "-n", "50", "--output", "bandwidth"}, "RDMA_Write_BW_Test", []string{"bw_avg"}, 0, nil},
		{[]string{"send-bw", "-n", "50", "--output", "message_rate", "-b"}, "Send_Bidirectional_BW_Test", []string{"msgRate_avg"}, 0,
			func(t *testing.T, doc outJSONDoc) {
				require.Equal(t, 50.0, doc.TestInfo["TX_depth"])
				require.Contains(t, doc.TestInfo, "RX_depth")
			}},
		{[]string{"atomic-lat", "-n", "50"}, "Atomic_FETCH_AND_ADD_Latency_Test",
			[]string{"MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "percentile_99", "percentile_99.9"}, 8, nil},
		{[]string{"write-lat", "-D", "1", "-f", "0"}, "RDMA_Write_Latency_Test",
			[]string{"MsgSize", "n_iterations", "t_avg", "tps_average"}, 2, nil},
		{[]string{"write-lat", "-D", "1", "-f", "0", "--cpu_util"}, "RDMA_Write_Latency_Test",
			[]string{"MsgSize", "n_iterations", "t_avg", "tps_average", "CPU_util"}, 2, nil},
		{[]string{"send-lat", "-n", "50", "--output", "latency"}, "Send_Latency_Test", []string{"avg_lat"}, 0, nil},
		{[]string{"read-lat", "-D", "1", "-f", "0", "--output", "latency"}, "RDMA_Read_Latency_Test", []string{"t_avg"}, 0, nil},
		{[]string{"write-bw", "-R", "-n", "20", "-T", "106"}, "RDMA_Write_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}, 65536,
			func(t *testing.T, doc outJSONDoc) {
				require.Equal(t, "ON", doc.TestInfo["rdma_cm_QPs"])
				require.Equal(t, "rdma_cm", doc.TestInfo["Data_ex_method"])
				require.Equal(t, 106.0, doc.TestInfo["TOS"])
			}},
		// write_test_info_to_file writes "TOS" when -T gave it (tos is
		// not DEF_TOS), 0 included, and not for --tclass, which sets the
		// traffic class instead, as the header does.
		{[]string{"write-bw", "-R", "-n", "20", "-T", "0"}, "RDMA_Write_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}, 65536,
			func(t *testing.T, doc outJSONDoc) {
				require.Equal(t, 0.0, doc.TestInfo["TOS"])
			}},
		{[]string{"write-bw", "-R", "-n", "20", "--tclass", "106"}, "RDMA_Write_BW_Test",
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}, 65536,
			func(t *testing.T, doc outJSONDoc) {
				require.NotContains(t, doc.TestInfo, "TOS")
			}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{tc.args[0], "--loopback", "--udp-port", "0"}, tc.args[1:]...)
			doc, raw := readOutJSON(t, args...)
			require.Equal(t, tc.test, doc.TestInfo["test"], "%v", tc.args)
			keys := regexp.MustCompile(`(?m)^"([^"]+)":`).FindAllStringSubmatch(raw[regexp.MustCompile(`"results": \{`).FindStringIndex(raw)[1]:], -1)
			var got []string
			for _, k := range keys {
				got = append(got, k[1])
			}
			require.Equal(t, tc.keys, got, "%v: the results' keys in perftest's order", tc.args)
			if tc.size != 0 {
				require.Equal(t, tc.size, doc.Results["MsgSize"], "%v", tc.args)
			}
			if tc.checks != nil {
				tc.checks(t, doc)
			}
		})
	}
}

// TestOutJSONServer: as perftest's, an end that prints a row writes the
// file (send-bw's server its own, write-bw's the client's), one that
// prints none does not (read-lat's server); and --out_json_file alone is
// refused.
func TestOutJSONServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd   string
		wrote bool
	}{{"send-bw", true}, {"write-bw", true}, {"read-lat", false}} {
		file := filepath.Join(t.TempDir(), "server.json")
		port, wait := startServer(t, tc.cmd, "-n", "50", "--udp-port", "0", "--bind", "127.0.0.1", "--out_json", "--out_json_file", file)
		_, errs, code := runCmd(t, tc.cmd, "127.0.0.1", "-p", strconv.Itoa(port), "-n", "50", "--udp-port", "0", "--bind", "127.0.0.2")
		require.Equal(t, cli.ExitOK, code, errs)
		_, err := wait()
		require.NoError(t, err)
		_, err = os.Stat(file)
		require.Equal(t, tc.wrote, err == nil, "%s: %v", tc.cmd, err)
	}
	requireUsageErrors(t, []usageCase{
		{[]string{"read-bw", "--out_json_file", "x.json"}, "--out_json_file names the file of --out_json: give --out_json too"},
		{[]string{"read-bw", "--out_json", "--out_json_file", ""}, "--out_json_file: an empty file name"},
	})
}
