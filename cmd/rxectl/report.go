package main

// What perftest prints (protocol reference §5.4; perftest_parameters.c:
// ctx_print_test_info, print_report_bw, print_full_bw_report,
// print_report_lat; perftest_communication.c: ctx_print_pingpong_data),
// with C printf semantics (cfmt.go).

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// resultLine is perftest's RESULT_LINE: 87 dashes.
var resultLine = strings.Repeat("-", 87)

// Table headers (RESULT_FMT, RESULT_FMT_G, RESULT_FMT_LAT).
const (
	bwHeaderMiB  = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
	bwHeaderGb   = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	latDurHeader = " #bytes        #iterations       t_avg[usec]    tps average"
	latHeader    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
)

func bwUnit(gbits bool) string {
	if gbits {
		return "Gb/s"
	}
	return "MiB/s"
}

// testTitle is the header's test name, e.g. "RDMA_Read BW Test" or
// "Atomic FETCH_AND_ADD Latency Test".
func (s *session) testTitle() string {
	t := s.t.verb.title() + " "
	if s.t.verb == verbAtomic {
		t += s.o.atomicType + " "
	}
	if s.t.lat {
		return t + "Latency Test"
	}
	if s.o.bidir {
		t += "Bidirectional "
	}
	return t + "BW Test"
}

// printHeader is ctx_print_test_info as perftest 6.x prints it.
func (s *session) printHeader() {
	o := s.o
	var b strings.Builder
	b.WriteString(resultLine + "\n")
	b.WriteString("                    " + s.testTitle() + "\n")
	fmt.Fprintf(&b, " Dual-port       : OFF\t\tDevice         : %s\n", s.dev.Name())
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : IB\n", o.qps)
	b.WriteString(" Connection type : RC\t\tUsing SRQ      : OFF\n")
	b.WriteString(" PCIe relax order: ON\t\tLock-free      : OFF\n")
	b.WriteString(" ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF\n")
	if s.client || o.bidir {
		fmt.Fprintf(&b, " TX depth        : %d\n", o.txDepth)
	}
	if s.t.verb == verbSend && (!s.client || o.bidir) {
		fmt.Fprintf(&b, " RX depth        : %d\n", o.rxDepth)
	}
	if !s.t.lat {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", o.cqMod)
		b.WriteString(" CQE Poll Batch  : Dynamic\n")
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", s.mtu.Bytes())
	b.WriteString(" Link type       : Ethernet\n")
	fmt.Fprintf(&b, " GID index       : %d\n", o.gidIndex)
	if s.t.verb == verbRead || s.t.verb == verbAtomic {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", s.outReads)
	} else {
		fmt.Fprintf(&b, " Max inline data : %d[B]\n", o.inline)
	}
	b.WriteString(" rdma_cm QPs\t : OFF\n")
	b.WriteString(" Data ex. method : Ethernet\n")
	fmt.Fprintf(&b, " Read retry      : %s\n", o.readRetry)
	if len(o.rules) > 0 {
		fmt.Fprintf(&b, " Faults          : %s (seed %d)\n", o.ruleList(), o.seed)
	}
	b.WriteString(resultLine + "\n")
	io.WriteString(s.out, b.String())
}

// printAddr prints an address and GID line (BASIC_ADDR_FMT, READ_FMT,
// RDMA_FMT, PERF_GID_FMT): " OUT" for READ, " RKey ... VAddr ..." for READ
// and WRITE, the GID bytes in decimal.
func (s *session) printAddr(side string, k keyMsg) {
	io.WriteString(s.out, addrLines(side, s.t.verb, k))
}

func addrLines(side string, v verb, k keyMsg) string {
	line := fmt.Sprintf(" %s address: LID %s QPN %s PSN %s", side, cHexAlt(uint64(k.LID), 4), cHexAlt(uint64(k.QPN), 6), cHexAlt(uint64(k.PSN), 6))
	if v == verbRead {
		line += " OUT " + cHexAlt(uint64(k.OutReads), 4)
	}
	if v == verbRead || v == verbWrite {
		line += " RKey " + cHexAlt(uint64(k.RKey), 8) + " VAddr " + cHexAlt(k.VAddr, 16)
	}
	return line + "\n GID: " + gidString(k.GID) + "\n"
}

// printTableHeader prints RESULT_LINE and the table's column header.
func (s *session) printTableHeader() {
	h := bwHeaderMiB
	switch {
	case s.t.lat && s.o.duration > 0:
		h = latDurHeader
	case s.t.lat:
		h = latHeader
	case s.o.gbits:
		h = bwHeaderGb
	}
	io.WriteString(s.out, resultLine+"\n"+h+"\n")
}

func (s *session) printLine() { io.WriteString(s.out, resultLine+"\n") }

// printBWRow is print_full_bw_report for one report, or its --output
// figure.
func (s *session) printBWRow(r bwReport) {
	switch s.o.output {
	case "bandwidth":
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.Avg) // printf("%lf\n")
	case "message_rate":
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.MsgRate)
	default:
		io.WriteString(s.out, bwRow(r, s.o.gbits))
	}
}

// stdoutFigure is where --output figures go (s.out is silenced then).
func (s *session) stdoutFigure() io.Writer {
	if s.figures != nil {
		return s.figures
	}
	return io.Discard
}

