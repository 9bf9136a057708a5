package perftest

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// sampleBlocks splits the lines of out into the lists of samples -U and
// -H print ("#, usec", then "i, t" lines) and the lines after the last.
func sampleBlocks(t *testing.T, out string) (blocks [][]float64, rest []string) {
	t.Helper()
	line := regexp.MustCompile(`^(\d+), (\S+)$`)
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "#, usec" {
			if blocks != nil && !line.MatchString(lines[i]) {
				return blocks, lines[i:]
			}
			continue
		}
		var b []float64
		for i+1 < len(lines) && line.MatchString(lines[i+1]) {
			m := line.FindStringSubmatch(lines[i+1])
			require.Equal(t, strconv.Itoa(len(b)+1), m[1], "samples are numbered from 1: %q", lines[i+1])
			v, err := strconv.ParseFloat(m[2], 64)
			require.NoError(t, err)
			b = append(b, v)
			i++
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// TestLatSampleLists: -U prints every sample in the order measured, -H
// the samples the statistics use, sorted (perftest's print_report_lat),
// each list before the size's row, and the table's header again after
// them; --json carries the lists.
func TestLatSampleLists(t *testing.T) {
	tests := []struct {
		cmd   string
		flags []string
		want  []int // lengths of the lists printed, in order
	}{
		{"write-lat", []string{"-U", "-H"}, []int{19, 17}},
		{"send-lat", []string{"--report-histogram"}, []int{17}},
		{"read-lat", []string{"--report-unsorted"}, []int{19}},
		{"atomic-lat", []string{"--report-histogrm"}, []int{17}}, // perftest's own spelling
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			args := append([]string{tc.cmd, "--loopback", "--udp-port", "0", "-n", "20"}, tc.flags...)
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			blocks, rest := sampleBlocks(t, out)
			require.Len(t, blocks, len(tc.want), out)
			for i, n := range tc.want {
				require.Len(t, blocks[i], n, out)
				for _, v := range blocks[i] {
					require.Positive(t, v)
				}
			}
			if tc.want[len(tc.want)-1] == 17 { // -H's list, printed last
				h := blocks[len(blocks)-1]
				require.True(t, slices.IsSorted(h), "the histogram is sorted: %v", h)
			}
			// The header again, then the row, whose t_min is the
			// smallest sample.
			require.GreaterOrEqual(t, len(rest), 3, out)
			require.Equal(t, report.ResultLine, rest[0])
			require.Equal(t, report.LatHeader, rest[1])
			require.Regexp(t, cFormatRE(fmtReportLat), rest[2])
			tmin, err := strconv.ParseFloat(strings.Fields(rest[2])[2], 64)
			require.NoError(t, err)
			// The row rounds to 0.01 µs, the list's %g to six
			// significant digits (0.1 µs from 10 ms up, on a loaded
			// host).
			low := slices.Min(blocks[0])
			require.InDelta(t, low, tmin, 0.0051+0.5*math.Pow(10, math.Floor(math.Log10(low))-5), out)

			out, errs, code = runCmd(t, append(args, "--json")...)
			require.Equal(t, cli.ExitOK, code, errs)
			r := oneLatRow(t, out)
			if slices.Contains(tc.flags, "-U") || slices.Contains(tc.flags, "--report-unsorted") {
				require.Len(t, r.Samples, 19)
			} else {
				require.Nil(t, r.Samples)
			}
			if len(r.Histogram) > 0 {
				require.Len(t, r.Histogram, 17)
				require.Equal(t, r.Min, r.Histogram[0])
			}
		})
	}
	// Without -U and -H: no lists.
	out, errs, code := runCmd(t, "write-lat", "--loopback", "--udp-port", "0", "-n", "20")
	require.Equal(t, cli.ExitOK, code, errs)
	require.NotContains(t, out, "#, usec")
}

// TestFlagsRxectlLacks: a perftest flag rxectl does not take, or a
// latency test's flag given to a bandwidth test, fails with the reason.
func TestFlagsRxectlLacks(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"read-bw", "-H"}, "-H is for the latency tests"},
		{[]string{"write-bw", "--report-unsorted"}, "-report-unsorted is for the latency tests"},
		{[]string{"write-lat", "-C"}, "perftest's -C (--report-cycles): rxectl times with the operating system's monotonic clock"},
		{[]string{"send-bw", "--flow_label", "4"}, "perftest's --flow_label sets the GRH flow label"},
		{[]string{"read-bw", "-L", "64"}, "-L (--hop_limit) sets a raw Ethernet QP's hop limit"},
		{[]string{"read-bw", "-T", "256"}, "traffic class 256 not in [0, 255]"},
		{[]string{"read-bw", "--use-srq"}, "--use-srq is for the SEND tests"},
		{[]string{"read-bw", "--frobnicate"}, "flag provided but not defined: -frobnicate (rxectl help read-bw lists the flags it takes)"},
		{[]string{"write-lat", "-H", "-D", "2"}, "-H and -U print the samples of an iteration run"},
		{[]string{"read-lat", "-U", "-D", "2"}, "-H and -U print the samples of an iteration run"},
	})
}

// TestFlowLabelRefusalSaysWhy: --flow_label is refused with what it does
// on RoCEv2, where the IP header carries no flow label from kernel rxe:
// it picks the UDP source port of the QP's packets (rxe_modify_qp,
// rdma_get_udp_sport), which gorxe cannot vary per QP.
func TestFlowLabelRefusalSaysWhy(t *testing.T) {
	const why = "perftest's --flow_label sets the GRH flow label of the QPs' address, from which kernel rxe picks the UDP source port of a QP's packets (rxe_modify_qp: rdma_get_udp_sport; its IP headers carry flow label 0); gorxe sends every QP's packets from its device's UDP port"
	requireUsageErrors(t, []usageCase{
		{[]string{"send-bw", "--flow_label", "4"}, why},
		{[]string{"write-lat", "--flow_label=1,2"}, why},
	})
}
