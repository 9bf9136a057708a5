package perftest

// What perftest prints (protocol reference §5.4; perftest_parameters.c:
// ctx_print_test_info, print_report_bw, print_full_bw_report,
// print_report_lat; perftest_communication.c: ctx_print_pingpong_data),
// with C printf semantics (package report).

import (
	"fmt"
	"io"
	"strings"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

func (s *session) testTitle() string {
	t := s.t.verb.title() + " "
	if s.t.verb == verbAtomic {
		t += s.o.atomicType + " "
	}
	mcast := ""
	if s.o.mcg {
		mcast = "Multicast " // perftest's ctx_print_test_info: before "Test"
	}
	if s.t.lat {
		return t + "Latency " + mcast + "Test"
	}
	if s.o.bidir {
		t += "Bidirectional "
	}
	if s.o.postList > 1 {
		t += "Post List "
	}
	return t + "BW " + mcast + "Test"
}

// showsTXDepth, showsRXDepth and showsOutReads are when perftest's
// header (ctx_print_test_info) and its JSON file (write_test_info_to_file)
// show the TX depth, the RX depth, and the outstanding reads in place of
// the max inline data.
func (s *session) showsTXDepth() bool { return s.client || s.o.bidir }
func (s *session) showsRXDepth() bool { return s.t.verb == verbSend && (!s.client || s.o.bidir) }
func (s *session) showsOutReads() bool {
	return s.t.verb == verbRead || s.t.verb == verbAtomic
}

func (s *session) printHeader() {
	o := s.o
	var b strings.Builder
	b.WriteString(report.ResultLine + "\n")
	b.WriteString("                    " + s.testTitle() + "\n")
	if o.events && s.scq != nil {
		// perftest: the completion vector of its CQs (-X, default 0).
		fmt.Fprintf(&b, " Test with events. Using %s_comp%d\n", s.dev.Name(), s.scq.Vector())
	}
	if o.mcg {
		b.WriteString(" MultiCast runs on UD!\n")
	}
	fmt.Fprintf(&b, " Dual-port       : OFF\t\tDevice         : %s\n", s.dev.Name())
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : IB\n", o.qps)
	fmt.Fprintf(&b, " Connection type : %s\t\tUsing SRQ      : %s\n", o.connType, onOff(o.useSRQ))
	fmt.Fprintf(&b, " PCIe relax order: %s\t\tLock-free      : %s\n", onOff(!o.noPCIeRO), onOff(o.noLock))
	fmt.Fprintf(&b, " ibv_wr* API     : %s\t\tUsing Enhanced Reorder      : OFF\n", onOff(!o.oldPostSend))
	if s.showsTXDepth() {
		fmt.Fprintf(&b, " TX depth        : %d\n", o.txDepth)
	}
	if o.postList > 1 {
		fmt.Fprintf(&b, " Post List       : %d\n", o.postList)
	}
	if o.recvPostList > 1 {
		fmt.Fprintf(&b, " Recv Post List  : %d\n", o.recvPostList)
	}
	if s.showsRXDepth() {
		fmt.Fprintf(&b, " RX depth        : %d\n", o.rxDepth)
	}
	if !s.t.lat {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", o.cqMod)
		fmt.Fprintf(&b, " CQE Poll Batch  : %s\n", o.cqePollBatch(s.t))
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", s.mtu.Bytes())
	b.WriteString(" Link type       : Ethernet\n")
	fmt.Fprintf(&b, " GID index       : %d\n", o.gidIndex)
	if s.showsOutReads() {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", s.outReads)
	} else {
		fmt.Fprintf(&b, " Max inline data : %d[B]\n", o.inline)
	}
	if o.rdmaCM {
		b.WriteString(" rdma_cm QPs\t : ON\n")
		b.WriteString(" Data ex. method : rdma_cm")
		if o.set["tos"] {
			fmt.Fprintf(&b, " \tTOS    : %d", o.tclass) // perftest: -T, not --tclass
		}
		if !s.client {
			b.WriteString("\n" + report.ResultLine + "\n Waiting for client rdma_cm QP to connect\n" +
				" Please run the same command with the IB/RoCE interface IP")
		}
		b.WriteString("\n")
	} else {
		b.WriteString(" rdma_cm QPs\t : OFF\n")
		b.WriteString(" Data ex. method : Ethernet\n")
	}
	fmt.Fprintf(&b, " Local drop mode : %s\n", o.localDropMode)
	if s.procsWas != 0 {
		fmt.Fprintf(&b, " Processors      : %d of %d (the peer runs on this host; GOMAXPROCS sets it)\n", s.procs, s.procsWas)
	}
	if s.t.lat {
		fmt.Fprintf(&b, " CQ polling      : %s\n", s.pollingSummary())
	}
	fmt.Fprintf(&b, " Selective repeat: %s\n", s.srSummary())
	if o.set["rate_limit"] && (s.client || o.bidir) {
		fmt.Fprintf(&b, " Rate limit      : %s\n", o.rateSummary())
	}
	if o.latencyGap > 0 {
		fmt.Fprintf(&b, " Latency gap     : %d[usec]\n", o.latencyGap)
	}
	if o.retryCount != defRetryCount {
		fmt.Fprintf(&b, " Retry count     : %d\n", o.retryCount)
	}
	if len(o.rules) > 0 {
		fmt.Fprintf(&b, " Faults          : %s (seed %d)\n", o.ruleList(), o.seed)
	}
	b.WriteString(report.ResultLine + "\n")
	io.WriteString(s.out, b.String())
}

// onOff is perftest's "ON" or "OFF".
func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func (s *session) printAddr(side string, k oob.KeyMsg) {
	lines := addrLines(side, s.t.verb, k)
	if s.o.mcg && (side == "local") != s.client {
		// perftest's print_report_dest labels the group's GID, the
		// server's own and the client's remote one, MGID.
		lines = strings.Replace(lines, "\n GID: ", "\n MGID: ", 1)
	}
	io.WriteString(s.out, lines)
}

// addrLines formats the address and GID lines of k.
func addrLines(side string, v verb, k oob.KeyMsg) string {
	line := fmt.Sprintf(" %s address: LID %s QPN %s PSN %s", side, report.CHexAlt(uint64(k.LID), 4), report.CHexAlt(uint64(k.QPN), 6), report.CHexAlt(uint64(k.PSN), 6))
	if v == verbRead {
		line += " OUT " + report.CHexAlt(uint64(k.OutReads), 4)
	}
	if v == verbRead || v == verbWrite {
		line += " RKey " + report.CHexAlt(uint64(k.RKey), 8) + " VAddr " + report.CHexAlt(k.VAddr, 16)
	}
	return line + "\n GID: " + report.GIDString(k.GID) + "\n"
}
func (s *session) printTableHeader() {
	h := report.BWHeaderMiB
	switch {
	case s.t.lat && s.o.duration > 0:
		h = report.LatDurHeader
	case s.t.lat:
		h = report.LatHeader
	case s.o.gbits:
		h = report.BWHeaderGb
	}
	if s.measuresCPU() {
		h += report.CPUUtilHeader
	}
	io.WriteString(s.out, report.ResultLine+"\n"+h+"\n")
}

// printLine prints RESULT_LINE.
func (s *session) printLine() { io.WriteString(s.out, report.ResultLine+"\n") }
func (s *session) printBWRow(r report.BW) {
	switch s.o.output {
	case "bandwidth":
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.Avg) // printf("%lf\n")
	case "message_rate":
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.MsgRate)
	default:
		io.WriteString(s.out, report.BWRow(r, s.o.gbits))
	}
}
func (s *session) stdoutFigure() io.Writer {
	if s.figures != nil {
		return s.figures
	}
	return io.Discard
}

