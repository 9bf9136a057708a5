package flows

import (
	"fmt"

	"github.com/gorxe/gorxe/packet"
)

// badPkt is what the analysis keeps of a packet with a bad ICRC: its frame,
// the flow its addresses and QP name, its PSN, and after, the number of
// packets with a good ICRC added before it (its place among a.recs).
type badPkt struct {
	frame int
	key   flowKey
	psn   packet.PSN
	after int
}

// gapShare is a share of a flow's standing gaps: psns PSNs in gaps gaps,
// the first at frame.
type gapShare struct {
	psns, gaps, frame int
}

// matchBad counts each packet with a bad ICRC in the flow its addresses and
// QP name (Flow.BadICRC, BadICRCFrames), or in the report when they name
// none, and keeps them by flow in a.badBy for corrupted.
func (a *Analyzer) matchBad(rep *Report) {
	a.badBy = make([][]badPkt, len(a.flows))
	for _, f := range a.flows {
		f.BadICRC, f.BadICRCFrames, f.PSNCorrupt = 0, nil, 0
		f.lost, f.corrupt = gapShare{}, gapShare{}
	}
	for _, b := range a.bad {
		fi, ok := a.index[b.key]
		if !ok {
			rep.BadICRCNoFlow++
			rep.BadICRCNoFlowFrames = appendFrame(rep.BadICRCNoFlowFrames, b.frame)
			continue
		}
		f := a.flows[fi]
		f.BadICRC++
		f.BadICRCFrames = appendFrame(f.BadICRCFrames, b.frame)
		a.badBy[fi] = append(a.badBy[fi], b)
	}
}

// appendFrame appends frame to frames unless it is the last one there (the
// packets of one datagram share its frame).
func appendFrame(frames []int, frame int) []int {
	if n := len(frames); n > 0 && frames[n-1] == frame {
		return frames
	}
	return append(frames, frame)
}

// corrupted splits the standing gaps of the flows fis, once the connection
// was analysed: a PSN missing from a gap was carried by a packet with a bad
// ICRC when such a packet of the same flow, captured after the flow's packet
// before the gap and before the packet that opened it, has that PSN. It
// sets Flow.PSNCorrupt, and the flow's shares for explain: corrupt, the
// PSNs so carried, the gaps with at least one, and the frame of the first
// bad-ICRC packet that carried one; lost, the other PSNs, the gaps with at
// least one of those, and the first such gap's frame.
func (a *Analyzer) corrupted(fis []int) {
	// next is, by flow, the first of its bad-ICRC packets not yet taken:
	// those captured after the flow's latest packet.
	next := map[int]int{}
	for _, fi := range fis {
		if len(a.badBy[fi]) > 0 {
			next[fi] = 0
		}
	}
	if len(next) == 0 {
		return
	}
	for i := range a.recs {
		r := &a.recs[i]
		lo, ok := next[r.flow]
		if !ok {
			continue
		}
		// bad[lo:hi] lie between the flow's previous packet and r.
		bad := a.badBy[r.flow]
		hi := lo
		for hi < len(bad) && bad[hi].after <= i {
			hi++
		}
		next[r.flow] = hi
		n := a.notes[r.ref()]
		if n == nil || n.Gap <= 0 {
			continue
		}
		f := a.flows[r.flow]
		from, got := packet.PSN(n.GapPSN), a.lateGot[r.ref()]
		in := func(q packet.PSN) bool { return !q.Before(from) && q.Diff(from) < int32(n.Gap) }
		m := n.Gap // the gap's PSNs still missing
		for q := range got {
			if in(q) {
				m--
			}
		}
		var carried map[packet.PSN]bool
		first := 0
		for _, b := range bad[lo:hi] {
			if in(b.psn) && !got[b.psn] && !carried[b.psn] {
				if carried == nil {
					carried = map[packet.PSN]bool{}
				}
				carried[b.psn] = true
				if first == 0 {
					first = b.frame
				}
			}
		}
		n.GapCorrupt, n.GapCorruptFrame = len(carried), first
		if k := len(carried); k > 0 {
			f.PSNCorrupt += k
			f.corrupt.add(k, first)
		}
		if k := m - len(carried); k > 0 {
			f.lost.add(k, r.frame)
		}
	}
}

// add counts a gap with n PSNs of the share, at frame.
func (s *gapShare) add(n, frame int) {
	s.psns += n
	s.gaps++
	if s.frame == 0 {
		s.frame = frame
	}
}

// gapClauses says what the standing gaps of flow f lost: noun names what
// their PSNs were ("READ response", counting PSNs as responses), or is
// empty for requests (counted in PSNs). With no PSN carried by a packet with
// a bad ICRC it is one clause, of PSNs lost before the capture point;
// otherwise a clause for the PSNs no such packet carried, if any, and one
// for those corrupted.
func gapClauses(f *Flow, noun string) []string {
	lost := gapShare{f.PSNMissing, f.PSNGaps, f.FirstGapFrame}
	if f.PSNCorrupt > 0 {
		lost = f.lost
	}
	var out []string
	if lost.psns > 0 {
		if noun != "" {
			out = append(out, fmt.Sprintf("%s lost before the capture point (%s, first at frame %d)",
				count(lost.psns, noun), count(lost.gaps, "gap"), lost.frame))
		} else {
			out = append(out, fmt.Sprintf("requests lost before the capture point (%s in %s, first at frame %d)",
				count(lost.psns, "PSN"), count(lost.gaps, "gap"), lost.frame))
		}
	}
	if c := f.corrupt; f.PSNCorrupt > 0 {
		dropped := func(it string) string {
			return "the capture holds " + it + " with a bad ICRC, and the receiver dropped " + it
		}
		switch {
		case noun == "":
			out = append(out, fmt.Sprintf("requests corrupted before the capture point (%s in %s, first at frame %d): %s",
				count(c.psns, "PSN"), count(c.gaps, "gap"), c.frame, dropped("them")))
		case c.psns == 1:
			out = append(out, fmt.Sprintf("1 %s corrupted before the capture point (frame %d): %s", noun, c.frame, dropped("it")))
		default:
			out = append(out, fmt.Sprintf("%s corrupted before the capture point (%s, first at frame %d): %s",
				count(c.psns, noun), count(c.gaps, "gap"), c.frame, dropped("them")))
		}
	}
	return out
}
