// Package flows analyses the RoCEv2 packets of a capture: it groups them by
// flow (source, destination, destination QP, and for UD the source QP),
// pairs the two directions of a
// connection, and reports per flow what was sent and what went wrong: PSN
// gaps and rewinds, NAKs, recovery episodes with their cause, RTT samples,
// goodput over time, and sentences that explain it.
//
// The analysis sees only what the capture point saw. A packet captured and
// then lost (by a receiver, or by a fault injector behind the capture) shows
// no gap; its retransmission still shows as a rewind, and the episode says
// so. A packet the capture holds with a bad ICRC (Packet.BadICRC) is dropped
// by its receiver: the analysis counts it, and a gap PSN it carried is
// corrupted rather than lost before the capture point. Frame numbers are the
// caller's, counted as Wireshark counts them; a
// datagram that holds several RoCE packets (GSO/GRO) gives packets with
// one frame number and their own segment numbers.
package flows

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Packet is one decoded RoCEv2 packet of a capture.
type Packet struct {
	// Frame is the packet's frame number: 1-based, counting every frame of
	// the capture, RoCE or not, as Wireshark does.
	Frame int
	// Segment is the packet's place in its datagram, counting from 1,
	// when the datagram holds several RoCE packets back to back (a GSO or
	// GRO buffer, which rxectl dump splits); 0 when it holds one.
	Segment int
	// Time is the capture time stamp.
	Time time.Time
	// Src and Dst are the IP addresses and UDP ports.
	Src, Dst netip.AddrPort
	// Pkt is the parsed packet (BTH through ICRC). Analyze copies what it
	// needs, so the buffer may be reused after Add returns.
	Pkt packet.Packet
	// BadICRC says the packet's ICRC is wrong: the capture holds it, but
	// a receiver drops it. The analysis only counts it, in the flow its
	// addresses and QP name (Flow.BadICRC; Report.BadICRCNoFlow when they
	// name none), and uses its PSN to tell that flow's gaps it carried from
	// losses before the capture point (Flow.PSNCorrupt); it is no packet of
	// the flow otherwise.
	BadICRC bool
}

// Ref returns the packet's frame and segment.
func (p Packet) Ref() Ref { return Ref{Frame: p.Frame, Segment: p.Segment} }

// Ref names one packet of a capture: its frame number and its segment
// (Packet.Segment), which tells apart the packets of one datagram.
type Ref struct {
	Frame, Segment int
}

// Options tune the analysis.
type Options struct {
	// PMTU is the path MTU in bytes, used to know how many PSNs a READ
	// request consumes. 0 infers it per connection from the payload of
	// FIRST and MIDDLE packets (which carry exactly one PMTU).
	PMTU int
	// Interval is the width of a goodput interval; 0 picks a round width
	// giving at most 20 intervals over the capture. A width that would
	// give more than MaxIntervals intervals is widened to the smallest
	// 1-2-5 step giving at most MaxIntervals, so the report's size does not
	// grow with the capture's duration.
	Interval time.Duration
	// Silence is the shortest quiet time before a rewind that counts as a
	// retransmission timeout; 0 means 1 ms or 4 median RTTs, whichever is
	// larger.
	Silence time.Duration
}

// rec is what the analysis keeps of one packet.
type rec struct {
	frame   int
	seg     int // Packet.Segment
	ud      bool
	t       time.Time
	flow    int // index into Analyzer.flows
	op      packet.Opcode
	mask    packet.Mask
	psn     packet.PSN
	ackReq  bool
	syn     packet.Syndrome
	msn     uint32
	dmaLen  uint32 // RETH DMA length of a READ request
	payload int
	size    int // BTH through ICRC
}

// flowKey identifies a flow: source and destination address, the
// destination UDP port, the destination QP and, for UD, the source QP
// (DETH): two UD QPs of one host sending to one QP are two flows. The
// destination port is the receiving device's (4791 for every standard
// peer); it tells apart two devices on one address, each with its own QP
// numbers (rxectl --loopback --ipv6 puts both on ::1). The source port is
// left out: a NIC picks it per QP or per flow (RoCEv2 UDP source port
// entropy).
type flowKey struct {
	src, dst netip.Addr
	dstPort  uint16
	qp       uint32
	ud       bool
	srcQP    uint32
}

