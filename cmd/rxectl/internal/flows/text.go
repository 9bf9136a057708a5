package flows

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: one block per connection.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	if len(r.Connections) == 0 {
		fmt.Fprintln(b, "no RoCEv2 flows")
	}
	for i, c := range r.Connections {
		if i > 0 {
			fmt.Fprintln(b)
		}
		c.writeText(b, i+1, time.Duration(r.Interval))
	}
	if r.BadICRCNoFlow > 0 {
		if len(r.Connections) > 0 {
			fmt.Fprintln(b)
		}
		fmt.Fprintf(b, "bad_icrc %d naming no flow of the capture (dropped by the receiver; their addresses or QP may be what was corrupted), %s\n",
			r.BadICRCNoFlow, frameList(r.BadICRCNoFlowFrames))
	}
	return b.Flush()
}

// maxListedFrames bounds the frames WriteText lists in one line.
const maxListedFrames = 10

// frameList writes "frame 7", "frames 7, 9, 12", or, past maxListedFrames,
// the first of them and "and N more".
func frameList(frames []int) string {
	var b strings.Builder
	if len(frames) == 1 {
		b.WriteString("frame ")
	} else {
		b.WriteString("frames ")
	}
	for i, f := range frames[:min(len(frames), maxListedFrames)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(f))
	}
	if n := len(frames) - maxListedFrames; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	return b.String()
}

// Title names the connection: "A QP x ⇄ B QP y", or for one flow its
// name (Flow.Name).
func (c *Connection) Title() string {
	f := c.Flows[0]
	if len(c.Flows) == 1 {
		return f.Name()
	}
	g := c.Flows[1]
	return fmt.Sprintf("%v QP %#06x ⇄ %v QP %#06x", f.Src, g.DestQP, f.Dst, f.DestQP)
}

// Name names the flow: "A → B QP y", or for UD "A QP x → B QP y" with its
// source QP x.
func (f *Flow) Name() string {
	if f.UD {
		return fmt.Sprintf("%v QP %#06x → %v QP %#06x", f.Src, f.SrcQP, f.Dst, f.DestQP)
	}
	return fmt.Sprintf("%v → %v QP %#06x", f.Src, f.Dst, f.DestQP)
}

func (c *Connection) writeText(b *bufio.Writer, n int, iv time.Duration) {
	fmt.Fprintf(b, "connection %d: %s", n, c.Title())
	if c.PMTU > 0 {
		fmt.Fprintf(b, " (PMTU %d)", c.PMTU)
	}
	fmt.Fprintln(b)
	for _, f := range c.Flows {
		fmt.Fprintf(b, "  %s: %s, %d bytes, frames %d-%d\n", f.Name(), count(f.Packets, "packet"), f.Bytes, f.FirstFrame, f.LastFrame)
		for _, o := range f.ByOpcode {
			fmt.Fprintf(b, "    %-34s %8d %-7s %12d bytes\n", o.Opcode, o.Packets, noun(o.Packets, "packet"), o.Bytes)
		}
		fmt.Fprintf(b, "    messages %d, psn_gaps %d (%s missing), psn_rewinds %d", f.Messages, f.PSNGaps, count(f.PSNMissing, "PSN"), f.PSNRewinds)
		if f.FirstGapFrame > 0 {
			fmt.Fprintf(b, ", first gap at frame %d", f.FirstGapFrame)
		}
		if f.PSNLate > 0 {
			fmt.Fprintf(b, ", psn_late %d", f.PSNLate)
		}
		fmt.Fprintln(b)
		if f.BadICRC > 0 {
			fmt.Fprintf(b, "    bad_icrc %d", f.BadICRC)
			if f.PSNCorrupt > 0 {
				fmt.Fprintf(b, ", psn_corrupt %d", f.PSNCorrupt)
			}
			fmt.Fprintf(b, " (dropped by the receiver), %s\n", frameList(f.BadICRCFrames))
		}
		if n := f.NAKs; n.Total() > 0 {
			fmt.Fprintf(b, "    NAKs: sequence error %d, RNR %d", n.SequenceError, n.RNR)
			if len(n.RNRTimers) > 0 {
				fmt.Fprintf(b, " (timer codes %v)", n.RNRTimers)
			}
			fmt.Fprintf(b, ", remote access %d, invalid request %d, remote operational %d", n.RemoteAccess, n.InvalidRequest, n.RemoteOperation)
			if n.HoleReports > 0 {
				fmt.Fprintf(b, ", selective-repeat hole reports %d", n.HoleReports)
			}
			if n.ProgressReports > 0 {
				fmt.Fprintf(b, ", selective-repeat progress reports %d", n.ProgressReports)
			}
			if n.Other > 0 {
				fmt.Fprintf(b, ", other %d", n.Other)
			}
			fmt.Fprintln(b)
		}
	}
	if len(c.Recoveries) > 0 {
		fmt.Fprintf(b, "  recoveries: %d\n", len(c.Recoveries))
		for i, ep := range c.Recoveries {
			fmt.Fprintf(b, "    %d. %s: frames %d-%d (%s), rewind at frame %d to PSN %d (highest sent %d), %s, %s resent",
				i+1, ep.Cause, ep.FirstFrame, ep.LastFrame, Human(time.Duration(ep.Duration)), ep.RewindFrame, ep.PSN, ep.HighPSN,
				count(ep.Rounds, "round"), count(ep.Resent, "packet"))
			if ep.Silence > 0 {
				fmt.Fprintf(b, ", after %s of silence", Human(time.Duration(ep.Silence)))
			}
			if ep.Cause == CauseRNR {
				fmt.Fprintf(b, ", RNR timer code %d", ep.RNRTimer)
			}
			if ep.Probe && ep.Cause != CauseProbe {
				fmt.Fprint(b, ", a probe (then on at the highest PSN)")
			}
			if ep.AckedFrame > 0 {
				fmt.Fprintf(b, ", though acknowledged at frame %d", ep.AckedFrame)
			}
			fmt.Fprintln(b)
		}
	}
	if c.RTT.Samples > 0 {
		fmt.Fprintf(b, "  RTT: %s, min %s, median %s, max %s\n", count(c.RTT.Samples, "sample"),
			Human(time.Duration(c.RTT.Min)), Human(time.Duration(c.RTT.Median)), Human(time.Duration(c.RTT.Max)))
	}
	if len(c.Goodput) > 0 {
		peak := 0.0
		for _, g := range c.Goodput {
			peak = max(peak, g.Gbps)
		}
		unit, scale := "Gbit/s", 1.0
		if peak < 1 {
			unit, scale = "Mbit/s", 1e3
		}
		fmt.Fprintf(b, "  goodput in %s per %s:", unit, Human(iv))
		for i, g := range c.Goodput {
			if i%10 == 0 {
				fmt.Fprint(b, "\n   ")
			}
			fmt.Fprintf(b, " %6s", rate(g.Gbps*scale))
		}
		fmt.Fprintln(b)
	}
	for _, s := range c.Explain {
		fmt.Fprintf(b, "  explain: %s\n", s)
	}
}

// rate writes v with 3 significant digits at most. The decimals are
// chosen by the value as rounded: 9.996 rounds to 10.0, not 10.00.
func rate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 9.995:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 99.95:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
