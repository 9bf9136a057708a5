package report

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// posts builds post times (ns) whose consecutive gaps are deltas.
func posts(deltas ...int64) []int64 {
	t := []int64{0}
	for _, d := range deltas {
		t = append(t, t[len(t)-1]+d)
	}
	return t
}

// TestLatStats checks print_report_lat's statistics against values
// computed by hand.
func TestLatStats(t *testing.T) {
	// SEND/WRITE (halved): 8 iterations, 7 samples, m = 8 - 3 = 5.
	// Sorted ns: 1000 1500 2000 3000 4000 | 9000 20000 (dropped), /2000.
	r := LatStats(2, posts(3000, 1000, 2000, 9000, 4000, 1500, 20000), 2)
	require.Equal(t, 2, r.Size)
	require.Equal(t, 8, r.Iters)
	require.InDelta(t, 0.5, r.Min, 1e-12)
	require.InDelta(t, 4.5, r.Max, 1e-12)     // delta[m] = 9000: the smaller of the two dropped samples
	require.InDelta(t, 1.0, r.Typical, 1e-12) // m odd: delta[m/2] = 2000
	require.InDelta(t, 1.15, r.Avg, 1e-12)    // (0.5+0.75+1+1.5+2)/5
	// Deviations 0.65 0.4 0.15 -0.35 -0.85 all truncate to 0: the quirk
	// prints 0 where the true deviation is 0.53.
	require.Equal(t, 0.0, r.Stdev)
	require.InDelta(t, 4.5, r.P99, 1e-12)  // delta[ceil(4.95)] = delta[5]
	require.InDelta(t, 4.5, r.P999, 1e-12) // delta[ceil(4.995)] = delta[5]

	// READ/atomic (full round trip): 7 iterations, 6 samples, m = 4.
	// Sorted ns: 2000 3001 4000 7000 | 10000 50000, /1000.
	r = LatStats(64, posts(10000, 2000, 4000, 3001, 50000, 7000), 1)
	require.InDelta(t, 2.0, r.Min, 1e-12)
	require.InDelta(t, 10.0, r.Max, 1e-12)
	require.InDelta(t, 3.5, r.Typical, 1e-12) // m even: (4000+3001)/2 in integer cycles = 3500
	require.InDelta(t, 4.00025, r.Avg, 1e-12) // 16.001/4
	// Deviations 2.00025 0.99925 0.00025 -2.99975 truncate to 2 0 0 -2
	// (toward zero, not -3): sqrt((4+0+0+4)/4).
	require.InDelta(t, math.Sqrt(2), r.Stdev, 1e-12)
	require.InDelta(t, 10.0, r.P99, 1e-12)
	require.InDelta(t, 10.0, r.P999, 1e-12)

	// 1000 iterations of 1 us: m = 997, 99% = delta[988], 99.9% = delta[997].
	d := make([]int64, 999)
	for i := range d {
		d[i] = int64(1000 + i) // sorted already: 1.000 .. 1.998 us
	}
	r = LatStats(2, posts(d...), 1)
	require.InDelta(t, 1.0, r.Min, 1e-12)
	require.InDelta(t, 1.997, r.Max, 1e-12)
	require.InDelta(t, 1.498, r.Typical, 1e-12) // m = 997 odd: delta[498]
	require.InDelta(t, 1.988, r.P99, 1e-12)     // ceil(987.03) = 988
	require.InDelta(t, 1.997, r.P999, 1e-12)    // ceil(996.003) = 997
	require.Equal(t, " 2       1000          1.00           2.00         1.50     \t       1.50        \t0.00   \t\t1.99    \t\t2.00   \n", LatRow(r))
}

func TestPeakBW(t *testing.T) {
	s := int64(1e9)
	posted := []int64{1, s, 2 * s, 3 * s}
	completed := make([]int64, 4)
	completed[1] = 4 * s // cq-mod 2: completions at 1 and 3
	completed[3] = 5 * s
	// Windows: (0..1) 4s/2, (0..3) 5s/4, (1..1) 3s/1, (1..3) 4s/3,
	// (2..3) 3s/2, (3..3) 2s/1. The best is 1.25 s per message.
	require.InDelta(t, 100/1.25, PeakBW(100, posted, completed, 2, 1), 1e-6)

	// Five requests, cq-mod 2: the last is signaled explicitly and its
	// windows count too: (4..4) 0.5 s.
	posted = append(posted, 4*s)
	completed = append(completed, 4*s+s/2)
	require.InDelta(t, 100/0.5, PeakBW(100, posted, completed, 2, 1), 1e-6)
	require.Zero(t, PeakBW(100, posted, make([]int64, 5), 2, 1))
}