// keyOf is the flow key of p.
func keyOf(p Packet) flowKey {
	k := flowKey{src: p.Src.Addr(), dst: p.Dst.Addr(), dstPort: p.Dst.Port(), qp: p.Pkt.DestQP()}
	if p.Pkt.Opcode().Transport() == packet.TransportUD && p.Pkt.Mask()&packet.MaskDETH != 0 {
		k.ud, k.srcQP = true, p.Pkt.DETH().SrcQP()
	}
	return k
}

// MaxIntervals bounds the number of goodput intervals of a connection.
const MaxIntervals = 1000

// Analyzer collects packets; Report analyses them.
type Analyzer struct {
	opts  Options
	recs  []rec
	flows []*Flow
	index map[flowKey]int
	notes map[Ref]*Note
	clock Clock
	// bad holds the packets with a bad ICRC, in the order they came;
	// badBy the same by flow index, once Report matched them to flows.
	bad   []badPkt
	badBy [][]badPkt
	// lateGot holds, by the packet that opened a forward jump's gap
	// (skipGap.got), the PSNs of that gap that came late since.
	lateGot map[Ref]map[packet.PSN]bool
}

// Clock makes a capture's time stamps monotonic. A capture lists frames in
// the order they were captured, but its time stamps may step backwards (a
// clock set back, frames merged from two interfaces, a damaged file). A
// protocol debugger trusts the order: a frame stamped before the frame
// ahead of it is taken to have come at that frame's time, so durations,
// RTTs and silences are never negative and every frame falls within the
// capture's first and last time. A forward jump is kept as it is. The zero
// Clock is ready to use.
type Clock struct {
	last time.Time
	set  bool
}

// Next returns the monotonic time of a frame stamped t: t, or the time of
// the frame before it when t is earlier.
func (c *Clock) Next(t time.Time) time.Time {
	if c.set && t.Before(c.last) {
		return c.last
	}
	c.last, c.set = t, true
	return t
}

// NewAnalyzer returns an empty Analyzer.
func NewAnalyzer(o Options) *Analyzer {
	return &Analyzer{opts: o, index: map[flowKey]int{}, notes: map[Ref]*Note{}, lateGot: map[Ref]map[packet.PSN]bool{}}
}

// Add records one packet. Packets must come in capture order; their times
// are made monotonic with a Clock, so a packet stamped earlier than the
// one added before it is analysed at that packet's time. A packet with a
// bad ICRC (Packet.BadICRC) is only kept to be counted: it opens no flow
// and does not move the clock.
func (a *Analyzer) Add(p Packet) {
	k := keyOf(p)
	if p.BadICRC {
		a.bad = append(a.bad, badPkt{frame: p.Frame, key: k, psn: p.Pkt.PSN(), after: len(a.recs)})
		return
	}
	fi, ok := a.index[k]
	if !ok {
		fi = len(a.flows)
		a.index[k] = fi
		a.flows = append(a.flows, &Flow{Src: p.Src, Dst: p.Dst, DestQP: k.qp, UD: k.ud, SrcQP: k.srcQP, FirstFrame: p.Frame, byOp: map[packet.Opcode]*OpcodeCount{}})
	}
	r := rec{
		frame: p.Frame, seg: p.Segment, ud: k.ud, t: a.clock.Next(p.Time), flow: fi,
		op: p.Pkt.Opcode(), mask: p.Pkt.Mask(), psn: p.Pkt.PSN(), ackReq: p.Pkt.AckReq(),
		payload: p.Pkt.PayloadLen(), size: p.Pkt.Len(),
	}
	if a := p.Pkt.AETH(); a != nil {
		r.syn, r.msn = a.Syndrome(), a.MSN()
	}
	if r.mask&packet.MaskRead != 0 {
		r.dmaLen = p.Pkt.RETH().DMALen()
	}
	a.recs = append(a.recs, r)
	f := a.flows[fi]
	f.LastFrame = p.Frame
	f.Packets++
	f.Bytes += r.size
	c := f.byOp[r.op]
	if c == nil {
		c = &OpcodeCount{Opcode: r.op.String()}
		f.byOp[r.op] = c
	}
	c.Packets++
	c.Bytes += r.size
}

