package perftest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe"
)

// TestRatePPS: --rate_limit in each of perftest's units, as messages per
// second for a message size, as run_iter_bw converts it.
func TestRatePPS(t *testing.T) {
	for _, tc := range []struct {
		args []string
		size int
		want float64
	}{
		{[]string{"--rate_limit", "8"}, 1000, 1e6},                           // 8 Gb/s of 1000-byte messages
		{[]string{"--rate_limit", "8", "--rate_units", "g"}, 4000, 250e3},    // the default unit, given
		{[]string{"--rate_limit", "64", "--rate_units", "M"}, 65536, 1024},   // MiB/s
		{[]string{"--rate_limit", "1500", "--rate_units", "p"}, 65536, 1500}, // messages per second
		{nil, 65536, 0}, // no limit
	} {
		o, err := parsePerftest(findTest(t, "write-bw"), tc.args)
		require.NoError(t, err, "%v", tc.args)
		require.InDelta(t, tc.want, o.ratePPS(tc.size), tc.want*1e-12, "%v", tc.args)
	}
}

// TestPacer: a burst posts --burst_size messages, the next starts a gap
// after the one before started, also when that one started late: a pacer
// that fell behind does not send its bursts back to back to catch up
// (perftest's run_iter_bw sets gap_deadline one gap after the burst).
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, err := parsePerftest(findTest(t, "write-bw"), []string{"--rate_limit", "1000", "--rate_units", "p", "--burst_size", "10", "-l", "2", "-n", "1000"})
		require.NoError(t, err)
		p := o.newPacer(4096, time.Now())
		require.Equal(t, 10*time.Millisecond, p.gap) // 10 messages at 1000 a second
		// burst posts the lists of one burst, if one is due.
		burst := func() int {
			if !p.ready() {
				return 0
			}
			for n := 2; ; n += 2 {
				p.posted(2) // -l 2: lists count whole
				if p.left == 0 {
					return n
				}
			}
		}
		require.Equal(t, 10, burst(), "the first burst is due at once")
		require.True(t, p.spent())
		time.Sleep(9 * time.Millisecond)
		require.Zero(t, burst(), "the next burst is not due yet")
		time.Sleep(time.Millisecond)
		require.Equal(t, 10, burst())
		time.Sleep(35 * time.Millisecond) // at 45 ms, 2.5 gaps late: one burst goes
		require.Equal(t, 10, burst())
		require.Zero(t, burst(), "the bursts missed are not sent back to back")
		require.True(t, p.spent())
		time.Sleep(9 * time.Millisecond)
		require.Zero(t, burst(), "the next burst is due a gap after the late one started")
		time.Sleep(time.Millisecond)
		require.Equal(t, 10, burst())
		// A post list longer than what is left of a burst still goes whole.
		time.Sleep(10 * time.Millisecond)
		require.True(t, p.ready())
		p.posted(9)
		require.True(t, p.ready())
		p.posted(2)
		require.Equal(t, 0, p.left)
	})
	var none *pacer
	require.True(t, none.ready())
	require.False(t, none.spent())
	none.posted(5)
}

