package report

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ResultLine is perftest's RESULT_LINE: 87 dashes.
var ResultLine = strings.Repeat("-", 87)

// Table headers (RESULT_FMT, RESULT_FMT_G, RESULT_FMT_LAT,
// RESULT_FMT_LAT_DUR).
const (
	BWHeaderMiB  = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
	BWHeaderGb   = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	LatDurHeader = " #bytes        #iterations       t_avg[usec]    tps average"
	LatHeader    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	// CPUUtilHeader follows a bandwidth header, or a latency test's -D
	// header (RESULT_FMT_LAT_DUR), with --cpu_util (RESULT_EXT_CPU_UTIL).
	CPUUtilHeader = "    CPU_Util[%]"
)

// BWUnit is the unit of bandwidth figures: MiB/s, or Gb/s with
// --report_gbits.
func BWUnit(gbits bool) string {
	if gbits {
		return "Gb/s"
	}
	return "MiB/s"
}

// BW is perftest's struct bw_report_data, one row of a bandwidth table:
// the figures are in the reporting side's units (MiB/s, or Gb/s with
// --report_gbits).
type BW struct {
	Size    uint64  `json:"bytes"`
	Iters   uint64  `json:"iterations"`
	Peak    float64 `json:"bw_peak"`
	Avg     float64 `json:"bw_average"`
	MsgRate float64 `json:"msg_rate_mpps"`
	// CPUUtil is --cpu_util's column: the percentage of the host's
	// processor time spent running during the sample window (nil
	// without it).
	CPUUtil *float64 `json:"cpu_util,omitempty"`
	// CPUSeconds is this process's processor time (user and system) in
	// the sample window, with --cpu_util (nil without it).
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
	// Counters are -W's counters: how much each moved during the row.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// SixDecimals asks for six decimals in Gb/s whatever Avg is: a -b
	// row sums both directions, and perftest's print_full_bw_report
	// picks the format by this end's own average, before it adds the
	// peer's (inc_accuracy).
	SixDecimals bool `json:"-"`
}

// BWRow formats a BW row with REPORT_FMT
// " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf",
// or, in Gb/s below 0.1 (or with SixDecimals), REPORT_FMT_EXT
// " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf",
// then, with CPUUtil, REPORT_EXT_CPU_UTIL "\t    %-3.2f", and a newline.
func BWRow(r BW, gbits bool) string {
	var row string
	if gbits && (r.Avg < 0.1 || r.SixDecimals) {
		row = " " + CUint(r.Size, 7) + "    " + CUint(r.Iters, 0) + "           " + CFloat(r.Peak, 7, 6) +
			"            " + CFloat(r.Avg, 7, 6) + "            " + CFloat(r.MsgRate, 7, 6)
	} else {
		row = " " + CUint(r.Size, 7) + "    " + CUint(r.Iters, 10) + "       " + CFloat(r.Peak, 7, 2) +
			"            " + CFloat(r.Avg, 7, 2) + "\t\t     " + CFloat(r.MsgRate, 7, 6)
	}
	if r.CPUUtil != nil {
		row += "\t    " + CFloat(*r.CPUUtil, 3, 2)
	}
	return row + "\n"
}

// BWFactor is perftest's format_factor: MiB (0x100000 bytes, whatever the
// header says) or, with --report_gbits, 125,000,000 bytes (10^9 bits).
func BWFactor(gbits bool) float64 {
	if gbits {
		return 125e6
	}
	return 0x100000
}

// NewBW is the row of iters messages of size bytes carried in elapsed,
// in the units BWFactor(gbits) gives; its figures are zero when elapsed
// is not positive.
func NewBW(size int, iters uint64, elapsed time.Duration, gbits bool) BW {
	r := BW{Size: uint64(size), Iters: iters}
	if el := elapsed.Seconds(); el > 0 {
		r.Avg = float64(size) * float64(iters) / el / BWFactor(gbits)
		r.MsgRate = float64(iters) / el / 1e6
	}
	return r
}

// PeakBW is print_report_bw's peak in bytes per second: the smallest
// average time per message, in whole nanoseconds as perftest's in whole
// cycles, over every window from a post i to a signaled completion j >= i
// (completions fall every cq-mod requests, plus the explicitly signaled
// last one). Posts are timed once per post list (-l): i steps by
// postList, the first request of each list.
func PeakBW(size int, tposted, tcompleted []int64, cqMod, postList int) float64 {
	n := len(tposted)
	best := int64(math.MaxInt64)
	try := func(i, j int) {
		if tcompleted[j] == 0 || tcompleted[j] < tposted[i] {
			return // no completion recorded there
		}
		if t := (tcompleted[j] - tposted[i]) / int64(j-i+1); t < best {
			best = t
		}
	}
	for i := 0; i < n; i += max(postList, 1) {
		for j := (i+1+cqMod-1)/cqMod*cqMod - 1; j < n; j += cqMod {
			try(i, j)
		}
		if n%cqMod != 0 {
			try(i, n-1)
		}
	}
	if best <= 0 || best == math.MaxInt64 {
		return 0
	}
	return float64(size) * 1e9 / float64(best)
}

