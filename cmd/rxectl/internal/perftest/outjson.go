package perftest

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// perftest's --out_json: the report as the JSON file perftest writes
// (perftest_out.json, or --out_json_file), so that a script that reads
// perftest's file reads rxectl's. rxectl's own --json document, on
// standard output, carries more (every row, the counters).

// defOutJSONFile is perftest's DEFAULT_JSON_FILE_NAME, in the working
// directory.
const defOutJSONFile = "perftest_out.json"

// checkOutJSON checks --out_json and --out_json_file.
func (o *options) checkOutJSON() error {
	switch {
	case o.set["out_json_file"] && !o.outJSON:
		return errors.New("--out_json_file names the file of --out_json: give --out_json too")
	case o.outJSON && o.outJSONFile == "":
		return errors.New("--out_json_file: an empty file name")
	}
	return nil
}

// writeOutJSON writes the --out_json file of an end that printed rows,
// as perftest's print_full_bw_report, print_report_lat and
// print_report_lat_duration write it: the test's information, then the
// results of the last row (perftest writes the file anew for each row,
// so with -a the last size's is what it leaves). A WRITE or READ
// server writes the client's row it prints; an end that prints none
// (read-lat's and atomic-lat's server) writes no file, as perftest's.
func (s *session) writeOutJSON() error {
	if !s.o.outJSON {
		return nil
	}
	doc, ok := s.outJSONText()
	if !ok {
		return nil
	}
	// perftest's open_file_write: O_CREAT|O_TRUNC, mode 0600.
	if err := os.WriteFile(s.o.outJSONFile, []byte(doc), 0o600); err != nil {
		return fmt.Errorf("--out_json: %w", err)
	}
	return nil
}

// outJSONText is the --out_json document of the session's last row, and
// false when it has none.
func (s *session) outJSONText() (string, bool) {
	var results string
	switch {
	case s.t.lat && len(s.latResults) > 0:
		results = s.latJSONResults(s.latResults[len(s.latResults)-1])
	case !s.t.lat && len(s.bwResults) > 0:
		results = s.bwJSONResults(s.bwResults[len(s.bwResults)-1])
	default:
		return "", false
	}
	return "{\n" + s.testInfoJSON() + results + "}\n", true
}

// testInfoJSON is write_test_info_to_file's "test_info" object, with the
// values rxectl's header prints.
func (s *session) testInfoJSON() string {
	o := s.o
	var b strings.Builder
	b.WriteString("\"test_info\": {\n")
	fmt.Fprintf(&b, "\"test\": %q,\n", strings.ReplaceAll(s.testTitle(), " ", "_"))
	if o.events && s.scq != nil {
		fmt.Fprintf(&b, "\"Test with events\": \"Using_%s_comp%d\",\n", s.dev.Name(), s.scq.Vector())
	}
	fmt.Fprintf(&b, "\"Dual_port\": \"OFF\",\n\"Device\": %q,\n", s.dev.Name())
	fmt.Fprintf(&b, "\"Number_of_qps\": %d,\n\"Transport_type\": \"IB\",\n", o.qps)
	fmt.Fprintf(&b, "\"Connection_type\": %q,\n\"Using_SRQ\": %q,\n", o.connType, onOff(o.useSRQ))
	fmt.Fprintf(&b, "\"PCIe_relax_order\": %q,\n", onOff(!o.noPCIeRO))
	fmt.Fprintf(&b, "\"ibv_wr_API\": %q,\n", onOff(!o.oldPostSend))
	if s.showsTXDepth() {
		fmt.Fprintf(&b, "\"TX_depth\": %d,\n", o.txDepth)
	}
	if o.postList > 1 {
		fmt.Fprintf(&b, "\"Post_List\": %d,\n", o.postList)
	}
	if o.recvPostList > 1 {
		fmt.Fprintf(&b, "\"Recv_Post_List\": %d,\n", o.recvPostList)
	}
	if s.showsRXDepth() {
		fmt.Fprintf(&b, "\"RX_depth\": %d,\n", o.rxDepth)
	}
	if !s.t.lat {
		fmt.Fprintf(&b, "\"CQ_Moderation\": %d,\n", o.cqMod)
	}
	fmt.Fprintf(&b, "\"Mtu\": %d,\n\"Link_type\": \"Ethernet\",\n", s.mtu.Bytes())
	// perftest resolves the GID index on an Ethernet link (check_link:
	// -1 becomes 0) before it writes the file, so RoCE always has it.
	fmt.Fprintf(&b, "\"GID_index\": %d,\n", o.gidIndex)
	if s.showsOutReads() {
		fmt.Fprintf(&b, "\"Outstand_reads\": %d,\n", s.outReads)
	} else {
		fmt.Fprintf(&b, "\"Max_inline_data\": %d,\n", o.inline)
	}
	fmt.Fprintf(&b, "\"rdma_cm_QPs\": %q,\n", onOff(o.rdmaCM))
	b.WriteString("\"Use_ROCm_memory\": \"OFF\",\n\"Use_MUSA_memory\": \"OFF\",\n")
	method := "Ethernet"
	if o.rdmaCM {
		method = "rdma_cm"
	}
	fmt.Fprintf(&b, "\"Data_ex_method\": %q", method)
	if o.rdmaCM && o.set["tos"] {
		// perftest: the tos of -T (not --tclass), when given.
		fmt.Fprintf(&b, ",\n\"TOS\": %d", o.tclass)
	}
	b.WriteString("\n},\n")
	return b.String()
}