// TestRateFlagErrors: the rate limiter's, the verifier's and the other
// new flags' bad values and combinations fail with the reason.
func TestRateFlagErrors(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"write-bw", "--rate_limit", "0"}, "--rate_limit 0: a positive number"},
		{[]string{"write-bw", "--rate_limit", "-3"}, "--rate_limit -3: a positive number"},
		{[]string{"write-bw", "--rate_limit", "NaN"}, "--rate_limit NaN: a positive number"},
		{[]string{"write-bw", "--rate_limit", "1", "--rate_units", "K"}, `"K": M (MiB/s), g (Gb/s) or p`},
		{[]string{"write-bw", "--rate_limit", "1", "--rate_limit_type", "HW"}, "gorxe has no hardware rate limiter"},
		{[]string{"write-bw", "--rate_limit", "1", "--rate_limit_type", "PP"}, "packet pacing is a NIC feature"},
		{[]string{"write-bw", "--rate_limit_type", "SW"}, "give --rate_limit too"},
		{[]string{"write-bw", "--rate_units", "M"}, "give --rate_limit too"},
		{[]string{"write-bw", "--burst_size", "4"}, "--burst_size needs --rate_limit"},
		{[]string{"write-bw", "--burst_size", "-2"}, "--burst_size -2: a number of messages"},
		{[]string{"write-bw", "--rate_limit", "1", "--burst_size", "-1"}, "--burst_size -1: a number of messages"},
		{[]string{"send-bw", "-w", "-1"}, "-w -1: a bandwidth limit is not negative"},
		{[]string{"send-bw", "--limit_msgrate", "-0.5"}, "-y -0.5: a message rate limit is not negative"},
		{[]string{"write-lat", "-w", "4"}, "-w is for the bandwidth tests"},
		{[]string{"read-lat", "--rate_limit", "4"}, "-rate_limit is for the bandwidth tests"},
		{[]string{"read-bw", "--latency_gap", "4"}, "-latency_gap is for the latency tests"},
		{[]string{"send-lat", "--latency_gap", "-4"}, "--latency_gap -4: microseconds"},
		{[]string{"send-lat", "--latency_gap", "1000001"}, "--latency_gap 1000001: microseconds, 0 to 1000000"},
		{[]string{"send-lat", "-c", "UD", "--latency_gap", "600000"}, "-c UD's peer ends the run when a message is 1s late"},
		{[]string{"write-bw", "--rate_limit", "1", "--rate_units", "p"}, "a burst every 128 s, and the peer gives up after 1m0s"},
		{[]string{"write-bw", "--rate_limit", "1", "--rate_units", "p", "-D", "2"}, "a burst every 128 s"},
		{[]string{"write-bw", "--rate_limit", "1e-9", "--rate_units", "p", "--burst_size", "1"}, "a burst every 1e+09 s"},
		{[]string{"write-bw", "-a", "--rate_limit", "0.001", "--burst_size", "1", "-n", "10"}, "4194304-byte messages: a burst every 33.6 s"},
		{[]string{"read-bw", "--retry_count", "8"}, "--retry_count 8 not in [0, 7]"},
	})
}

// TestCheckLimits: -w and -y pass when a row reaches them (one is enough,
// as perftest's pass over the rows), fail otherwise, and an end without
// rows has nothing to verify.
func TestCheckLimits(t *testing.T) {
	rows := []report.BW{{Size: 2, Avg: 10, MsgRate: 5}, {Size: 65536, Avg: 3000, MsgRate: 0.05}}
	for _, tc := range []struct {
		args []string
		rows []report.BW
		want string // "" passes
	}{
		{nil, rows, ""},
		{[]string{"-w", "2999.5"}, rows, ""},
		{[]string{"-w", "3000"}, rows, ""},
		{[]string{"-w", "3000.01"}, rows, "the bandwidth 3000.00 MiB/s is below the limit -w 3000.01"},
		{[]string{"-w", "3000.01", "--report_gbits"}, rows, "the bandwidth 3000.00 Gb/s is below the limit -w 3000.01"},
		{[]string{"-y", "5"}, rows, ""},
		{[]string{"-y", "5.5"}, rows, "the message rate 5.000000 Mpps is below the limit -y 5.5"},
		{[]string{"-w", "1", "-y", "6"}, rows, "below the limit -y 6"},
		{[]string{"-w", "1e9", "-y", "6"}, rows, "below the limit -w 1e+09"},
		{[]string{"-w", "1e9"}, nil, ""}, // no rows: nothing to verify
	} {
		o, err := parsePerftest(findTest(t, "send-bw"), tc.args)
		require.NoError(t, err, "%v", tc.args)
		s := &session{o: o, bwResults: tc.rows}
		err = s.checkLimits()
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
		} else {
			require.ErrorContains(t, err, tc.want, "%v", tc.args)
		}
		if m := s.limitsJSON(); m != nil {
			require.Equal(t, err == nil, m["passed"], "%v", tc.args)
		}
	}
}