// TestPeakBWWindows checks print_report_bw's choice of windows: posts
// timed once per post list, completions every cq-mod requests plus the
// last, and signaled completions with no recorded time left out.
func TestPeakBWWindows(t *testing.T) {
	s := int64(1e9)
	tests := []struct {
		name              string
		posted, completed []int64
		cqMod, postList   int
		want              float64 // seconds per message
	}{
		// -l 2: only posts 0 and 2 start windows; post 1's time is not
		// the start of a list. (1..1) would be 0.5 s.
		{"post list", []int64{0, 4 * s, 5 * s, 6 * s}, []int64{0, 4*s + s/2, 0, 8 * s}, 2, 2, 1.5},
		// Five requests, cq-mod 3: completions at 2 and at the last, 4
		// (5 % 3 = 2). (4..4) 0.5 s.
		{"last signaled", []int64{0, s, 2 * s, 3 * s, 4 * s}, []int64{0, 0, 9 * s, 0, 4*s + s/2}, 3, 1, 0.5},
		// The completion of 1 was not recorded (zero): its windows do
		// not count, (0..3) 1.5 s does.
		{"unrecorded completion", []int64{0, s, 2 * s, 3 * s}, []int64{0, 0, 0, 6 * s}, 2, 1, 1.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, 100/tc.want, PeakBW(100, tc.posted, tc.completed, tc.cqMod, tc.postList), 1e-6)
		})
	}
}

// TestNewBW checks perftest's units: format_factor is 0x100000 bytes
// for MiB/s and 125,000,000 bytes for Gb/s; the message rate is in
// millions of messages per second.
func TestNewBW(t *testing.T) {
	r := NewBW(65536, 1000, time.Second/2, false)
	require.Equal(t, BW{Size: 65536, Iters: 1000, Avg: 125, MsgRate: 0.002}, r)
	r = NewBW(125000, 2000, time.Second, true)
	require.Equal(t, BW{Size: 125000, Iters: 2000, Avg: 2, MsgRate: 0.002}, r)
	require.Equal(t, BW{Size: 8, Iters: 3}, NewBW(8, 3, 0, false))
	require.Equal(t, "MiB/s", BWUnit(false))
	require.Equal(t, "Gb/s", BWUnit(true))
}

// TestBWRowFormats checks print_full_bw_report's choice of format:
// REPORT_FMT_EXT only in Gb/s with an average below 0.1, whatever the
// peak; and the CPU column of REPORT_EXT_CPU_UTIL.
func TestBWRowFormats(t *testing.T) {
	util := 12.345
	tests := []struct {
		name  string
		r     BW
		gbits bool
		want  string
	}{
		{"Gb/s at 0.1", BW{Size: 8, Iters: 20, Peak: 0.05, Avg: 0.1, MsgRate: 0.1}, true,
			" 8          20               0.05               0.10   \t\t     0.100000\n"},
		{"Gb/s peak above 0.1, average below", BW{Size: 8, Iters: 20, Peak: 0.5, Avg: 0.05, MsgRate: 0.1}, true,
			" 8          20           0.500000            0.050000            0.100000\n"},
		{"MiB/s below 0.1", BW{Size: 8, Iters: 20, Peak: 0.05, Avg: 0.05, MsgRate: 0.1}, false,
			" 8          20               0.05               0.05   \t\t     0.100000\n"},
		{"cpu util", BW{Size: 8, Iters: 20, Peak: 1, Avg: 1, MsgRate: 0.1, CPUUtil: &util}, false,
			" 8          20               1.00               1.00   \t\t     0.100000\t    12.35\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, BWRow(tc.r, tc.gbits))
		})
	}
}

func TestBWRow(t *testing.T) {
	r := BW{Size: 65536, Iters: 1000, Peak: 10934.23, Avg: 10930.11, MsgRate: 0.174882}
	require.Equal(t, " 65536      1000             10934.23            10930.11\t\t     0.174882\n", BWRow(r, false))
	// Gb/s below 0.1: REPORT_FMT_EXT.
	r = BW{Size: 8, Iters: 20, Peak: 0.0184, Avg: 0.0166, MsgRate: 0.002179}
	require.Equal(t, " 8          20           0.018400            0.016600            0.002179\n", BWRow(r, true))
}