// bwRow formats a BW row with REPORT_FMT
// " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf\n",
// or, in Gb/s below 0.1, REPORT_FMT_EXT
// " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n".
func bwRow(r bwReport, gbits bool) string {
	if gbits && r.Avg < 0.1 {
		return " " + cUint(r.Size, 7) + "    " + cUint(r.Iters, 0) + "           " + cFloat(r.Peak, 7, 6) +
			"            " + cFloat(r.Avg, 7, 6) + "            " + cFloat(r.MsgRate, 7, 6) + "\n"
	}
	return " " + cUint(r.Size, 7) + "    " + cUint(r.Iters, 10) + "       " + cFloat(r.Peak, 7, 2) +
		"            " + cFloat(r.Avg, 7, 2) + "\t\t     " + cFloat(r.MsgRate, 7, 6) + "\n"
}

// latResult is one row of a latency table, in microseconds.
type latResult struct {
	Size    int     `json:"bytes"`
	Iters   int     `json:"iterations"`
	Min     float64 `json:"t_min"`
	Max     float64 `json:"t_max"`
	Typical float64 `json:"t_typical"`
	Avg     float64 `json:"t_avg"`
	Stdev   float64 `json:"t_stdev"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p99_9"`
	TPS     float64 `json:"tps,omitempty"` // -D: round trips per second
}

// latMeasureTail is LAT_MEASURE_TAIL: the largest samples left out.
const latMeasureTail = 2

// latStats is print_report_lat: samples are the gaps between consecutive
// posts (in ns, perftest's cycles at 1000 per microsecond), divided by
// rttFactor (2 for SEND and WRITE, whose gap is a round trip; 1 for READ
// and atomics). Sorted, the top latMeasureTail are dropped: m = iters - 3.
// t_max is delta[m], the largest dropped one; t_typical the median of the
// first m (the integer mean of the two middle ones when m is even); the
// standard deviation truncates each deviation to an integer number of
// microseconds before squaring it, as perftest's int temporaries do; the
// percentiles are delta[ceil(0.99 m)] and delta[ceil(0.999 m)].
func latStats(size int, tposted []int64, rttFactor int) latResult {
	n := len(tposted) - 1
	delta := make([]int64, n)
	for i := range delta {
		delta[i] = tposted[i+1] - tposted[i]
	}
	slices.Sort(delta)
	m := n - latMeasureTail
	var median int64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	q := 1000.0 * float64(rttFactor) // cycles_rtt_quotient
	var sum float64
	for _, d := range delta[:m] {
		sum += float64(d) / q
	}
	avg := sum / float64(m)
	var stdevSum float64
	for _, d := range delta[:m] {
		tv := int64(avg - float64(d)/q) // int temp_var: truncated toward zero
		pv := int64(math.Pow(float64(tv), 2))
		stdevSum += float64(pv)
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	return latResult{
		Size: size, Iters: len(tposted),
		Min: float64(delta[0]) / q, Max: float64(delta[m]) / q, Typical: float64(median) / q,
		Avg: avg, Stdev: math.Sqrt(stdevSum / float64(m)),
		P99: float64(delta[i99]) / q, P999: float64(delta[i999]) / q,
	}
}

// latRow formats a latency row with REPORT_FMT_LAT
// " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n".
func latRow(r latResult) string {
	return " " + cUint(uint64(r.Size), 7) + " " + cUint(uint64(r.Iters), 0) + "          " + cFloat(r.Min, 7, 2) +
		"        " + cFloat(r.Max, 7, 2) + "      " + cFloat(r.Typical, 7, 2) + "  \t       " + cFloat(r.Avg, 7, 2) +
		"     \t" + cFloat(r.Stdev, 7, 2) + "\t\t" + cFloat(r.P99, 7, 2) + " \t\t" + cFloat(r.P999, 7, 2) + "\n"
}

// printLatRow prints a latency row, or its --output latency figure.
func (s *session) printLatRow(r latResult) {
	if s.o.output == "latency" {
		fmt.Fprintf(s.stdoutFigure(), "%.6f\n", r.Avg) // printf("%lf\n", average)
		return
	}
	if s.o.duration > 0 {
		io.WriteString(s.out, latDurRow(r))
		return
	}
	io.WriteString(s.out, latRow(r))
}

// latDurRow formats a duration-mode latency row with perftest's
// REPORT_FMT_LAT_DUR " %-7lu       %lu            %-7.2f        %-7.2f\n"
// (size, iterations, t_avg, tps average).
func latDurRow(r latResult) string {
	return " " + cUint(uint64(r.Size), 7) + "       " + cUint(uint64(r.Iters), 0) + "            " +
		cFloat(r.Avg, 7, 2) + "        " + cFloat(r.TPS, 7, 2) + "\n"
}

// statusLine is the live status of a -D run on a terminal.
type statusLine struct {
	w     io.Writer
	unit  string
	shown bool
}

func newStatusLine(w io.Writer, o *options) *statusLine {
	f, ok := w.(*os.File)
	if !ok || !o.fullOutput() {
		return &statusLine{}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return &statusLine{}
	}
	return &statusLine{w: w, unit: bwUnit(o.gbits)}
}

func (l *statusLine) show(r bwReport) {
	if l.w == nil {
		return
	}
	fmt.Fprintf(l.w, "\r %d bytes: %d iterations, %.2f %s, %.6f Mpps so far ", r.Size, r.Iters, r.Avg, l.unit, r.MsgRate)
	l.shown = true
}

func (l *statusLine) clear() {
	if l.shown {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", 79))
		l.shown = false
	}
}
