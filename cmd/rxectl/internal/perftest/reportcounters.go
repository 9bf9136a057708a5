package perftest

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gorxe/gorxe/rxe"
)

// perftest's -W (--report-counters): after each row, how much each named
// counter of the device's port moved since the last row (since the
// connection for the first), as perftest reads them from
// /sys/class/infiniband/DEV/ports/PORT/NAME. rxectl reads the same names
// from its device: hw_counters/NAME are kernel rxe's hw counters and
// gorxe's own under the names rxe.Counters.Named and
// rxe.QPCounters.Named give them, and counters/port_xmit_packets and
// counters/port_rcv_packets the packets sent and received.

// portCounters are the counters/ names rxectl has: the port's packets.
var portCounters = map[string]string{"port_xmit_packets": "sent_pkts", "port_rcv_packets": "rcvd_pkts"}

// reportCounter is one counter of -W: the name as given and how to read
// it.
type reportCounter struct {
	name   string // as given, e.g. hw_counters/rcvd_seq_err
	hw     string // the name in Named()
	device bool   // the device's counter (else the sum of the session's QPs')
	last   uint64 // its value at the last row
}

// hwCounterNames lists the names hw_counters/ takes: the device's, then
// the QPs' that the device lacks (summed over the session's QPs).
func hwCounterNames() (device, qp []string) {
	for _, n := range (rxe.Counters{}).Named() {
		device = append(device, n.Name)
	}
	for _, n := range (rxe.QPCounters{}).Named() {
		if !slices.Contains(device, n.Name) {
			qp = append(qp, n.Name)
		}
	}
	return device, qp
}

// parseReportCounters parses -W's comma-separated list.
func parseReportCounters(list string) ([]reportCounter, error) {
	device, qp := hwCounterNames()
	var cs []reportCounter
	for _, name := range strings.Split(list, ",") {
		dir, n, ok := strings.Cut(name, "/")
		switch {
		case !ok || n == "":
			return nil, fmt.Errorf("-W %q: a counter is counters/NAME or hw_counters/NAME, as under /sys/class/infiniband/DEV/ports/1", name)
		case dir == "counters" && portCounters[n] != "":
			cs = append(cs, reportCounter{name: name, hw: portCounters[n], device: true})
		case dir == "counters" && (n == "port_xmit_data" || n == "port_rcv_data"):
			return nil, fmt.Errorf("-W %s: gorxe counts the port's packets, not its data words; counters/port_xmit_packets and counters/port_rcv_packets are there", name)
		case dir == "counters":
			return nil, fmt.Errorf("-W %s: rxectl's port counters are counters/port_xmit_packets and counters/port_rcv_packets", name)
		case dir == "hw_counters" && slices.Contains(device, n):
			cs = append(cs, reportCounter{name: name, hw: n, device: true})
		case dir == "hw_counters" && slices.Contains(qp, n):
			cs = append(cs, reportCounter{name: name, hw: n})
		case dir == "hw_counters":
			return nil, fmt.Errorf("-W %s: no such counter; hw_counters/ has %s", name, strings.Join(append(device, qp...), ", "))
		default:
			return nil, fmt.Errorf("-W %s: a counter is counters/NAME or hw_counters/NAME", name)
		}
	}
	return cs, nil
}

// counterValues reads the values of cs from the session's device and
// QPs.
func (s *session) counterValues(cs []reportCounter) []uint64 {
	dev := map[string]uint64{}
	for _, n := range s.dev.Counters().Named() {
		dev[n.Name] = n.Value
	}
	qps := map[string]uint64{}
	for _, qp := range s.qps {
		for _, n := range qp.Counters().Named() {
			qps[n.Name] += n.Value
		}
	}
	v := make([]uint64, len(cs))
	for i, c := range cs {
		if c.device {
			v[i] = dev[c.hw]
		} else {
			v[i] = qps[c.hw]
		}
	}
	return v
}

// startCounters takes -W's first reading, once the test QPs exist
// (perftest's counters_open at the connection): made by the session, or
// with -R by the rdma_cm connections. A loopback run's two ends each keep
// their own.
func (s *session) startCounters() {
	s.counters = slices.Clone(s.o.counterList)
	for i, v := range s.counterValues(s.counters) {
		s.counters[i].last = v
	}
}

// gauges are the named counters that hold a value rather than a count:
// -W shows their value at the row, not how much they moved.
var gauges = map[string]bool{"srtt_us": true, "window_pkts": true, "ooo_buffered": true, "ooo_peak": true,
	"ooo_bytes_peak": true, "backoff_delay_ns": true}

// counterDeltas takes the next reading of -W and returns how much each
// counter moved since the last (perftest's counters_print), a gauge's
// value as it is; nil without -W.
func (s *session) counterDeltas() map[string]uint64 {
	if len(s.counters) == 0 {
		return nil
	}
	m := make(map[string]uint64, len(s.counters))
	for i, v := range s.counterValues(s.counters) {
		c := &s.counters[i]
		d := v
		if !gauges[c.hw] {
			d = v - min(v, c.last)
		}
		m[c.name] = d
		c.last = v
	}
	return m
}

// printCounters prints a row's -W lines as perftest's counters_print:
// a tab, NAME=DELTA and a newline each, then an empty line.
func (s *session) printCounters(w io.Writer, deltas map[string]uint64) {
	if deltas == nil {
		return
	}
	var b strings.Builder
	for _, c := range s.counters {
		fmt.Fprintf(&b, "\t%s=%d\n", c.name, deltas[c.name])
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}