// bwJSONResults is write_bw_report_to_file's "results" object
// (REPORT_FMT_JSON, REPORT_FMT_EXT_JSON in Gb/s below 0.1 or with
// SixDecimals, then
// REPORT_EXT_CPU_UTIL_JSON with --cpu_util). With --output perftest
// writes the one figure followed by a comma, which no JSON reader takes;
// rxectl leaves the comma out.
func (s *session) bwJSONResults(r report.BW) string {
	var b strings.Builder
	b.WriteString("\"results\": {\n")
	switch s.o.output {
	case "bandwidth":
		fmt.Fprintf(&b, "\"bw_avg\": %.6f\n", r.Avg)
	case "message_rate":
		fmt.Fprintf(&b, "\"msgRate_avg\": %.6f\n", r.MsgRate)
	default:
		prec := 2
		if s.o.gbits && (r.Avg < 0.1 || r.SixDecimals) {
			prec = 6
		}
		fmt.Fprintf(&b, "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"BW_peak\": %.*f,\n\"BW_average\": %.*f,\n\"MsgRate\": %.6f",
			r.Size, r.Iters, prec, r.Peak, prec, r.Avg, r.MsgRate)
		if r.CPUUtil != nil {
			fmt.Fprintf(&b, ",\n\"CPU_util\": %.2f\n", *r.CPUUtil)
		} else {
			b.WriteString("\n")
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// latJSONResults is write_report_lat_to_file's "results" object
// (REPORT_FMT_LAT_JSON), or with -D write_report_lat_duration_to_file's
// (REPORT_FMT_LAT_DUR_JSON, then REPORT_EXT_CPU_UTIL_JSON with
// --cpu_util); with --output latency the one figure, t_avg ("avg_lat" in
// an iteration run, as perftest names it there).
func (s *session) latJSONResults(r report.Lat) string {
	var b strings.Builder
	b.WriteString("\"results\": {\n")
	switch {
	case s.o.output == "latency" && s.o.duration > 0:
		fmt.Fprintf(&b, "\"t_avg\": %.6f\n", r.Avg)
	case s.o.output == "latency":
		fmt.Fprintf(&b, "\"avg_lat\": %.6f\n", r.Avg)
	case s.o.duration > 0:
		fmt.Fprintf(&b, "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"t_avg\": %.2f,\n\"tps_average\": %.2f", r.Size, r.Iters, r.Avg, r.TPS)
		if r.CPUUtil != nil {
			fmt.Fprintf(&b, ",\n\"CPU_util\": %.2f\n", *r.CPUUtil)
		} else {
			b.WriteString("\n")
		}
	default:
		fmt.Fprintf(&b, "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"t_min\": %.2f,\n\"t_max\": %.2f,\n\"t_typical\": %.2f,\n\"t_avg\": %.2f,\n"+
			"\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n\"percentile_99.9\": %.2f\n",
			r.Size, r.Iters, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999)
	}
	b.WriteString("}\n")
	return b.String()
}
