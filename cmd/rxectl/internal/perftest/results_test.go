package perftest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestJSONResults: the "results" objects of --out_json/--json hold each
// figure in its own field, in perftest's formats: REPORT_FMT_JSON (BW
// figures %.2lf, or %.6lf in Gb/s below 0.1 or for a -b row whose own
// direction is (SixDecimals); MsgRate %.6lf) then
// REPORT_EXT_CPU_UTIL_JSON (%.2f); REPORT_FMT_LAT_JSON (%.2f each);
// REPORT_FMT_LAT_DUR_JSON; and the one figure of --output (%lf).
func TestJSONResults(t *testing.T) {
	util := 12.3456
	bw := report.BW{Size: 65536, Iters: 1000, Peak: 10934.234, Avg: 10930.111, MsgRate: 0.1748823}
	bwUtil := bw
	bwUtil.CPUUtil = &util
	slow := report.BW{Size: 8, Iters: 20, Peak: 0.5, Avg: 0.05, MsgRate: 0.1}
	lat := report.Lat{Size: 64, Iters: 1000, Min: 1.114, Max: 2.224, Typical: 3.334, Avg: 4.444, Stdev: 5.554, P99: 6.664, P999: 7.774, TPS: 17632}
	tests := []struct {
		name string
		o    options
		bw   *report.BW
		lat  *report.Lat
		want string
	}{
		{"bw", options{}, &bw, nil,
			"\"MsgSize\": 65536,\n\"n_iterations\": 1000,\n\"BW_peak\": 10934.23,\n\"BW_average\": 10930.11,\n\"MsgRate\": 0.174882\n"},
		{"bw cpu_util", options{}, &bwUtil, nil,
			"\"MsgSize\": 65536,\n\"n_iterations\": 1000,\n\"BW_peak\": 10934.23,\n\"BW_average\": 10930.11,\n\"MsgRate\": 0.174882,\n\"CPU_util\": 12.35\n"},
		{"Gb/s below 0.1", options{gbits: true}, &slow, nil,
			"\"MsgSize\": 8,\n\"n_iterations\": 20,\n\"BW_peak\": 0.500000,\n\"BW_average\": 0.050000,\n\"MsgRate\": 0.100000\n"},
		{"Gb/s sum of -b", options{gbits: true}, &report.BW{Size: 8, Iters: 20, Peak: 0.5, Avg: 0.25, MsgRate: 0.1, SixDecimals: true}, nil,
			"\"MsgSize\": 8,\n\"n_iterations\": 20,\n\"BW_peak\": 0.500000,\n\"BW_average\": 0.250000,\n\"MsgRate\": 0.100000\n"},
		{"MiB/s below 0.1", options{}, &slow, nil,
			"\"MsgSize\": 8,\n\"n_iterations\": 20,\n\"BW_peak\": 0.50,\n\"BW_average\": 0.05,\n\"MsgRate\": 0.100000\n"},
		{"bandwidth", options{output: "bandwidth"}, &bw, nil, "\"bw_avg\": 10930.111000\n"},
		{"message rate", options{output: "message_rate"}, &bw, nil, "\"msgRate_avg\": 0.174882\n"},
		{"lat", options{}, nil, &lat,
			"\"MsgSize\": 64,\n\"n_iterations\": 1000,\n\"t_min\": 1.11,\n\"t_max\": 2.22,\n\"t_typical\": 3.33,\n\"t_avg\": 4.44,\n" +
				"\"t_stdev\": 5.55,\n\"percentile_99\": 6.66,\n\"percentile_99.9\": 7.77\n"},
		{"lat -D", options{duration: 5}, nil, &lat,
			"\"MsgSize\": 64,\n\"n_iterations\": 1000,\n\"t_avg\": 4.44,\n\"tps_average\": 17632.00\n"},
		{"latency", options{output: "latency"}, nil, &lat, "\"avg_lat\": 4.444000\n"},
		{"latency -D", options{output: "latency", duration: 5}, nil, &lat, "\"t_avg\": 4.444000\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{o: &tc.o}
			var got string
			if tc.bw != nil {
				got = s.bwJSONResults(*tc.bw)
			} else {
				got = s.latJSONResults(*tc.lat)
			}
			require.Equal(t, "\"results\": {\n"+tc.want+"}\n", got)
		})
	}
}

// TestOutputFigure: --output prints the one figure it names with
// printf("%lf\n"): the average bandwidth, the message rate, or the
// average latency.
func TestOutputFigure(t *testing.T) {
	bw := report.BW{Size: 65536, Iters: 1000, Peak: 10934.234, Avg: 10930.111, MsgRate: 0.1748823}
	for _, tc := range []struct {
		output, want string
	}{{"bandwidth", "10930.111000\n"}, {"message_rate", "0.174882\n"}} {
		var fig bytes.Buffer
		s := &session{o: &options{output: tc.output}, figures: &fig}
		s.printBWRow(bw)
		require.Equal(t, tc.want, fig.String(), tc.output)
	}
	var fig bytes.Buffer
	s := &session{o: &options{output: "latency"}, figures: &fig}
	s.printLatRow(report.Lat{Size: 2, Iters: 1000, Min: 1, Max: 9, Typical: 2, Avg: 2.4567891})
	require.Equal(t, "2.456789\n", fig.String())
}