// latStats is report.LatStats with the lists of samples -U and -H ask
// for.
func (s *session) latStats(size int, tposted []int64, rttFactor int) report.Lat {
	r := report.LatStats(size, tposted, rttFactor)
	if s.o.unsorted || s.o.histogram {
		unsorted, sorted := report.LatSamples(tposted, rttFactor)
		if s.o.unsorted {
			r.Samples = unsorted
		}
		if s.o.histogram {
			r.Histogram = sorted
		}
	}
	return r
}

// printLatRow prints a latency row (or, with --output latency, its
// figure). Before it come the lists of samples of -U and -H, as perftest
// prints them, on the same stream as the row; after them the table's
// header again (print_report_lat), as the lists pushed the first one out
// of sight.
func (s *session) printLatRow(r report.Lat) {
	w := s.out
	if s.o.output != "" {
		w = s.stdoutFigure()
	}
	if r.Samples != nil {
		io.WriteString(w, report.SamplesText(r.Samples))
	}
	if r.Histogram != nil {
		io.WriteString(w, report.SamplesText(r.Histogram))
	}
	if (r.Samples != nil || r.Histogram != nil) && s.o.output == "" {
		s.printTableHeader()
	}
	if s.o.output == "latency" {
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.Avg) // printf("%lf\n", average)
		return
	}
	if s.o.duration > 0 {
		io.WriteString(s.out, report.LatDurRow(r))
		return
	}
	io.WriteString(s.out, report.LatRow(r))
}