// Report is the result of an analysis.
type Report struct {
	// Connections are the connections in the order of their first packet.
	Connections []*Connection `json:"connections"`
	// Interval is the width of the goodput intervals.
	Interval Duration `json:"goodput_interval"`
	// Notes marks the packets a diagram should colour, by frame and
	// segment (Packet.Ref): each packet of a datagram that holds several
	// has its own.
	Notes map[Ref]*Note `json:"-"`
	// BadICRCNoFlow counts the packets with a bad ICRC whose addresses
	// and QP name no flow of the capture (their BTH or IP header may be
	// what was corrupted), BadICRCNoFlowFrames their frames, in capture
	// order, each once.
	BadICRCNoFlow       int   `json:"bad_icrc_no_flow,omitempty"`
	BadICRCNoFlowFrames []int `json:"bad_icrc_no_flow_frames,omitempty"`
}

// Note is what the analysis found about one packet.
type Note struct {
	// Resent: the packet's PSN was sent (or answered) before.
	Resent bool
	// Gap is the number of PSNs missing just before this packet, from
	// GapPSN on. Packets that came late since (reordered) are taken out:
	// GapPSN is the first PSN still missing and Gap reaches the last, so
	// late ones between them stay inside the span (Flow.PSNMissing counts
	// only the PSNs still missing).
	Gap    int
	GapPSN uint32
	// GapCorrupt is the number of the gap's missing PSNs that packets
	// with a bad ICRC of the same flow carried (Flow.PSNCorrupt): they
	// were corrupted before the capture point, not lost; GapCorruptFrame
	// is the first such packet's frame.
	GapCorrupt, GapCorruptFrame int
	// LostAfter: the capture holds this packet, yet its PSN was sent
	// again and no ACK in the capture had acknowledged it: it was lost
	// after the capture point (or, for a request, its answer was, or the
	// answer came after the requester's timer fired).
	LostAfter bool
	// Cause is set on the packet that opened a recovery episode.
	Cause Cause
	// Silence is the quiet time before a timeout's first resent packet.
	Silence time.Duration
}

// Connection is one flow, or the two flows of the two directions of a
// connection.
type Connection struct {
	// Flows holds one or two flows; with two, Flows[0] is the one that
	// carries more requests (the requester's direction).
	Flows []*Flow `json:"flows"`
	// Recoveries are the recovery episodes, in capture order.
	Recoveries []Recovery `json:"recoveries"`
	// RTT summarises the request-to-response times.
	RTT RTT `json:"rtt"`
	// Goodput is the new payload delivered per interval (retransmitted
	// PSNs are counted once).
	Goodput []Interval `json:"goodput"`
	// Explain says in sentences what went wrong; empty when nothing did.
	Explain []string `json:"explain"`
	// PMTU is the path MTU used for READ spans (0: unknown).
	PMTU int `json:"pmtu"`

	start time.Time
}