// TestLimitsRun: a run that falls short of -w fails with exit status 1
// after printing its table and JSON; one that reaches it passes.
func TestLimitsRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-s", "4096", "-n", "200", "-w", "1e9", "--json")
	require.Equal(t, cli.ExitFail, code, errs)
	require.Contains(t, errs, "is below the limit -w 1e+09")
	var doc struct {
		Limits struct {
			BW     float64 `json:"bw"`
			Passed bool    `json:"passed"`
		} `json:"limits"`
		Results []report.BW `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, 1e9, doc.Limits.BW)
	require.False(t, doc.Limits.Passed)
	require.Len(t, doc.Results, 1)

	_, errs, code = runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-s", "4096", "-n", "200", "-w", "0.001", "-y", "1e-9")
	require.Equal(t, cli.ExitOK, code, errs)
}

// TestRateLimitRun: a paced run carries at most the limit plus the one
// burst that starts at once: its last burst cannot start before
// (bursts−1) gaps have passed, whatever the machine's speed.
func TestRateLimitRun(t *testing.T) {
	t.Parallel()
	const (
		n, burst = 600, 10
		mibps    = 20.0
		size     = 4096
	)
	for _, test := range []string{"write-bw", "send-bw", "read-bw"} {
		out, errs, code := runCmd(t, test, "--loopback", "--udp-port", "0", "-s", strconv.Itoa(size), "-n", strconv.Itoa(n),
			"--rate_limit", "20", "--rate_units", "M", "--burst_size", strconv.Itoa(burst), "--json")
		require.Equal(t, cli.ExitOK, code, "%s: %s", test, errs)
		require.NotContains(t, errs, "Setting burst size", "--burst_size was given")
		var doc struct {
			Rate struct {
				Rate  float64 `json:"rate"`
				Units string  `json:"units"`
				Burst int     `json:"burst"`
			} `json:"rate_limit"`
			Results []report.BW `json:"results"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		require.Equal(t, 20.0, doc.Rate.Rate)
		require.Equal(t, "M", doc.Rate.Units)
		require.Equal(t, burst, doc.Rate.Burst)
		require.Len(t, doc.Results, 1)
		r := doc.Results[0]
		require.Equal(t, uint64(n), r.Iters, test)
		require.Positive(t, r.Avg, test)
		require.LessOrEqual(t, r.Avg, mibps*n/(n-burst)*1.0001, "%s: %.2f MiB/s against a limit of %.0f", test, r.Avg, mibps)
	}
	// -D: the sample window (here the whole second, -f 0) holds at most
	// the bursts started in it, one at its start and one a gap after
	// that (here 1.95 ms: 10 messages of 4 KiB at 20 MiB/s).
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-s", strconv.Itoa(size), "-D", "1", "-f", "0",
		"--rate_limit", "20", "--rate_units", "M", "--burst_size", strconv.Itoa(burst), "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	r := oneBWRow(t, out)
	require.Positive(t, r.Avg)
	require.LessOrEqual(t, r.Avg, mibps*1.001+float64(burst*size)/(1<<20), "-D: %.2f MiB/s against a limit of %.0f", r.Avg, mibps)

	// Without --burst_size, perftest's note; the header shows the limit.
	out, errs, code = runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-s", "65536", "-n", "40", "--rate_limit", "2")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, errs, " Setting burst size to tx depth = 40\n")
	require.Contains(t, out, " Rate limit      : 2 Gb/s in bursts of 40 (SW)\n")
}

