package perftest

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// --cpu_util: how busy the host's processors were during a -D run's
// sample window, as perftest's column CPU_Util[%], and how much processor
// time this process took in it.

// checkCPUUtil checks --cpu_util, which reads /proc/stat. perftest
// measures it over a duration run's sample window only: without -D its
// force_dependecies warns ("CPU Utilization works only with Duration
// mode") and runs without the column, and so does this (cpuUtilNote).
func (o *options) checkCPUUtil(t Test) error {
	if !o.cpuUtil {
		return nil
	}
	if o.duration == 0 {
		o.cpuUtil, o.cpuUtilWarn = false, true
		return nil
	}
	if _, err := readCPUStat(); err != nil {
		return fmt.Errorf("--cpu_util: %w", err)
	}
	return nil
}

// cpuUtilNote is the warning perftest's force_dependecies writes to
// standard error when --cpu_util comes without -D (after a RESULT_LINE
// on standard output: parseNotes); "" otherwise.
func (o *options) cpuUtilNote() string {
	if !o.cpuUtilWarn {
		return ""
	}
	return " CPU Utilization works only with Duration mode.\n"
}

// measuresCPU reports whether this end's rows carry --cpu_util's
// figures: those of an end that runs the sample window and prints its
// row. Of the bandwidth tests a client, an end of -b and send-bw's
// server; a WRITE or READ server prints the client's row, measured
// there. Of the latency tests both ends of send-lat and write-lat, each
// printing its own print_report_lat_duration row, and read-lat's and
// atomic-lat's client; their server prints no row.
func (s *session) measuresCPU() bool {
	if !s.o.cpuUtil {
		return false
	}
	if s.t.lat {
		return s.client || s.t.verb == verbSend || s.t.verb == verbWrite
	}
	return s.client || s.o.bidir || s.t.verb == verbSend
}

// cpuStat is one reading of the host's processor time (the first line of
// /proc/stat, in clock ticks) and of this process's (getrusage).
type cpuStat struct {
	busy, total uint64        // ticks running (user, nice, system, irq, softirq) and in all
	self        time.Duration // this process's user and system time
}

// readCPUStat reads the process's processor time (processCPUTime, of
// the platform's file) and the host's (/proc/stat, Linux's).
func readCPUStat() (cpuStat, error) {
	self, err := processCPUTime()
	if err != nil {
		return cpuStat{}, err
	}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuStat{}, fmt.Errorf("the host's processor time comes from Linux's /proc/stat: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return cpuStat{}, fmt.Errorf("/proc/stat: %w", err)
	}
	s, err := parseCPUStat(line)
	if err != nil {
		return cpuStat{}, err
	}
	s.self = self
	return s, nil
}

// parseCPUStat parses the host's figures (busy, total) from the "cpu"
// line of /proc/stat: user, nice, system, idle, iowait, irq, softirq and
// steal ticks (proc(5)); guest time is already counted in user and nice.
// Busy is user, nice, system, irq and softirq; the total adds idle,
// iowait and steal, so that a hypervisor's stolen time counts as not this
// host's work.
func parseCPUStat(line string) (cpuStat, error) {
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuStat{}, fmt.Errorf("/proc/stat: the first line is %q, not the \"cpu\" line", strings.TrimSpace(line))
	}
	var v [8]uint64 // missing trailing fields (older kernels) count 0
	for i := range v {
		if 1+i >= len(fields) {
			break
		}
		n, err := strconv.ParseUint(fields[1+i], 10, 64)
		if err != nil {
			return cpuStat{}, fmt.Errorf("/proc/stat: field %d of the cpu line: %w", 1+i, err)
		}
		v[i] = n
	}
	s := cpuStat{busy: v[0] + v[1] + v[2] + v[5] + v[6]}
	s.total = s.busy + v[3] + v[4] + v[7]
	return s, nil
}

// cpuWindow takes the processor readings at the start and the end of a
// sample window (perftest's get_cpu_stats at SAMPLE_STATE and at its
// end); with --cpu_util off it does nothing.
type cpuWindow struct {
	on         bool
	start, end cpuStat
	started    bool
	ended      bool
	err        error // a reading that failed
}

// newCPUWindow returns the window of a run (off without --cpu_util).
func (o *options) newCPUWindow() *cpuWindow { return &cpuWindow{on: o.cpuUtil} }

// begin takes the start reading.
func (w *cpuWindow) begin() {
	if !w.on || w.started {
		return
	}
	w.started = true
	w.start, w.err = readCPUStat()
}

// finish takes the end reading once.
func (w *cpuWindow) finish() {
	if !w.on || !w.started || w.ended || w.err != nil {
		return
	}
	w.ended = true
	w.end, w.err = readCPUStat()
}

// restart makes the end reading the start of the next window
// (--run_infinitely's periods).
func (w *cpuWindow) restart() {
	if !w.on {
		return
	}
	w.start, w.ended = w.end, false
}

// set puts the window's figures into a row's CPU fields (report.BW's
// and, for print_report_lat_duration's column, report.Lat's CPUUtil and
// CPUSeconds): nothing when off, not finished or a reading failed (the
// run then says so, fail).
func (w *cpuWindow) set(util, self **float64) error {
	u, sec, err := w.figures()
	if u != nil {
		*util, *self = u, sec
	}
	return err
}

// figures are the window's share of the host's processor time spent
// running, in percent (0 to 100), and this process's processor seconds
// in it: nil when off or when the window never began or ended, an error
// when a reading failed.
func (w *cpuWindow) figures() (util, self *float64, err error) {
	if !w.on {
		return nil, nil, nil
	}
	if w.err != nil {
		return nil, nil, fmt.Errorf("--cpu_util: %w", w.err)
	}
	if !w.started || !w.ended {
		return nil, nil, nil // the window never began (an interrupted warm-up)
	}
	// Differences as signed numbers: the kernel's iowait count may go
	// back (proc(5)).
	u := 0.0
	if d := int64(w.end.total - w.start.total); d > 0 {
		u = min(max(float64(int64(w.end.busy-w.start.busy))/float64(d)*100, 0), 100)
	}
	sec := (w.end.self - w.start.self).Seconds()
	return &u, &sec, nil
}