// Flow is the packets from one address to another for one destination QP
// and, for UD, from one source QP.
type Flow struct {
	Src    netip.AddrPort `json:"src"`
	Dst    netip.AddrPort `json:"dst"`
	DestQP uint32         `json:"dest_qp"`
	// UD is true for a flow of UD packets, SrcQP then their DETH source
	// QP. UD never retransmits: its PSNs are not checked for gaps and
	// rewinds, as one source QP numbers what it sends to every
	// destination in one sequence.
	UD    bool   `json:"ud,omitempty"`
	SrcQP uint32 `json:"src_qp,omitempty"`
	// Packets and Bytes count every packet (Bytes: BTH through ICRC).
	Packets int `json:"packets"`
	Bytes   int `json:"bytes"`
	// ByOpcode counts packets and bytes per opcode, in opcode order.
	ByOpcode []OpcodeCount `json:"by_opcode"`
	// Messages counts messages seen whole and in order: FIRST through
	// LAST, or ONLY (READ responses included; ACKs are not messages).
	// Requests count as the responder would execute them: in PSN order,
	// and, when the responder sent selective-repeat reports, including
	// the requests after a hole, once it is filled.
	Messages int `json:"messages"`
	// PSNGaps counts packets whose PSN is ahead of the next expected PSN
	// (READ requests consume their responses' PSNs; ACKs, which skip
	// legitimately, are not counted): past the highest PSN sent, or inside
	// a go-back-N resend round, which resends in PSN order (a
	// selective-repeat round resends only the holes); PSNMissing is the
	// PSNs skipped. A READ response gap counts only PSNs past the highest
	// response seen, or those a resent run of responses skips. A request or
	// READ response that comes late into the gap of a jump ahead
	// (reordered, see PSNLate) takes its PSN back: a gap whose PSNs all
	// came late is no gap.
	PSNGaps    int `json:"psn_gaps"`
	PSNMissing int `json:"psn_missing"`
	// FirstGapFrame is the frame of the first gap (0: none).
	FirstGapFrame int `json:"first_gap_frame,omitempty"`
	// PSNRewinds counts packets whose PSN is not after the last PSN of the
	// flow's previous packet (modulo 2^24) and that did not come late: a
	// PSN the capture held before (a retransmission or duplicate), or, for
	// a READ response, the responder starting again inside a READ's span
	// (its answer to a re-read).
	PSNRewinds int `json:"psn_rewinds"`
	// PSNLate counts packets that came late (reordered on the way): a PSN
	// the capture had not held, behind later ones already seen, that is
	// neither resent nor counted a rewind, and that takes its PSN back
	// from the gap it fills (PSNGaps, PSNMissing). A request came late when
	// it lies in a gap still open from a jump ahead, with no NAK into that
	// gap, no NAK since it opened and no timeout-long silence before. A
	// READ response came late when it lies in the span of a READ still
	// waiting for it that was not read again from or before its PSN, and,
	// if it starts a response message (FIRST or ONLY), at that READ's
	// first PSN; without the READ request in the capture (sent before it
	// began, or with an unknown span), when it lies in a gap still open
	// from a jump ahead and is a MIDDLE or LAST, or follows a FIRST or
	// MIDDLE (a responder finishes one READ's responses before it answers
	// another request); in both cases with no timeout-long silence before.
	PSNLate int `json:"psn_late"`
	// NAKs counts the NAKs the flow carries, by kind.
	NAKs NAKs `json:"naks"`
	// FirstFrame and LastFrame are the flow's first and last frames.
	FirstFrame int `json:"first_frame"`
	LastFrame  int `json:"last_frame"`
	// BadICRC counts the packets with a bad ICRC whose addresses and QP
	// name the flow (as its packets do: Holds), BadICRCFrames their frames,
	// in capture order, each once. The receiver drops them, so they count
	// in nothing else: not in Packets, Bytes or ByOpcode, and their PSNs
	// were not seen (a corrupted BTH may carry a wrong PSN or QP).
	BadICRC       int   `json:"bad_icrc,omitempty"`
	BadICRCFrames []int `json:"bad_icrc_frames,omitempty"`
	// PSNCorrupt counts the PSNs missing (of PSNMissing) that a packet
	// with a bad ICRC of the flow carried: a packet captured after the
	// flow's packet before the gap and before the one that opened it, whose
	// PSN is one of the gap's missing PSNs. They were corrupted before the
	// capture point, not lost there.
	PSNCorrupt int `json:"psn_corrupt,omitempty"`

	byOp map[packet.Opcode]*OpcodeCount
	// gapFrames are the frames of the gaps counted in PSNGaps, in capture
	// order (a gap taken back leaves it): FirstGapFrame is the first.
	gapFrames []int
	// lost and corrupt split the gaps that stand (corrupted): lost the
	// PSNs no bad-ICRC packet carried, corrupt those one did.
	lost, corrupt gapShare
}