// TestLatencyGap: --latency_gap waits before each post. The samples time
// one post to the next, as perftest's: send-lat's are half of a round
// trip that holds both ends' gaps, read-lat's a round trip and one gap;
// so none is shorter than the gap.
func TestLatencyGap(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "send-lat", "--loopback", "--udp-port", "0", "-s", "2", "-n", "200", "--latency_gap", "300", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var doc struct {
		Gap     int          `json:"latency_gap_usec"`
		Results []report.Lat `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, 300, doc.Gap)
	require.Len(t, doc.Results, 1)
	require.GreaterOrEqual(t, doc.Results[0].Min, 300.0)
	out, errs, code = runCmd(t, "read-lat", "--loopback", "--udp-port", "0", "-n", "50", "--latency_gap", "300", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.GreaterOrEqual(t, doc.Results[0].Min, 300.0)
}

// TestRetryCountFlag: --retry_count is the QPs' retry_cnt. With the
// exchange, a QP whose every packet is dropped fails after retry_cnt+1 IB
// ACK timeouts; with -R the CM REQs carry it (IBA 12.7.27, which the
// passive side's QP takes), the exchange's connection's too, as perftest's
// conn_param.retry_count.
func TestRetryCountFlag(t *testing.T) {
	t.Parallel()
	for _, retries := range []int{2, defRetryCount} {
		out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "20", "-u", "8",
			"--retry_count", strconv.Itoa(retries), "--drop", "1,dir=send")
		require.Equal(t, cli.ExitFail, code, errs)
		require.Contains(t, errs, "RETRY_EXC_ERR")
		require.Contains(t, errs, fmt.Sprintf(" %d IB ACK timeouts;", retries+1))
		require.Equal(t, retries != defRetryCount, strings.Contains(out, fmt.Sprintf(" Retry count     : %d\n", retries)), out)
	}

	// With -R the REQs carry --retry_count as given, 0 included (no
	// retry), as perftest's conn_param does, and the local ACK timeout
	// kernel ib_cm announces for perftest's rdma_set_option of -u: 16 for
	// 14, 17 for 0 (no timeout).
	for _, tc := range []struct{ retries, timeout, reqTimeout int }{{3, defQPTimeout, 16}, {0, 0, 17}} {
		file := filepath.Join(t.TempDir(), "cm.pcap")
		out, errs, code := runCmd(t, "write-bw", "-R", "--loopback", "--udp-port", "0", "-n", "20",
			"--retry_count", strconv.Itoa(tc.retries), "-u", strconv.Itoa(tc.timeout), "--pcap", file)
		require.Equal(t, cli.ExitOK, code, errs)
		require.Contains(t, out, fmt.Sprintf(" Retry count     : %d\n", tc.retries))
		reqs := 0
		for _, m := range capturedCMMADs(t, file) {
			if m.attr != packet.AttrREQ {
				continue
			}
			var req packet.REQ
			require.NoError(t, req.Decode(m.msg))
			require.Equal(t, uint8(tc.retries), req.RetryCount)
			require.Equal(t, uint8(tc.reqTimeout), req.Primary.LocalACKTimeout)
			reqs++
		}
		require.Equal(t, 2, reqs, "the exchange's connection and the test QP's")
	}
}

// TestParseCPUStat: the "cpu" line of /proc/stat, with the fields of old
// and new kernels, and what is not one.
func TestParseCPUStat(t *testing.T) {
	for _, tc := range []struct {
		line        string
		busy, total uint64
		err         string
	}{
		{"cpu  100 5 50 800 20 3 2 10 0 0\n", 160, 990, ""},
		{"cpu 1 2 3 4\n", 6, 10, ""}, // user nice system idle only
		{"cpu0 1 2 3 4\n", 0, 0, "not the \"cpu\" line"},
		{"intr 5\n", 0, 0, "not the \"cpu\" line"},
		{"cpu 1 2 x 4\n", 0, 0, "field 3 of the cpu line"},
		{"", 0, 0, "not the \"cpu\" line"},
	} {
		s, err := parseCPUStat(tc.line)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%q", tc.line)
			continue
		}
		require.NoError(t, err, "%q", tc.line)
		require.Equal(t, tc.busy, s.busy, "%q", tc.line)
		require.Equal(t, tc.total, s.total, "%q", tc.line)
	}
}

// TestCPUWindowSet: the column is the busy share of the window's ticks,
// clamped to [0, 100] when a count went back; a window that never
// began or ended sets nothing.
func TestCPUWindowSet(t *testing.T) {
	for _, tc := range []struct {
		start, end cpuStat
		want       float64
	}{
		{cpuStat{busy: 100, total: 1000}, cpuStat{busy: 150, total: 1200}, 25},
		{cpuStat{busy: 100, total: 1000, self: time.Second}, cpuStat{busy: 100, total: 1000, self: 2 * time.Second}, 0},
		{cpuStat{busy: 100, total: 1000}, cpuStat{busy: 90, total: 1100}, 0},    // busy went back
		{cpuStat{busy: 100, total: 1000}, cpuStat{busy: 400, total: 1100}, 100}, // total behind busy
	} {
		w := &cpuWindow{on: true, started: true, ended: true, start: tc.start, end: tc.end}
		var r report.BW
		require.NoError(t, w.set(&r.CPUUtil, &r.CPUSeconds))
		require.NotNil(t, r.CPUUtil)
		require.InDelta(t, tc.want, *r.CPUUtil, 1e-9)
		require.InDelta(t, (tc.end.self - tc.start.self).Seconds(), *r.CPUSeconds, 1e-9)
	}
	var r report.BW
	require.NoError(t, (&cpuWindow{on: true, started: true}).set(&r.CPUUtil, &r.CPUSeconds))
	require.Nil(t, r.CPUUtil)
	require.NoError(t, (&cpuWindow{}).set(&r.CPUUtil, &r.CPUSeconds))
	require.Nil(t, r.CPUUtil)
}

// TestCPUUtilRun: -D with --cpu_util adds the column to the header and
// the row, and --json the figures.
func TestCPUUtilRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-s", "65536", "-D", "1", "-f", "0", "--cpu_util")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, report.BWHeaderMiB+report.CPUUtilHeader+"\n")
	require.Regexp(t, regexp.MustCompile(`(?m)^ 65536 .*\t    \d+\.\d\d\n`), out)

	// A WRITE server prints the client's row, measured there: no column.
	port, wait := startServer(t, "write-bw", "-D", "1", "-f", "0", "--cpu_util", "--udp-port", "0", "--bind", "127.0.0.1")
	cout, errs, code := runCmd(t, "write-bw", "127.0.0.1", "-p", strconv.Itoa(port), "-D", "1", "-f", "0", "--cpu_util", "--udp-port", "0", "--bind", "127.0.0.2")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, cout, report.CPUUtilHeader)
	sout, err := wait()
	require.NoError(t, err)
	require.Contains(t, sout, report.BWHeaderMiB+"\n")
	require.NotContains(t, sout, report.CPUUtilHeader)

	out, errs, code = runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-s", "65536", "-D", "1", "-f", "0", "--cpu_util", "--json", "-b")
	require.Equal(t, cli.ExitOK, code, errs)
	r := oneBWRow(t, out)
	require.NotNil(t, r.CPUUtil)
	require.NotNil(t, r.CPUSeconds)
	require.Greater(t, *r.CPUUtil, 0.0)
	require.LessOrEqual(t, *r.CPUUtil, 100.0)
	require.Greater(t, *r.CPUSeconds, 0.0)
}

// TestWaitSendCQPaced: once a burst is spent, with nothing signaled
// outstanding, the wait ends when the next burst is due, or at the
// window's edge if that comes first, and at once if the burst is due
// already (the clock passed it after the post loop looked): it never
// waits for a completion that nothing outstanding can give. With
// requests outstanding and the burst due already (a full send queue) it
// waits for their completion instead of spinning.
func TestWaitSendCQPaced(t *testing.T) {
	s := latTestSession(t, "write-bw", true, false)
	s.sset = cqSet{cqs: []*rxe.CQ{s.scq}}
	wcs := make([]rxe.WC, 4)
	wait := func(ctx context.Context, p *pacer, outstanding int, edge time.Time) int {
		t.Helper()
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := s.waitSendCQPaced(ctx, wcs, p, outstanding, edge)
			done <- result{n, err}
		}()
		select {
		case r := <-done:
			require.NoError(t, r.err)
			return r.n
		case <-time.After(10 * time.Second):
			t.Fatal("the paced wait did not end")
		}
		return 0
	}
	bg := context.Background()
	require.Zero(t, wait(bg, &pacer{due: time.Now().Add(-time.Second)}, 0, time.Time{}), "due already: at once")
	for _, outstanding := range []int{0, 1} {
		due := time.Now().Add(30 * time.Millisecond)
		require.Zero(t, wait(bg, &pacer{due: due}, outstanding, time.Time{}))
		require.False(t, time.Now().Before(due), "outstanding %d: not before the burst is due", outstanding)
		edge := time.Now().Add(20 * time.Millisecond)
		require.Zero(t, wait(bg, &pacer{due: time.Now().Add(time.Hour)}, outstanding, edge))
		require.False(t, time.Now().Before(edge), "outstanding %d: the window's edge first", outstanding)
	}
	// Due already with a request outstanding: its completion (here a
	// flushed SEND posted 50 ms later) ends the wait, not the clock.
	require.NoError(t, s.qps[0].Modify(&rxe.QPAttr{State: rxe.QPSInit, Port: 1}, rxe.QPAttrState|rxe.QPAttrPKeyIndex|rxe.QPAttrPort|rxe.QPAttrAccessFlags))
	require.NoError(t, s.qps[0].Modify(&rxe.QPAttr{State: rxe.QPSErr}, rxe.QPAttrState))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, err := s.qps[0].PostSend(rxe.SendWR{ID: 7, Opcode: rxe.WRSend, Flags: rxe.SendSignaled})
		if err != nil {
			panic(err)
		}
	}()
	require.Equal(t, 1, wait(bg, &pacer{due: time.Now().Add(-time.Second)}, 1, time.Time{}))
	require.Equal(t, rxe.WCWRFlushErr, wcs[0].Status)
	// An interrupt ends the sleep (nothing outstanding).
	ctx, cancel := context.WithCancel(bg)
	cancel()
	require.Zero(t, wait(ctx, &pacer{due: time.Now().Add(time.Hour)}, 0, time.Time{}))
}

// oneBWRow is the one row of a bandwidth run's --json document out.
func oneBWRow(t *testing.T, out string) report.BW {
	t.Helper()
	return oneRow[report.BW](t, out)
}

// oneLatRow is the one row of a latency run's --json document out.
func oneLatRow(t *testing.T, out string) report.Lat {
	t.Helper()
	return oneRow[report.Lat](t, out)
}

// oneRow decodes the results of a run's --json document out as rows of
// type R and requires exactly one.
func oneRow[R any](t *testing.T, out string) R {
	t.Helper()
	var doc struct {
		Results []R `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Results, 1)
	return doc.Results[0]
}