// Lat is one row of a latency table, in microseconds.
type Lat struct {
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
	// CPUUtil is --cpu_util's column in a -D row: the percentage of the
	// host's processor time spent running during the sample window (nil
	// without it).
	CPUUtil *float64 `json:"cpu_util,omitempty"`
	// CPUSeconds is this process's processor time (user and system) in
	// the sample window, with --cpu_util and -D (nil without them).
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
	// Samples (-U) and Histogram (-H) are LatSamples' lists, when asked
	// for.
	Samples   []float64 `json:"samples,omitempty"`
	Histogram []float64 `json:"histogram,omitempty"`
	// Counters are -W's counters: how much each moved during the row.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// LatSamples are print_report_lat's lists of samples, in microseconds:
// the gaps between consecutive posts divided by rttFactor, as LatStats
// takes them. Unsorted (-U, --report-unsorted) has every gap in the order
// measured; Sorted (-H, --report-histogram) has them in increasing order
// without the LatMeasureTail largest, the samples the statistics use.
func LatSamples(tposted []int64, rttFactor int) (unsorted, sorted []float64) {
	n := len(tposted) - 1
	if n <= 0 {
		return nil, nil
	}
	q := 1000.0 * float64(rttFactor)
	unsorted = make([]float64, n)
	for i := range unsorted {
		unsorted[i] = float64(tposted[i+1]-tposted[i]) / q
	}
	sorted = slices.Clone(unsorted)
	slices.Sort(sorted)
	return unsorted, sorted[:max(0, n-LatMeasureTail)]
}

// SamplesText is one list of LatSamples as perftest prints it: the line
// "#, usec", then "i, sample" for each, i from 1, the sample in C's %g.
func SamplesText(samples []float64) string {
	var b strings.Builder
	b.WriteString("#, usec\n")
	for i, v := range samples {
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(", ")
		b.WriteString(CG(v))
		b.WriteByte('\n')
	}
	return b.String()
}

// LatMeasureTail is LAT_MEASURE_TAIL: the largest samples left out.
const LatMeasureTail = 2

// LatStats is print_report_lat: samples are the gaps between consecutive
// posts (in ns, perftest's cycles at 1000 per microsecond), divided by
// rttFactor (2 for SEND and WRITE, whose gap is a round trip; 1 for READ
// and atomics). Sorted, the top LatMeasureTail are dropped: m = iters - 3.
// t_max is delta[m], the smaller of the two dropped (the second largest
// sample); t_typical the median of the first m (the integer mean of the
// two middle ones when m is even); the standard deviation truncates each
// deviation to an integer number of microseconds before squaring it, as
// perftest's int temporaries do; the percentiles are delta[ceil(0.99 m)]
// and delta[ceil(0.999 m)].
func LatStats(size int, tposted []int64, rttFactor int) Lat {
	n := len(tposted) - 1
	delta := make([]int64, n)
	for i := range delta {
		delta[i] = tposted[i+1] - tposted[i]
	}
	slices.Sort(delta)
	m := n - LatMeasureTail
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
	return Lat{
		Size: size, Iters: len(tposted),
		Min: float64(delta[0]) / q, Max: float64(delta[m]) / q, Typical: float64(median) / q,
		Avg: avg, Stdev: math.Sqrt(stdevSum / float64(m)),
		P99: float64(delta[i99]) / q, P999: float64(delta[i999]) / q,
	}
}

// LatRow formats a latency row with REPORT_FMT_LAT
// " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n".
func LatRow(r Lat) string {
	return " " + CUint(uint64(r.Size), 7) + " " + CUint(uint64(r.Iters), 0) + "          " + CFloat(r.Min, 7, 2) +
		"        " + CFloat(r.Max, 7, 2) + "      " + CFloat(r.Typical, 7, 2) + "  \t       " + CFloat(r.Avg, 7, 2) +
		"     \t" + CFloat(r.Stdev, 7, 2) + "\t\t" + CFloat(r.P99, 7, 2) + " \t\t" + CFloat(r.P999, 7, 2) + "\n"
}

// LatDurRow formats a duration-mode latency row with perftest's
// REPORT_FMT_LAT_DUR " %-7lu       %lu            %-7.2f        %-7.2f"
// (size, iterations, t_avg, tps average), then, with CPUUtil,
// REPORT_EXT_CPU_UTIL "\t    %-3.2f", and a newline
// (print_report_lat_duration).
func LatDurRow(r Lat) string {
	row := " " + CUint(uint64(r.Size), 7) + "       " + CUint(uint64(r.Iters), 0) + "            " +
		CFloat(r.Avg, 7, 2) + "        " + CFloat(r.TPS, 7, 2)
	if r.CPUUtil != nil {
		row += "\t    " + CFloat(*r.CPUUtil, 3, 2)
	}
	return row + "\n"
}