// Holds reports whether p belongs to the flow.
func (f *Flow) Holds(p Packet) bool {
	k := keyOf(p)
	return f.Src.Addr() == k.src && f.Dst.Addr() == k.dst && f.Dst.Port() == k.dstPort && f.DestQP == k.qp && f.UD == k.ud && f.SrcQP == k.srcQP
}

// OpcodeCount is the packets and bytes of one opcode.
type OpcodeCount struct {
	Opcode  string `json:"opcode"`
	Packets int    `json:"packets"`
	Bytes   int    `json:"bytes"`
}

// NAKs counts NAKs by kind (IBA 9.3.5 table 43).
type NAKs struct {
	SequenceError   int `json:"sequence_error"`
	RNR             int `json:"rnr"`
	RemoteAccess    int `json:"remote_access"`
	InvalidRequest  int `json:"invalid_request"`
	RemoteOperation int `json:"remote_operation"`
	Other           int `json:"other"`
	// HoleReports counts selective-repeat hole reports (NAK code 0x10,
	// docs/recovery.md), which two gorxe ends exchange after negotiating
	// it: not errors, they ask for the PSNs of one hole again.
	HoleReports int `json:"hole_reports"`
	// ProgressReports counts selective-repeat progress reports (NAK code
	// 0x10 naming no hole: BTH PSN equal to the AETH MSN field), which
	// say how far the responder has received. Not errors either.
	ProgressReports int `json:"progress_reports"`
	// RNRTimers lists the distinct RNR timer codes seen (IBA 9.7.5.2.8).
	RNRTimers []uint8 `json:"rnr_timers,omitempty"`
}

// Total is the number of NAKs of every kind.
func (n NAKs) Total() int {
	return n.SequenceError + n.RNR + n.RemoteAccess + n.InvalidRequest + n.RemoteOperation + n.Other + n.HoleReports + n.ProgressReports
}

// Cause is why a recovery episode started, as far as the capture shows.
type Cause string

// Causes of a recovery episode.
const (
	// CauseSequenceNAK: the responder sent a PSN sequence error NAK.
	CauseSequenceNAK Cause = "sequence NAK"
	// CauseTimeout: the connection was silent, then the requester went
	// back (the retransmission timer fired).
	CauseTimeout Cause = "timeout"
	// CauseRNR: the responder sent an RNR NAK; the requester waited.
	CauseRNR Cause = "RNR wait"
	// CauseImpliedNAK: a response arrived for a later PSN than a READ's
	// missing response (IBA 9.7.5.1.1: an implied NAK), and the
	// requester read the rest again.
	CauseImpliedNAK Cause = "implied NAK"
	// CauseSelective: the requester resent some PSNs and went on from
	// where it was (selective resend), after a selective-repeat hole
	// report that asked for them, or with no NAK or silence before.
	CauseSelective Cause = "selective resend"
	// CauseProbe: the requester resent one packet and then went on at
	// the PSN after the highest it had sent, with no NAK or long silence
	// before: a recovery timer or tail-loss probe (RFC 8985's idea;
	// docs/recovery.md), which asks for an ACK without going back.
	CauseProbe Cause = "probe"
	// CauseUnknown: a rewind the capture shows no reason for.
	CauseUnknown Cause = "unknown"
)