// TestCPUUtilLatRun: a latency test's -D run with --cpu_util adds the
// column to its header (RESULT_FMT_LAT_DUR, RESULT_EXT_CPU_UTIL) and row
// (print_report_lat_duration), a share of the processor time in [0, 100],
// and --json the figures.
func TestCPUUtilLatRun(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "write-lat", "--loopback", "--udp-port", "0", "-D", "1", "-f", "0", "--cpu_util")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, report.LatDurHeader+report.CPUUtilHeader+"\n")
	m := regexp.MustCompile(`(?m)^ 2       +[1-9]\d* +\d+\.\d\d +\d+\.\d\d *\t    (\d+\.\d\d)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, "%q", out)
	util, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, util, 0.0)
	require.LessOrEqual(t, util, 100.0)

	out, errs, code = runCmd(t, "send-lat", "--loopback", "--udp-port", "0", "-D", "1", "-f", "0", "--cpu_util", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	r := oneLatRow(t, out)
	require.NotNil(t, r.CPUUtil, out)
	require.NotNil(t, r.CPUSeconds, out)
	require.Greater(t, *r.CPUUtil, 0.0)
	require.LessOrEqual(t, *r.CPUUtil, 100.0)
	require.Greater(t, *r.CPUSeconds, 0.0)

	// Over TCP and two devices: write-lat's server prints its own row,
	// with the column; read-lat's prints none.
	for _, tc := range []struct {
		cmd       string
		serverRow bool
	}{{"write-lat", true}, {"read-lat", false}} {
		port, wait := startServer(t, tc.cmd, "-D", "1", "-f", "0", "--cpu_util", "--udp-port", "0", "--bind", "127.0.0.1")
		cout, errs, code := runCmd(t, tc.cmd, "127.0.0.1", "-p", strconv.Itoa(port), "-D", "1", "-f", "0", "--cpu_util", "--udp-port", "0", "--bind", "127.0.0.2")
		require.Equal(t, cli.ExitOK, code, "%s: %s", tc.cmd, errs)
		require.Contains(t, cout, report.LatDurHeader+report.CPUUtilHeader+"\n", tc.cmd)
		sout, err := wait()
		require.NoError(t, err, tc.cmd)
		require.Equal(t, tc.serverRow, strings.Contains(sout, report.LatDurHeader+report.CPUUtilHeader+"\n"), "%s server: %q", tc.cmd, sout)
		require.Equal(t, tc.serverRow, regexp.MustCompile(`(?m)\t    \d+\.\d\d\n`).MatchString(sout), "%s server: %q", tc.cmd, sout)
	}
}

// TestMeasuresCPU: the ends that print a row measure --cpu_util's
// figures: both ends of send-lat and write-lat, read-lat's and
// atomic-lat's client only (their server prints no row); of the
// bandwidth tests a client, send-bw's server, not a WRITE or READ
// server (it prints the client's row). Without --cpu_util none does.
func TestMeasuresCPU(t *testing.T) {
	for _, tc := range []struct {
		cmd            string
		client, server bool
	}{
		{"send-lat", true, true},
		{"write-lat", true, true},
		{"read-lat", true, false},
		{"atomic-lat", true, false},
		{"send-bw", true, true},
		{"write-bw", true, false},
		{"read-bw", true, false},
		{"atomic-bw", true, false},
	} {
		for _, client := range []bool{true, false} {
			want := tc.server
			if client {
				want = tc.client
			}
			s := &session{t: findTest(t, tc.cmd), o: &options{cpuUtil: true, duration: 2}, client: client}
			require.Equal(t, want, s.measuresCPU(), "%s client %v", tc.cmd, client)
			s.o.cpuUtil = false
			require.False(t, s.measuresCPU(), "%s client %v without --cpu_util", tc.cmd, client)
		}
	}
}

// TestNextEdge: a paced duration loop looks at the clock again at the
// sample window's start, then its end, then the run's end; with
// --run_infinitely at each period's end, never at a time already past.
func TestNextEdge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := bwWindow{start: t0.Add(time.Second), end: t0.Add(3 * time.Second)}
	end := t0.Add(4 * time.Second)
	require.Equal(t, w.start, w.nextEdge(t0, end, false))
	require.Equal(t, w.end, w.nextEdge(t0.Add(2*time.Second), end, false))
	require.Equal(t, end, w.nextEdge(t0.Add(3500*time.Millisecond), end, false))
	require.Equal(t, w.end, w.nextEdge(t0.Add(2*time.Second), end, true))
}

// TestRDMACMRNRRetry: with -R the test QPs' connections carry --retry_count
// as their RNR retry count too, in the client's REQ and the server's REP,
// as perftest's conn_param.rnr_retry_count (rdma_cm_route_handler,
// rdma_cm_connection_request_handler); the exchange's connection keeps 7,
// as perftest's rdma_client_connect and rdma_server_connect. The test QPs
// used to get 7 whatever --retry_count said.
func TestRDMACMRNRRetry(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "cm.pcap")
	out, errs, code := runCmd(t, "send-bw", "-R", "--loopback", "--udp-port", "0", "-n", "20",
		"--retry_count", "3", "--pcap", file)
	require.Equal(t, cli.ExitOK, code, errs)
	var reqs, reps []uint8
	for _, m := range capturedCMMADs(t, file) {
		switch m.attr {
		case packet.AttrREQ:
			var req packet.REQ
			require.NoError(t, req.Decode(m.msg))
			reqs = append(reqs, req.RNRRetryCount)
		case packet.AttrREP:
			var rep packet.REP
			require.NoError(t, rep.Decode(m.msg))
			reps = append(reps, rep.RNRRetryCount)
		}
	}
	require.Equal(t, []uint8{7, 3}, reqs, "the exchange's REQ, then the test QP's: %s", out)
	require.Equal(t, []uint8{7, 3}, reps, "the exchange's REP, then the test QP's")
}

// cmMAD is a CM MAD of a capture: its attribute and its message.
type cmMAD struct {
	attr packet.CMAttr
	msg  []byte
}

// capturedCMMADs returns the CM MADs of an IPv4 capture file, in order:
// the UD SEND ONLY packets (to QP1) whose payload is a MAD.
func capturedCMMADs(t *testing.T, file string) []cmMAD {
	t.Helper()
	var ms []cmMAD
	for _, frame := range pcapFrames(t, file) {
		// Ethernet, IPv4, UDP, BTH and DETH (a UD SEND ONLY to QP1), then the MAD.
		const mad = 14 + 20 + 8 + 12 + 8
		if len(frame) < mad+packet.MADSize || frame[14+20+8] != byte(packet.UDSendOnly) {
			continue
		}
		h, msg, err := packet.DecodeCMHeader(frame[mad:])
		require.NoError(t, err)
		ms = append(ms, cmMAD{attr: packet.CMAttr(h.AttrID), msg: msg})
	}
	return ms
}
