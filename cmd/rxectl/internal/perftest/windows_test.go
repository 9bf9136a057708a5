package perftest

import (
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestBWWindowRow: a duration run's row counts its window's completions
// over the time from the window's start to the time given: the window's
// end, or the time the run was cut short. 1000 messages of 1000 bytes in
// 2 s: 1,000,000 / 2 / 2^20 MiB/s and 0.0005 Mpps, whatever the window's
// nominal end.
func TestBWWindowRow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := bwWindow{start: t0, end: t0.Add(10 * time.Second), counted: 1000}
	r := w.row(1000, t0.Add(2*time.Second), false)
	require.Equal(t, report.BW{Size: 1000, Iters: 1000, Avg: 1e6 / 2 / 0x100000, MsgRate: 0.0005}, r)
	r = w.row(1000, t0.Add(2*time.Second), true)
	require.Equal(t, report.BW{Size: 1000, Iters: 1000, Avg: 1e6 / 2 / 125e6, MsgRate: 0.0005}, r)
}

// TestLatWindow: a latency run in duration mode counts the round trips
// begun inside its sample window (print_report_lat_duration counts
// iterations in SAMPLE_STATE only), and its row is the window's length
// over them, halved for SEND and WRITE (rtt 2): 1000 round trips in 2 s
// are 2000 µs each, 1000 µs as a half round trip, 500 per second.
func TestLatWindow(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name             string
		start, end       time.Duration // sample window, relative to now
		counts           bool
		cpuBegun, cpuEnd bool // --cpu_util's readings taken
	}{
		{"before the window", time.Hour, 2 * time.Hour, false, false, false},
		{"inside it", -time.Hour, time.Hour, true, true, false},
		{"after it", -2 * time.Hour, -time.Hour, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// An off window stands for the readings: started and ended
			// say when a window that is on takes them.
			cpu := &cpuWindow{}
			w := &latWindow{on: true, sampleStart: now.Add(tc.start), sampleEnd: now.Add(tc.end), end: now.Add(3 * time.Hour), cpu: cpu}
			require.False(t, w.tick(), "the run's end is an hour away")
			require.Equal(t, tc.counts, w.count == 1)
			if runtime.GOOS == "linux" {
				cpu.on = true
				require.False(t, w.tick())
				require.NoError(t, cpu.err)
				require.Equal(t, tc.cpuBegun, cpu.started, "the start reading")
				require.Equal(t, tc.cpuEnd, cpu.ended, "the end reading")
			}
		})
	}
	w := &latWindow{on: true, sampleStart: now.Add(-3 * time.Second), sampleEnd: now.Add(-time.Second), end: now.Add(-time.Second), count: 1000,
		cpu: &cpuWindow{}}
	require.True(t, w.tick(), "past the run's end")
	require.Equal(t, 1000, w.count, "past the sample window")
	for _, tc := range []struct {
		rtt int
		avg float64
	}{{2, 1000}, {1, 2000}} {
		r, err := w.result(8, tc.rtt)
		require.NoError(t, err)
		require.Equal(t, report.Lat{Size: 8, Iters: 1000, Avg: tc.avg, TPS: 500}, r, "rtt %d", tc.rtt)
	}
	// With --cpu_util the row carries the window's figures.
	w.cpu = &cpuWindow{on: true, started: true, ended: true,
		start: cpuStat{busy: 100, total: 400, self: time.Second}, end: cpuStat{busy: 150, total: 600, self: 3 * time.Second}}
	r, err := w.result(8, 2)
	require.NoError(t, err)
	require.NotNil(t, r.CPUUtil)
	require.InDelta(t, 25.0, *r.CPUUtil, 1e-9)
	require.InDelta(t, 2.0, *r.CPUSeconds, 1e-9)
	w.cpu = &cpuWindow{on: true, started: true, err: errors.New("no /proc/stat")}
	_, err = w.result(8, 2)
	require.ErrorContains(t, err, "--cpu_util: no /proc/stat")
}

// TestBWDurationCountsCQMod: in duration mode perftest's run_iter_bw
// counts cq_mod iterations for each completion in the sample window, so
// the row's iterations are a multiple of -Q and, with no margin (-f 0),
// about the messages the run sent: at most the packets of one-packet
// messages the device sent, and more than half of them (the window ends
// with at most a TX depth of messages outstanding, of many thousands).
func TestBWDurationCountsCQMod(t *testing.T) {
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-D", "1", "-f", "0", "-s", "64", "-Q", "8", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var doc struct {
		Results []report.BW `json:"results"`
		Device  report.Device
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Results, 1)
	iters := doc.Results[0].Iters
	require.Zero(t, iters%8, "iterations %d", iters)
	require.LessOrEqual(t, iters, doc.Device.SentPkts)
	require.Greater(t, iters, doc.Device.SentPkts/2, "iterations %d of %d packets sent", iters, doc.Device.SentPkts)
	// The figures are over the sample window, exactly -D minus twice -f
	// (1 s), not up to the end of the drain that follows it.
	require.InDelta(t, float64(iters)/1e6, doc.Results[0].MsgRate, 1e-12)
	require.InDelta(t, float64(iters)*64/0x100000, doc.Results[0].Avg, 1e-9)
}

// TestSendBWServerDurationCount: send-bw's server in duration mode counts
// each receive of its sample window once (run_iter_bw_server), so with
// no margin its iterations are about the packets of one-packet messages
// its device received: at most them, more than half of them; its figures
// are over its window, at most 1 s long.
func TestSendBWServerDurationCount(t *testing.T) {
	_, sout := tcpEnds(t, "send-bw", "--udp-port", "0", "-D", "1", "-f", "0", "-s", "64", "--json")
	var doc struct {
		Results []report.BW `json:"results"`
		Device  report.Device
	}
	require.NoError(t, json.Unmarshal([]byte(sout), &doc), sout)
	require.Len(t, doc.Results, 1)
	iters := doc.Results[0].Iters
	require.LessOrEqual(t, iters, doc.Device.RcvdPkts)
	require.Greater(t, iters, doc.Device.RcvdPkts/2, "iterations %d of %d packets received", iters, doc.Device.RcvdPkts)
	// Its window ends early when the client has stopped sending: at
	// most 1 s.
	require.GreaterOrEqual(t, doc.Results[0].MsgRate, float64(iters)/1e6*(1-1e-12))
}