// Recovery is one recovery episode: the requester going back to resend.
type Recovery struct {
	Cause Cause `json:"cause"`
	// Requester is the address of the side that resent.
	Requester netip.AddrPort `json:"requester"`
	// FirstFrame is the first evidence (the gap, the NAK, or the rewind);
	// LastFrame the last packet of the episode's PSN range before the
	// requester moved on.
	FirstFrame int      `json:"first_frame"`
	LastFrame  int      `json:"last_frame"`
	Duration   Duration `json:"duration"`
	// RewindFrame is the frame of the first resent packet.
	RewindFrame int `json:"rewind_frame"`
	// PSN is the first resent PSN; HighPSN the highest PSN sent before.
	PSN     uint32 `json:"psn"`
	HighPSN uint32 `json:"high_psn"`
	// Rounds counts the times the requester went back within the episode
	// (re-reads for READs); Resent the packets resent.
	Rounds int `json:"rounds"`
	Resent int `json:"resent"`
	// Read is true when the resent requests were READs.
	Read bool `json:"read"`
	// Silence is the quiet time before the rewind (timeouts).
	Silence Duration `json:"silence,omitempty"`
	// Probe is true when the requester resent one packet and then went
	// on at the PSN after the highest it had sent (a probe, whatever the
	// silence before it): the PSNs between were not sent again.
	Probe bool `json:"probe,omitempty"`
	// AckedFrame is the frame of an ACK that the capture holds before
	// the rewind and that acknowledged the first resent PSN (0: none):
	// the responder had the request, so the ACK was lost after the
	// capture point or reached the requester after its timer fired.
	AckedFrame int `json:"acked_frame,omitempty"`
	// RNRTimer is the RNR NAK's timer code (RNR waits).
	RNRTimer uint8 `json:"rnr_timer,omitempty"`
	// FirstSentFrame is the frame where the capture first holds the
	// first resent PSN (the READ response, for a re-read), 0 if it never
	// saw it before the rewind: when it did and no ACK had acknowledged
	// it (AckedFrame 0), the packet or its answer was lost after the
	// capture point, or the answer came after the requester's timer fired.
	FirstSentFrame int `json:"first_sent_frame"`

	start     time.Time
	rewindSeg int // the segment of RewindFrame's resent packet

}

// RTT summarises request-to-response times: from a request that asks for
// a response (AckReq, READ, atomic) to its ACK or first response.
// Requests that were resent are not sampled (Karn's rule).
type RTT struct {
	Samples int      `json:"samples"`
	Min     Duration `json:"min"`
	Median  Duration `json:"median"`
	Max     Duration `json:"max"`
}

// Interval is the goodput of one interval.
type Interval struct {
	// Start is the interval's start, relative to the connection's first
	// packet.
	Start Duration `json:"start"`
	Bytes int      `json:"bytes"`
	// Gbps is Bytes over the interval in 10^9 bits per second.
	Gbps float64 `json:"gbps"`
}

// Duration is a time.Duration that marshals to JSON as seconds.
type Duration time.Duration

// MarshalJSON writes d in seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(formatSeconds(time.Duration(d))), nil
}

// Report analyses the packets added so far.
func (a *Analyzer) Report() *Report {
	for _, f := range a.flows {
		f.ByOpcode = f.ByOpcode[:0]
		for _, op := range slices.Sorted(maps.Keys(f.byOp)) {
			f.ByOpcode = append(f.ByOpcode, *f.byOp[op])
		}
	}
	conns := a.pair()
	iv := a.interval()
	rep := &Report{Interval: Duration(iv), Notes: a.notes}
	a.matchBad(rep)
	for _, c := range conns {
		a.analyse(c, iv)
		rep.Connections = append(rep.Connections, c.conn)
	}
	return rep
}

// interval is the goodput interval: Options.Interval if it gives at most
// MaxIntervals intervals over the capture, else the smallest 1-2-5 step
// that does; with no Options.Interval, the smallest 1-2-5 step giving at
// most 20 intervals. Record times are monotonic, so every record of every
// connection lies within the span from the capture's first record to its
// last, and its interval index is below that count.
func (a *Analyzer) interval() time.Duration {
	var span time.Duration
	if len(a.recs) > 0 {
		span = a.recs[len(a.recs)-1].t.Sub(a.recs[0].t)
	}
	if a.opts.Interval > 0 {
		if span/a.opts.Interval < MaxIntervals {
			return a.opts.Interval
		}
		return step125(span, MaxIntervals)
	}
	if len(a.recs) == 0 {
		return time.Millisecond
	}
	return step125(span, 20)
}

// step125 returns the smallest step of 1, 2 or 5 times a power of ten
// microseconds that divides span into at most n intervals (span/step < n).
func step125(span time.Duration, n int) time.Duration {
	step := time.Microsecond
	for {
		for _, m := range []time.Duration{1, 2, 5} {
			if span/(m*step) < time.Duration(n) {
				return m * step
			}
		}
		step *= 10
	}
}
