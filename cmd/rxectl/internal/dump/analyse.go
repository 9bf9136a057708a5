package dump

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/ladder"
	"github.com/gorxe/gorxe/packet"
)

// analysis holds the flags of dump --flows and --ladder.
type analysis struct {
	flows  bool
	ladder string // --ladder OUT
	sel    ladder.Selection
	window bool // --time T1-T2 was given
}

// analysisFlags adds --flows, --ladder, --qp and --frames to fs; --time
// T1-T2 goes through timeFlag.
func analysisFlags(fs *flag.FlagSet, a *analysis) {
	fs.BoolVar(&a.flows, "flows", false, "print the flow analysis instead of the packets: per flow (source, destination, destination QP, and for UD the source QP) packets and bytes by opcode, messages, PSN gaps and rewinds, NAKs, recovery episodes, RTT, goodput, and what went wrong (with --json: one JSON object)")
	fs.StringVar(&a.ladder, "ladder", "", "draw one connection as a ladder diagram into `FILE` (.svg, or .png)")
	fs.Func("qp", "--ladder: draw the connection of destination QP `N` (decimal or 0x hex; default: the busiest)", func(s string) error {
		n, err := strconv.ParseUint(s, 0, 24)
		if err != nil {
			return errors.New("want a QP number below 2^24")
		}
		a.sel.QP, a.sel.HasQP = uint32(n), true
		return nil
	})
	fs.Func("frames", "--ladder: draw frames `A-B` only (Wireshark's numbers)", func(s string) error {
		lo, hi, ok := strings.Cut(s, "-")
		x, err1 := strconv.Atoi(lo)
		y, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || x < 1 || y < x {
			return errors.New("want A-B with 1 <= A <= B")
		}
		a.sel.FromFrame, a.sel.ToFrame = x, y
		return nil
	})
}

// parseWindow reads --time T1-T2: seconds since the first frame ("0.05-0.1",
// "1e-05-2e-05") or durations ("50ms-100ms").
func parseWindow(s string, a *analysis) bool {
	lo, hi, ok := cli.CutRange(s)
	if !ok {
		return false
	}
	t1, ok1 := parseSeconds(lo)
	t2, ok2 := parseSeconds(hi)
	if !ok1 || !ok2 || t2 <= t1 {
		return false
	}
	a.sel.FromTime, a.sel.ToTime, a.window = t1, t2, true
	return true
}

func parseSeconds(s string) (time.Duration, bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		return time.Duration(f * float64(time.Second)), true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}

// check reports flags that do not go together.
func (a *analysis) check(o *options) error {
	switch {
	case a.ladder == "" && (a.sel.HasQP || a.sel.ToFrame > 0 || a.window):
		return errors.New("--qp, --frames and --time T1-T2 choose what --ladder draws: give --ladder")
	case a.sel.ToFrame > 0 && a.window:
		return errors.New("--frames and --time T1-T2 cannot be combined")
	case a.flows && o.verbose:
		return errors.New("-v and --flows cannot be combined")
	case !a.flows && a.ladder != "" && o.json:
		return errors.New("--json with --ladder needs --flows (the report to print)")
	}
	if a.ladder != "" {
		return cli.CheckOutputFile("--ladder", a.ladder, ".svg", ".png")
	}
	return nil
}

// ReadPackets reads every RoCEv2 packet of a capture as the flow analysis
// takes them, each with its own copy of the bytes. Malformed datagrams are
// left out; a packet with a bad ICRC that parses is kept with
// flows.Packet.BadICRC set (the analysis counts it, the ladder leaves it
// out). A packet the capture cut short (Frame.Truncated) is kept when it
// holds all its headers: its ICRC unchecked, it counts as good, and its
// payload (zeros) has the length the IP and UDP headers give; one cut
// inside its headers is left out, and so is a cut datagram of several
// packets it cannot split (Frame.Merged). Frames keep their numbers, and the
// packets of a datagram that holds several carry their Frame.Segment.
func ReadPackets(r io.Reader, ports Ports) ([]flows.Packet, error) {
	pkts, _, _, err := readPackets(r, ports)
	return pkts, err
}

// leftOut counts the packets readPackets leaves out because the capture
// cut them short where they could not be told apart (Frame.Merged), with
// the frame of the first, and the malformed datagrams it leaves out (for
// --strict).
type leftOut struct {
	merged, first int
	// malformed counts the malformed datagrams, malformedFirst the
	// frame of the first.
	malformed, malformedFirst int
	// cut counts the packets the capture cut inside their headers
	// (KindCut, or a packet whose headers it holds not all of), cutFirst
	// the frame of the first.
	cut, cutFirst int
	// skipped is what the Reader skipped that standard error names
	// (see skipped.say).
	skipped *skipped
}

// cutHeadersSnap is the snap length the note on packets cut inside their
// headers recommends: it keeps the longest RoCE headers (an RD atomic's
// BTH, RDETH, DETH and AtomicETH, 52 bytes) behind the longest link, IP
// and UDP headers dump decodes (Ethernet with QinQ tags, IPv6, UDP: 70).
const cutHeadersSnap = 128