// TestLatDurRow checks print_report_lat_duration's row: REPORT_FMT_LAT_DUR
// " %-7lu       %lu            %-7.2f        %-7.2f", then with --cpu_util
// REPORT_EXT_CPU_UTIL "\t    %-3.2f\n", else REPORT_EXT "\n"; and the
// header it goes under, RESULT_FMT_LAT_DUR followed by RESULT_EXT_CPU_UTIL
// "    CPU_Util[%%]\n" when the column is there.
func TestLatDurRow(t *testing.T) {
	util := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		r    Lat
		want string
	}{
		{"no cpu util", Lat{Size: 2, Iters: 17632, Avg: 28.36, TPS: 17632},
			" 2             17632            28.36          17632.00\n"},
		{"cpu util", Lat{Size: 2, Iters: 17632, Avg: 28.36, TPS: 17632, CPUUtil: util(12.345)},
			" 2             17632            28.36          17632.00\t    12.35\n"},
		{"cpu util 0", Lat{Size: 65536, Iters: 9, Avg: 1234.5, TPS: 9, CPUUtil: util(0)},
			" 65536         9            1234.50        9.00   \t    0.00\n"},
		{"cpu util 100", Lat{Size: 8, Iters: 100, Avg: 3.25, TPS: 100, CPUUtil: util(100)},
			" 8             100            3.25           100.00 \t    100.00\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, LatDurRow(tc.r))
		})
	}
	require.Equal(t, " #bytes        #iterations       t_avg[usec]    tps average    CPU_Util[%]", LatDurHeader+CPUUtilHeader)
}

// TestLatSamples checks the lists of -U and -H: every gap in the order
// measured, and the gaps sorted without the LatMeasureTail largest, each
// divided by the round-trip factor; and their text as perftest prints it.
func TestLatSamples(t *testing.T) {
	tests := []struct {
		name             string
		gaps             []int64
		rtt              int
		unsorted, sorted []float64
	}{
		{"write halves", []int64{3000, 1000, 2000, 9000, 4000, 1500, 20000}, 2,
			[]float64{1.5, 0.5, 1, 4.5, 2, 0.75, 10}, []float64{0.5, 0.75, 1, 1.5, 2}},
		{"read whole", []int64{10000, 2000, 4000, 3001, 50000, 7000}, 1,
			[]float64{10, 2, 4, 3.001, 50, 7}, []float64{2, 3.001, 4, 7}},
		{"two gaps", []int64{5000, 1000}, 1, []float64{5, 1}, []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, s := LatSamples(posts(tc.gaps...), tc.rtt)
			require.Equal(t, tc.unsorted, u)
			require.Equal(t, tc.sorted, s)
			// The histogram holds the samples the statistics use.
			if len(s) > 0 {
				r := LatStats(2, posts(tc.gaps...), tc.rtt)
				require.Equal(t, r.Min, s[0])
			}
		})
	}
	u, s := LatSamples(posts(), 2)
	require.Nil(t, u)
	require.Nil(t, s)
	require.Equal(t, "#, usec\n1, 1.5\n2, 0.5\n3, 1234.57\n", SamplesText([]float64{1.5, 0.5, 1234.567}))
	require.Equal(t, "#, usec\n", SamplesText(nil))
}

// TestPeakBWZeroWindow: a window whose completion is timed at the same
// instant as its post (the clock's granularity) takes no time, and
// perftest's peak would divide by it; PeakBW then reports no peak (0)
// rather than +Inf, or a peak from the other windows alone.
func TestPeakBWZeroWindow(t *testing.T) {
	// cq-mod 1: windows (0..0) 0 ns, (0..1) 15/2 = 7 ns, (1..1) 10 ns.
	require.Zero(t, PeakBW(100, []int64{5, 10}, []int64{5, 20}, 1, 1))
	// The first completion 8 ns after its post: (0..0) 8 ns, (0..1) 7 ns,
	// (1..1) 10 ns; the best is 7 ns per message.
	require.InDelta(t, 100e9/7, PeakBW(100, []int64{5, 10}, []int64{13, 20}, 1, 1), 1e-3)
}

// TestLatRowColumns: each figure of a latency row in its own column of
// REPORT_FMT_LAT, in perftest's order: t_min, t_max, t_typical, t_avg,
// t_stdev, 99% and 99.9% percentiles, each "%-7.2f".
func TestLatRowColumns(t *testing.T) {
	r := Lat{Size: 64, Iters: 1000, Min: 1.11, Max: 2.22, Typical: 3.33, Avg: 4.44, Stdev: 5.55, P99: 6.66, P999: 7.77}
	want := " 64     " + " 1000" + "          1.11   " + "        2.22   " + "      3.33   " + "  \t       4.44   " +
		"     \t5.55   " + "\t\t6.66   " + " \t\t7.77   " + "\n"
	require.Equal(t, want, LatRow(r))
}