// readPackets is ReadPackets, and says which packets it left out and
// when the capture's first frame, RoCEv2 or not, was taken (zero when it
// has none).
func readPackets(r io.Reader, ports Ports) ([]flows.Packet, leftOut, time.Time, error) {
	var lo leftOut
	rd, err := NewReader(r, ports)
	if err != nil {
		return nil, lo, time.Time{}, err
	}
	var (
		out []flows.Packet
		f   Frame
	)
	for {
		rec, err := rd.Next(&f)
		lo.skipped = &rd.skip
		if err == io.EOF {
			return out, lo, rd.First(), nil
		}
		if err != nil {
			return out, lo, rd.First(), fmt.Errorf("after frame %d: %w", rd.Frames(), err)
		}
		if f.Merged {
			// Several packets taken for one would be a PSN gap after
			// each, and a PMTU beyond any there is.
			if lo.merged++; lo.merged == 1 {
				lo.first = f.Num
			}
			continue
		}
		if f.Kind == KindMalformed {
			if lo.malformed++; lo.malformed == 1 {
				lo.malformedFirst = f.Num
			}
			continue
		}
		if f.Kind == KindCut || f.Kind == KindRoCE && !f.HeadersCaptured() {
			// A packet the capture cut inside its headers: the
			// zeros that stand for the rest would read as headers.
			if lo.cut++; lo.cut == 1 {
				lo.cutFirst = f.Num
			}
			continue
		}
		if f.Kind != KindRoCE {
			continue
		}
		p, err := packet.Parse(append([]byte(nil), f.Packet.Bytes()...))
		if err != nil {
			continue // cannot happen: it parsed before
		}
		out = append(out, flows.Packet{Frame: f.Num, Segment: f.Segment, Time: rec.TS, Src: f.Src, Dst: f.Dst, Pkt: p, BadICRC: !f.ICRCOK && !f.Truncated})
	}
}

// analyse runs dump --flows and --ladder on the capture in r.
func analyse(r io.Reader, name string, o *options, stdout, stderr io.Writer) int {
	pkts, lo, start, err := readPackets(r, o.ports)
	switch {
	case lo.merged == 1:
		fmt.Fprintf(stderr, "rxectl dump: 1 packet left out of the analysis: a UDP datagram cut by the capture that holds several RoCE packets it does not show the boundaries of (frame %d)\n", lo.first)
	case lo.merged > 1:
		fmt.Fprintf(stderr, "rxectl dump: %d packets left out of the analysis: UDP datagrams cut by the capture that hold several RoCE packets it does not show the boundaries of (first: frame %d)\n", lo.merged, lo.first)
	}
	switch {
	case lo.cut == 1:
		fmt.Fprintf(stderr, "rxectl dump: 1 packet cut by the capture inside its headers left out of the analysis (frame %d): a snap length of %d bytes keeps every RoCE header\n", lo.cutFirst, cutHeadersSnap)
	case lo.cut > 1:
		fmt.Fprintf(stderr, "rxectl dump: %d packets cut by the capture inside their headers left out of the analysis (first: frame %d): a snap length of %d bytes keeps every RoCE header\n", lo.cut, lo.cutFirst, cutHeadersSnap)
	}
	switch {
	case lo.malformed == 1:
		fmt.Fprintf(stderr, "rxectl dump: 1 malformed datagram to a RoCEv2 port left out of the analysis (frame %d; rxectl dump %s says why)\n", lo.malformedFirst, name)
	case lo.malformed > 1:
		fmt.Fprintf(stderr, "rxectl dump: %d malformed datagrams to a RoCEv2 port left out of the analysis (first: frame %d; rxectl dump %s says why)\n", lo.malformed, lo.malformedFirst, name)
	}
	if lo.skipped != nil {
		lo.skipped.say(stderr)
	}
	if err != nil && pkts == nil {
		fmt.Fprintf(stderr, "rxectl dump: %s: %v\n", name, err)
		return cli.ExitFail
	}
	status := cli.ExitOK
	if err != nil { // analyse what was read
		fmt.Fprintf(stderr, "rxectl dump: %s: %v\n", name, err)
		status = cli.ExitFail
	}
	an := flows.NewAnalyzer(flows.Options{})
	for _, p := range pkts {
		an.Add(p)
	}
	rep := an.Report()
	if o.an.flows {
		if o.json {
			err = rep.WriteJSON(stdout)
		} else {
			err = rep.WriteText(stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "rxectl dump: writing output: %v\n", err)
			return cli.ExitFail
		}
	}
	if o.an.ladder != "" {
		sel := o.an.sel
		sel.Start = start // --time counts from the first frame, as the time column
		d, err := ladder.FromCapture(pkts, rep, sel)
		if err == nil {
			err = ladder.Write(o.an.ladder, d)
		}
		if err != nil {
			fmt.Fprintf(stderr, "rxectl dump: --ladder %s: %v\n", o.an.ladder, err)
			return cli.ExitFail
		}
		fmt.Fprintf(stderr, "rxectl dump: %s: %s\n", o.an.ladder, d.Title)
	}
	if o.strict {
		// --strict fails on what it fails on in the packet dump: a bad
		// ICRC or a malformed datagram (not a packet the capture cut).
		bad := 0
		for _, p := range pkts {
			if p.BadICRC {
				bad++
			}
		}
		if bad+lo.malformed > 0 {
			fmt.Fprintf(stderr, "rxectl dump: --strict: %d bad ICRC, %d malformed\n", bad, lo.malformed)
			status = cli.ExitFail
		}
	}
	return status
}
