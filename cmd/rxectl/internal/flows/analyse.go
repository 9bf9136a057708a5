package flows

import (
	"slices"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// seen is where a PSN was first seen.
type seen struct {
	frame, seg int
	t          time.Time
}

// evidence is a sign of trouble that a later rewind may be the answer to.
type evidence struct {
	cause    Cause
	frame    int
	t        time.Time
	rnrTimer uint8
}

// holeReport is a selective-repeat hole report: the responder asks for
// the PSNs from psn on again.
type holeReport struct {
	psn packet.PSN
	ev  *evidence
}

// pending is a request waiting for its first response (an RTT sample).
type pending struct {
	psn packet.PSN
	t   time.Time
}

// half is one requester's side of a connection: its requests in one flow
// and the responder's responses in the other. PSNs of both are in the
// requester's send-queue PSN space.
type half struct {
	a        *Analyzer
	c        *Connection
	req      *Flow // the requester's flow (requests)
	resp     *Flow // the responder's flow (responses); nil if not captured
	pmtu     int
	silence  time.Duration
	interval time.Duration

	// Request stream.
	started     bool
	firstReq    packet.PSN // the PSN of the first request captured
	prevReread  bool       // the previous request re-read PSNs asked for before
	prevEnd     packet.PSN // last PSN the previous request consumed
	expected    packet.PSN // next PSN in order
	high        packet.PSN // highest PSN consumed so far
	spanUnknown bool       // the previous request was a READ of unknown span
	msgOpen     bool
	ePSN        packet.PSN // the responder's expected PSN, for messages
	// sr: the responder's responses hold selective-repeat hole or
	// progress reports, so it keeps requests after a hole and executes
	// them once the hole is filled; ahead holds those requests, by PSN,
	// until ePSN reaches them (message).
	sr    bool
	ahead map[packet.PSN]aheadReq
	// skipped: the PSNs a go-back-N resend round skipped (lost before
	// the capture point), until they are seen again.
	skipped psnSet
	// holes are the latest selective-repeat hole reports (at most
	// maxSkips) whose hole's first PSN was not sent again since: the
	// evidence of the selective resend that sends it (rewind).
	holes []holeReport
	// skips are the latest such gaps (at most maxSkips): one that an ACK
	// later acknowledges whole while the responder never showed it missed
	// one of its PSNs was no loss (a probe's requester went on at its
	// frontier), and is taken back (ack).
	skips []skipGap
	// jumps are the latest gaps a request past the highest PSN opened (at
	// most maxSkips), while some of their PSNs may still come late: a
	// reordering path delivers them after later ones (late, fill).
	jumps []skipGap
	// acked is the highest PSN an ACK in the capture acknowledged
	// (cumulatively, IBA 9.7.5.1.2), ackFrame that ACK's frame; ackOK
	// says whether there was one.
	acked    packet.PSN
	ackFrame int
	ackOK    bool
	// seqNAK is the latest sequence error NAK: a requester goes to its PSN
	// (rxe req_retry), forward too when it was resending earlier PSNs.
	seqNAK     seqNAKAt
	reqSeen    map[packet.PSN]seen
	readStarts map[packet.PSN]bool
	// unasked are the gaps of the forward jumps (at most maxSkips) with
	// the PSNs of them that no request in the capture has asked for yet:
	// a READ request there was lost before the capture point or overtaken
	// by a later one, and is a first request though its PSN is below the
	// highest one (firstAsk).
	unasked []psnRange
	// reads are the READ requests whose responses have not all been seen,
	// oldest first (at most maxOpenReads): a READ's response message is
	// counted once every PSN of its span has had a response, in whatever
	// order they came (a selective-repeat requester places them so and
	// re-reads only the holes).
	reads []*readMsg

	// Response stream (READ responses). rMid: the latest READ response
	// in order was a FIRST or MIDDLE. rJumps are the latest gaps a
	// response past the highest one opened (at most maxSkips), while
	// their PSNs may still come late (responseLate).
	rStarted bool
	rPrev    packet.PSN
	rHigh    packet.PSN
	rOpen    bool
	rMid     bool
	rJumps   []skipGap
	respSeen map[packet.PSN]seen

	gap, why *evidence
	ep       *Recovery
	epLo     packet.PSN // the episode's first rewind PSN
	epRound  packet.PSN // the PSN of its latest round
	fatal    []fatalNAK
	pend     []pending
	rtts     []time.Duration
	lastT    time.Time
}

// skipGap is a gap of n PSNs from psn counted at frame (and segment seg);
// evidence says whether it became the half's evidence (gap for a request
// gap; why for a READ response gap, prev then holding the why it
// replaced), and missed whether the responder showed it missed one of
// them (a NAK into it, or a timeout's resend). got holds the PSNs of a
// forward jump's gap that came late since (fillJumps).
type skipGap struct {
	frame, seg, n    int
	psn              packet.PSN
	evidence, missed bool
	prev             *evidence
	got              map[packet.PSN]bool
}

// holds reports whether psn lies in the gap.
func (sg *skipGap) holds(psn packet.PSN) bool {
	return !psn.Before(sg.psn) && psn.Diff(sg.psn) < int32(sg.n)
}

// missed marks the gaps that hold psn as losses the responder saw.
func (h *half) missed(psn packet.PSN) {
	for i := range h.skips {
		if h.skips[i].holds(psn) {
			h.skips[i].missed = true
		}
	}
	for i := range h.jumps {
		if h.jumps[i].holds(psn) {
			h.jumps[i].missed = true
		}
	}
}

// dropJumpsFrom returns jumps without the gaps that hold psn or lie after
// it.
func dropJumpsFrom(jumps []skipGap, psn packet.PSN) []skipGap {
	return slices.DeleteFunc(jumps, func(j skipGap) bool {
		return !j.psn.Add(j.n - 1).Before(psn)
	})
}

// closeJumps stops waiting for late arrivals into the gaps that hold psn
// or lie after it, once the requester went back to psn: those gaps stand,
// and their PSNs are resent. A go-back-N responder discards what came after
// its first hole, so the requests kept past a gap are forgotten too.
func (h *half) closeJumps(psn packet.PSN) {
	h.jumps = dropJumpsFrom(h.jumps, psn)
	if !h.sr {
		h.ahead = nil
	}
}

// maxSkips bounds the gaps a half may still take back.
const maxSkips = 64

// seqNAKAt is a sequence error NAK's PSN and frame (frame 0: none).
type seqNAKAt struct {
	psn   packet.PSN
	frame int
}

// aheadReq is a request that a selective-repeat responder holds past its
// expected PSN: its opcode mask and the last PSN it consumes.
type aheadReq struct {
	mask packet.Mask
	end  packet.PSN
}

// readMsg is a READ request's span, first to end, and the PSNs of it
// that responses have covered so far (got, kept while some are missing);
// reread says the requester read it again from rereadFrom (the lowest PSN
// of its span a re-read asked for), while responses were still missing.
type readMsg struct {
	first, end packet.PSN
	missing    int
	got        map[packet.PSN]bool
	reread     bool
	rereadFrom packet.PSN
}

// maxOpenReads bounds the READs whose responses a half waits for: a
// capture that holds requests and not their answers (or a hostile one)
// forgets the oldest, which then go uncounted.
const maxOpenReads = 1024

// srAhead bounds how far past its expected PSN a selective-repeat
// responder holds requests: its out-of-order window is at most 2^22 PSNs
// (docs/sr-responder.md).
const srAhead = 1 << 22

// fatalNAK is a NAK that ends the connection (IBA 9.7.5.2: remote access,
// invalid request, remote operational error).
type fatalNAK struct {
	frame int
	psn   packet.PSN
	code  packet.NAKCode
}

// analyse runs the analysis of one connection.
func (a *Analyzer) analyse(g *group, iv time.Duration) {
	c := g.conn
	c.PMTU = a.opts.PMTU
	if c.PMTU == 0 {
		c.PMTU = a.inferPMTU(g.flows)
	}
	halves := map[int]*half{} // by requester flow index
	var get func(reqFlow int) *half
	other := func(fi int) int {
		for _, o := range g.flows {
			if o != fi {
				return o
			}
		}
		return fi // a lone flow of responses: its own half
	}
	in := func(fi int) bool { return slices.Contains(g.flows, fi) }
	// A responder that sent selective-repeat reports holds requests after
	// a hole (docs/sr-responder.md); its requester's half counts messages
	// so from the start.
	sr := map[int]bool{} // by requester flow index
	for i := range a.recs {
		r := &a.recs[i]
		if in(r.flow) && r.mask&packet.MaskAck != 0 && r.syn.IsNAK() && r.syn.NAKCode() == packet.NAKSelectiveRepeat {
			sr[other(r.flow)] = true
		}
	}
	get = func(reqFlow int) *half {
		h := halves[reqFlow]
		if h == nil {
			h = &half{a: a, c: c, req: a.flows[reqFlow], pmtu: c.PMTU, silence: a.opts.Silence, interval: iv,
				reqSeen: map[packet.PSN]seen{}, respSeen: map[packet.PSN]seen{}, readStarts: map[packet.PSN]bool{},
				sr: sr[reqFlow]}
			for _, fi := range g.flows {
				if fi != reqFlow {
					h.resp = a.flows[fi]
				}
			}
			halves[reqFlow] = h
		}
		return h
	}
	var last time.Time
	for i := range a.recs {
		r := &a.recs[i]
		if !in(r.flow) {
			continue
		}
		if c.start.IsZero() {
			c.start = r.t
		}
		switch {
		case r.mask&packet.MaskReq != 0 && r.ud:
			get(r.flow).datagram(r)
		case r.mask&packet.MaskReq != 0:
			get(r.flow).request(r, last)
		case r.mask&packet.MaskAck != 0:
			get(other(r.flow)).response(r, last)
		}
		for _, h := range halves {
			h.lastT = r.t
		}
		last = r.t
	}
	var rtts []time.Duration
	for _, fi := range g.flows {
		h := halves[fi]
		if h == nil {
			continue
		}
		h.closeEpisode()
		rtts = append(rtts, h.rtts...)
	}
	c.RTT = summarise(rtts)
	if c.Recoveries == nil {
		c.Recoveries = []Recovery{}
	}
	a.corrupted(g.flows)
	c.Explain = explain(c, halves, g.flows)
}

// inferPMTU is the largest payload of a FIRST or MIDDLE packet of the
// connection (they carry exactly one PMTU), or 0.
func (a *Analyzer) inferPMTU(flows []int) int {
	m := 0
	for _, r := range a.recs {
		first := r.mask&packet.MaskStart != 0 && r.mask&packet.MaskEnd == 0
		if (first || r.mask&packet.MaskMiddle != 0) && slices.Contains(flows, r.flow) {
			m = max(m, r.payload)
		}
	}
	return m
}

// span is the number of PSNs a request consumes: a READ one per response
// packet (IBA 9.7.2), anything else one. ok is false for a READ when the
// PMTU is unknown.
func (h *half) span(r *rec) (n int, ok bool) {
	if r.mask&packet.MaskRead == 0 {
		return 1, true
	}
	if h.pmtu == 0 {
		return 1, false
	}
	return max(1, (int(r.dmaLen)+h.pmtu-1)/h.pmtu), true
}

// datagram handles a UD request. UD never retransmits, and a UD QP
// numbers what it sends to every destination QP in one PSN sequence, so a
// UD flow's PSNs are not checked for gaps or rewinds: its packets count
// as messages (every UD request is an ONLY) and goodput.
func (h *half) datagram(r *rec) {
	if r.mask&packet.MaskStart != 0 && r.mask&packet.MaskEnd != 0 {
		h.req.Messages++
	}
	h.goodput(r)
}

// late reports whether the request r, at or below the previous request's
// last PSN, is a late arrival rather than a resend: its PSN is new to the
// capture (dup false) and lies in a gap still open from a forward jump,
// the responder has shown it missed none of that gap's PSNs (no NAK into
// it, no timeout's resend), no NAK or implied NAK came since the gap, and
// the connection was not silent long enough for a timeout.
func (h *half) late(r *rec, dup bool, last time.Time) bool {
	if dup || h.spanUnknown {
		return false
	}
	i := h.jumpOf(r.psn)
	if i < 0 {
		return false
	}
	j := &h.jumps[i]
	if j.missed || h.why != nil && h.why.frame > j.frame {
		return false
	}
	return r.t.Sub(last) < h.silenceThreshold()
}

// jumpOf is the index in h.jumps of the open gap that holds psn and has
// not had it yet, or -1.
func (h *half) jumpOf(psn packet.PSN) int {
	for i := range h.jumps {
		if h.jumps[i].holds(psn) && !h.jumps[i].got[psn] {
			return i
		}
	}
	return -1
}

// fill takes back the PSNs from psn to end that a late request brought
// from the open gaps of the request stream's forward jumps (fillJumps); a
// gap that got all its PSNs is no longer the half's gap evidence.
func (h *half) fill(psn, end packet.PSN) {
	h.jumps = h.fillJumps(h.req, h.jumps, psn, end, func(j *skipGap) {
		if j.evidence && h.gap != nil && h.gap.frame == j.frame {
			h.gap = nil
		}
	})
}

// fillJumps takes back the PSNs from psn to end that a late arrival
// brought from jumps, the open gaps of forward jumps of flow f: PSNMissing,
// and the gap itself (PSNGaps, its frame, its note) once it has all its
// PSNs, which closed is then called with; the note of a gap still open
// spans its first to its last PSN still missing. It returns the gaps still
// open.
func (h *half) fillJumps(f *Flow, jumps []skipGap, psn, end packet.PSN, closed func(*skipGap)) []skipGap {
	for i := 0; i < len(jumps); {
		j := &jumps[i]
		lo, hi := psn, end
		if lo.Before(j.psn) {
			lo = j.psn
		}
		if last := j.psn.Add(j.n - 1); hi.After(last) {
			hi = last
		}
		if lo.After(hi) {
			i++
			continue
		}
		if j.got == nil {
			j.got = map[packet.PSN]bool{}
			h.a.lateGot[Ref{j.frame, j.seg}] = j.got
		}
		for q := lo; ; q = q.Next() {
			if !j.got[q] {
				j.got[q] = true
				f.PSNMissing--
			}
			if q == hi {
				break
			}
		}
		note := h.a.note(Ref{j.frame, j.seg})
		if len(j.got) < j.n {
			first, last := j.psn, j.psn.Add(j.n-1)
			for j.got[first] {
				first = first.Next()
			}
			for j.got[last] {
				last = last.Add(-1)
			}
			note.Gap, note.GapPSN = int(last.Diff(first))+1, uint32(first)
			i++
			continue
		}
		f.dropGap(j.frame)
		note.Gap, note.GapPSN = 0, 0
		closed(j)
		jumps = slices.Delete(jumps, i, i+1)
	}
	return jumps
}

// lateRequest handles a request that came late (h.late): it fills its
// gap, counts its goodput and the messages it completes, and leaves the
// request stream where it was, since later PSNs were already seen. It is
// no rewind and opens no recovery episode.
func (h *half) lateRequest(f *Flow, r *rec, end packet.PSN) {
	f.PSNLate++
	h.fill(r.psn, end)
	if n, known := h.span(r); known {
		h.asked(r.psn, n)
	}
	h.skipped.remove(r.psn, 1)
	h.message(f, r, end)
	if r.mask&packet.MaskRead != 0 {
		if n, known := h.span(r); known {
			h.openRead(r.psn, n)
		}
		h.readStarts[r.psn] = true
	}
	h.goodput(r)
	if end.After(h.high) {
		h.high = end
	}
	if len(h.jumps) == 0 && !h.sr {
		h.ahead = nil
	}
}

// request handles a packet of the requester; last is the time of the
// connection's previous packet.
func (h *half) request(r *rec, last time.Time) {
	f := h.req
	n, known := h.span(r)
	end := r.psn.Add(n - 1)
	_, dup := h.reqSeen[r.psn]
	if !dup {
		h.reqSeen[r.psn] = seen{r.frame, r.seg, r.t}
	}
	if h.started && r.psn.Diff(h.prevEnd) <= 0 && h.late(r, dup, last) {
		h.lateRequest(f, r, end)
		return
	}
	rewound := false
	if h.started {
		switch {
		case r.psn.Diff(h.prevEnd) <= 0:
			f.PSNRewinds++
			rewound = true
			h.rewind(r, last, true)
			h.closeJumps(r.psn)
		case r.psn.After(h.expected) && !h.spanUnknown:
			if r.psn.After(h.high.Next()) {
				from, gap := h.high.Next(), int(r.psn.Diff(h.high.Next()))
				h.req.gapAt(r.frame, gap)
				n := h.a.note(r.ref())
				n.Gap, n.GapPSN = gap, uint32(from)
				j := skipGap{frame: r.frame, seg: r.seg, n: gap, psn: from}
				if h.gap == nil {
					h.gap = &evidence{frame: r.frame, t: r.t}
					j.evidence = true
				}
				if len(h.jumps) == maxSkips {
					h.jumps = slices.Delete(h.jumps, 0, 1)
				}
				h.jumps = append(h.jumps, j)
				if len(h.unasked) == maxSkips {
					h.unasked = slices.Delete(h.unasked, 0, 1)
				}
				h.unasked = append(h.unasked, psnRange{from, gap})
			} else if h.sr {
				// Selective repeat resends only the holes: a resend
				// round skips what arrived.
				if h.ep != nil && h.ep.Cause == CauseUnknown {
					h.setCause(CauseSelective)
				}
			} else if h.prevReread && (r.psn == h.high.Next() || r.mask&packet.MaskRead != 0) {
				// A requester that re-read only a hole of its READs
				// (selective repeat between gorxe ends,
				// docs/sr-requester.md) re-reads the next hole or goes
				// on at the frontier, past the READs answered or still
				// being answered; a go-back-N requester re-reads to the
				// end of the READ and then sends every later request
				// again, in order (rxe req_retry).
			} else if h.seqNAK.frame == 0 || r.psn != h.seqNAK.psn || h.ep != nil && h.seqNAK.frame < h.ep.RewindFrame {
				// Go-back-N resends in PSN order (rxe req_retry): the
				// PSNs a resend round skips were lost before the capture
				// point, their copies from before the rewind having been
				// discarded behind the first hole (IBA 9.7.5.1.1). A
				// round that goes on at the PSN of a sequence NAK that
				// came during it went there on the NAK: the responder has
				// what it skipped. So has it the PSNs an ACK in the
				// capture acknowledged, and a probe's requester skips
				// those (or, if its ACK is still to come, PSNs that ACK
				// acknowledges: h.ack takes the gap back).
				from := h.expected
				if h.ackOK && !h.acked.Before(from) {
					from = h.acked.Next()
					if r.psn.Before(from) {
						from = r.psn
					}
				}
				if n := int(r.psn.Diff(from)); n > 0 {
					h.skipGap(r, from, n)
				}
				if r.psn == h.high.Next() && h.ep != nil && h.ep.Resent == 1 && h.ep.Rounds == 1 {
					// One packet resent, then on at the frontier: a
					// probe, which asks for an ACK without going back.
					h.ep.Probe = true
					if h.ep.Cause == CauseUnknown {
						h.setCause(CauseProbe)
					}
				}
			}
		}
	}
	h.skipped.remove(r.psn, 1)
	h.holes = slices.DeleteFunc(h.holes, func(x holeReport) bool { return x.psn == r.psn })
	if h.ep != nil && !r.psn.After(h.highAtStart()) {
		h.ep.Resent++
		h.ep.LastFrame = r.frame
	}
	h.message(f, r, end)
	// A request at or below the highest PSN requested so far is a resend
	// (new requests only go past it): a re-read is no new message, unless
	// no request in the capture asked for its span before. Then it is the
	// READ itself, its first copy lost before the capture point (or it came
	// after a later READ, and a NAK or timeout since rules out a late
	// arrival). The responder never executed its PSNs (its expected PSN is
	// at or before them, IBA 9.7.5.1.1), so it answers it as a new READ,
	// and those responses are the READ's message.
	reread := r.mask&packet.MaskRead != 0 && h.started && !r.psn.After(h.high)
	if r.mask&packet.MaskRead != 0 {
		if known && (!reread || h.firstAsk(r.psn, n)) {
			h.openRead(r.psn, n)
		}
		if reread {
			h.markReread(r.psn)
		}
		h.readStarts[r.psn] = true
	}
	h.asked(r.psn, n)
	if !dup {
		h.goodput(r)
	} else {
		h.a.note(r.ref()).Resent = true
	}
	if !dup && !rewound && (r.ackReq || r.mask&(packet.MaskRead|packet.MaskAtomic) != 0) {
		h.pend = append(h.pend, pending{r.psn, r.t})
	}
	if !h.started || end.After(h.high) {
		h.high = end
	}
	if !h.started {
		h.firstReq = r.psn
	}
	h.prevReread = reread
	h.started = true
	h.prevEnd, h.expected, h.spanUnknown = end, end.Next(), !known
}

// message counts the messages of the request stream as the responder
// would accept them: a packet is accepted when its PSN is the responder's
// expected PSN (ePSN), which only accepted packets advance (IBA 9.7.5.1.1);
// a message is complete when its FIRST..LAST or ONLY were accepted. Under
// selective repeat (h.sr) a request after ePSN, within the responder's
// window, is kept as the responder keeps it, and accepted in PSN order once
// the packets before it were (the responder's drain of its out-of-order
// buffer); a copy of a PSN already kept is ignored, as the responder drops
// it. Without it, requests after ePSN are kept so while a jump ahead's gap
// may still get late requests (h.jumps), and forgotten when the requester
// goes back (closeJumps).
func (h *half) message(f *Flow, r *rec, end packet.PSN) {
	switch {
	case !h.started, r.psn == h.ePSN:
	case h.spanUnknown && r.psn.After(h.ePSN): // after a READ of unknown span
	default:
		// Requests past a forward jump are kept too while its PSNs may
		// still come late: they are accepted once the late ones came.
		if (h.sr || len(h.jumps) > 0) && r.psn.After(h.ePSN) && r.psn.Diff(h.ePSN) < srAhead {
			if h.ahead == nil {
				h.ahead = map[packet.PSN]aheadReq{}
			}
			if _, ok := h.ahead[r.psn]; !ok {
				h.ahead[r.psn] = aheadReq{r.mask, end}
			}
		}
		return
	}
	h.accept(f, r.psn, r.mask, end)
	for len(h.ahead) > 0 {
		a, ok := h.ahead[h.ePSN]
		if !ok {
			break
		}
		h.accept(f, h.ePSN, a.mask, a.end)
	}
}

// accept advances ePSN past a request accepted in order at psn, with
// opcode mask and last PSN end, counts the message it completes, and
// forgets the kept requests from psn to end: ePSN has passed them (the
// request itself, or PSNs inside a READ's span), so every kept request
// stays ahead of ePSN and none is taken for the one 2^24 PSNs later.
func (h *half) accept(f *Flow, psn packet.PSN, mask packet.Mask, end packet.PSN) {
	if len(h.ahead) > 0 {
		if n := end.Diff(psn); n < 0 || int(n) >= len(h.ahead) {
			for q := range h.ahead {
				if q.Diff(psn) >= 0 && !q.After(end) {
					delete(h.ahead, q)
				}
			}
		} else {
			for q := psn; ; q = q.Next() {
				delete(h.ahead, q)
				if q == end {
					break
				}
			}
		}
	}
	h.ePSN = end.Next()
	switch {
	case mask&packet.MaskStart != 0 && mask&packet.MaskEnd != 0:
		f.Messages++
		h.msgOpen = false
	case mask&packet.MaskStart != 0:
		h.msgOpen = true
	case mask&packet.MaskEnd != 0 && h.msgOpen:
		f.Messages++
		h.msgOpen = false
	}
}

// setCause gives the open episode cause c, on the episode and on the note
// of its first resent packet alike (the ladder labels that packet with
// it), once later packets have shown why the requester went back.
func (h *half) setCause(c Cause) {
	h.ep.Cause = c
	h.a.note(Ref{h.ep.RewindFrame, h.ep.rewindSeg}).Cause = c
}

// highAtStart is the highest PSN sent before the open episode.
func (h *half) highAtStart() packet.PSN { return packet.PSN(h.ep.HighPSN) }

// rewind opens an episode, or adds a round to the open one, for a resent
// packet r (a request when isReq, else a READ response). A request that
// goes back again to the open episode's last rewind PSN or before is a new
// round of the same episode; a later one starts a new episode. A resent
// READ response opens an episode only when the capture holds no requests
// (their re-read is what counts; the capture may even record the answer
// before the request when both ends share it).
func (h *half) rewind(r *rec, last time.Time, isReq bool) {
	if !isReq && h.started {
		return
	}
	if h.ep != nil && !r.psn.After(h.epRound) && !r.psn.Before(h.epLo) {
		h.ep.Rounds++
		h.epRound = r.psn
		h.a.note(r.ref()).Resent = true
		h.dropPending(r.psn)
		return
	}
	h.closeEpisode()
	high := h.high
	if !isReq && h.rHigh.After(high) {
		high = h.rHigh
	}
	ep := &Recovery{Requester: h.req.Src, RewindFrame: r.frame, rewindSeg: r.seg, PSN: uint32(r.psn), HighPSN: uint32(high),
		Rounds: 1, Read: r.mask&packet.MaskRead != 0 || !isReq, FirstFrame: r.frame, LastFrame: r.frame, start: r.t}
	silence := r.t.Sub(last)
	// A requester resends a reported hole at once; after a silence as
	// long as a timeout it resends on its timer (the copy the report
	// asked for may have been lost, or corrupted: a bad ICRC takes no
	// part here).
	if i := slices.IndexFunc(h.holes, func(x holeReport) bool { return x.psn == r.psn }); h.why == nil && isReq && i >= 0 && silence < h.silenceThreshold() {
		h.why = h.holes[i].ev
	}
	// A first transmission counts only if the capture holds it before the
	// trouble began: a capture that records a datagram once its write
	// returned may hold the answer to the resent request before the
	// request itself.
	cutoff := r.frame
	if h.why != nil {
		cutoff = h.why.frame
	}
	switch {
	case h.why != nil:
		ep.Cause, ep.RNRTimer = h.why.cause, h.why.rnrTimer
		ep.FirstFrame, ep.start = h.why.frame, h.why.t
	case silence >= h.silenceThreshold():
		ep.Cause, ep.Silence = CauseTimeout, Duration(silence)
		if isReq {
			h.missed(r.psn)
		}
	case isReq && r.mask&packet.MaskRead != 0 && (h.insideRead(r.psn) || h.rStarted && h.rHigh.After(r.psn)):
		ep.Cause = CauseImpliedNAK
	default:
		ep.Cause = CauseUnknown
	}
	// The first evidence: a gap, or the lost PSN's first transmission.
	first := seen{frame: ep.FirstFrame, t: ep.start}
	if h.gap != nil && h.gap.frame < first.frame {
		first = seen{frame: h.gap.frame, t: h.gap.t}
	}
	src := h.reqSeen
	if !isReq || r.mask&packet.MaskRead != 0 {
		src = h.respSeen
	}
	if s, ok := src[r.psn]; ok && s.frame < first.frame && s.frame < cutoff {
		first = s
	}
	ep.FirstFrame, ep.start = first.frame, first.t
	// An ACK in the capture had acknowledged the request: the responder
	// had it, and the ACK was lost after the capture point or came after
	// the requester's timer fired. (A re-read's answer is its READ
	// response, which the capture's copy already accounts for.)
	if isReq && r.mask&packet.MaskRead == 0 && h.ackOK && !r.psn.After(h.acked) {
		ep.AckedFrame = h.ackFrame
	}
	// Otherwise the capture's copy tells of a loss after the capture point
	// unless a go-back-N round since skipped the PSN: its last copy then
	// never reached the capture.
	if s, ok := src[r.psn]; ok && s.frame < cutoff && !(isReq && h.skipped.has(r.psn)) {
		ep.FirstSentFrame = s.frame
		if ep.Cause != CauseRNR && ep.AckedFrame == 0 {
			h.a.note(Ref{s.frame, s.seg}).LostAfter = true
		}
	}
	h.ep, h.epLo, h.epRound = ep, r.psn, r.psn
	n := h.a.note(r.ref())
	n.Resent, n.Cause, n.Silence = true, ep.Cause, time.Duration(ep.Silence)
	h.gap, h.why = nil, nil
	h.dropPending(r.psn)
}

// skipGap counts a gap of n PSNs from psn that the request r skipped
// (lost before the capture point unless an ACK later takes it back) and
// keeps its PSNs in h.skipped until they are seen again.
func (h *half) skipGap(r *rec, psn packet.PSN, n int) {
	sg := skipGap{frame: r.frame, seg: r.seg, n: n, psn: psn}
	h.req.gapAt(r.frame, n)
	note := h.a.note(r.ref())
	note.Gap, note.GapPSN = n, uint32(psn)
	if h.gap == nil {
		h.gap = &evidence{frame: r.frame, t: r.t}
		sg.evidence = true
	}
	h.skipped.add(psn, offset(psn, r.psn))
	if len(h.skips) == maxSkips {
		h.skips = slices.Delete(h.skips, 0, 1)
	}
	h.skips = append(h.skips, sg)
}

// ack records an ACK (an AETH with an ACK syndrome: an ACK packet, a READ
// response's or an atomic ACK) of every PSN up to r.psn (IBA 9.7.5.1.2)
// and takes back the skipped gaps it acknowledges whole when the
// responder never showed it missed one of their PSNs (no NAK into the
// gap, no resend of one after a timeout): it had them, and the requester
// that skipped them was probing (a probe of one of them does not count).
func (h *half) ack(r *rec) {
	if !h.ackOK || r.psn.After(h.acked) {
		h.acked, h.ackFrame, h.ackOK = r.psn, r.frame, true
	}
	h.skips = slices.DeleteFunc(h.skips, func(sg skipGap) bool {
		last := sg.psn.Add(sg.n - 1)
		if r.psn.Before(last) {
			return false
		}
		if sg.missed {
			return true // the gap stands
		}
		h.skipped.remove(sg.psn, sg.n)
		f := h.req
		f.dropGap(sg.frame)
		f.PSNMissing -= sg.n
		if n := h.a.notes[Ref{sg.frame, sg.seg}]; n != nil {
			n.Gap, n.GapPSN = 0, 0
		}
		if sg.evidence && h.gap != nil && h.gap.frame == sg.frame {
			h.gap = nil
		}
		return true
	})
}

// psnRange is n PSNs from psn.
type psnRange struct {
	psn packet.PSN
	n   int
}

// firstAsk reports whether no request in the capture asked for any of the
// n PSNs from psn up to the highest requested: they lie in one gap of
// h.unasked. A re-read repeats PSNs a request asked for (rxe req_retry
// resends from the PSN it waits for; a selective-repeat hole is inside a
// READ's span), so it is never one.
func (h *half) firstAsk(psn packet.PSN, n int) bool {
	k := min(int64(n), int64(h.high.Diff(psn))+1)
	for _, u := range h.unasked {
		if off := int64(psn.Diff(u.psn)); off >= 0 && off+k <= int64(u.n) {
			return true
		}
	}
	return false
}

// asked takes the n PSNs from psn, which a request asked for, out of the
// gaps of h.unasked.
func (h *half) asked(psn packet.PSN, n int) {
	for i := 0; i < len(h.unasked); i++ {
		u := h.unasked[i]
		lo := int64(psn.Diff(u.psn)) // the request's span from u.psn
		hi := lo + int64(n)
		if hi <= 0 || lo >= int64(u.n) {
			continue
		}
		var rest []psnRange
		if lo > 0 {
			rest = append(rest, psnRange{u.psn, int(lo)})
		}
		if hi < int64(u.n) {
			rest = append(rest, psnRange{u.psn.Add(int(hi)), u.n - int(hi)})
		}
		h.unasked = slices.Replace(h.unasked, i, i+1, rest...)
		i += len(rest) - 1
	}
}

// readOf is the index in h.reads of the READ whose span holds psn, or -1.
func (h *half) readOf(psn packet.PSN) int {
	for i, rd := range h.reads {
		if !psn.Before(rd.first) && !psn.After(rd.end) {
			return i
		}
	}
	return -1
}

// openRead starts waiting for the responses of a READ of n PSNs from psn.
func (h *half) openRead(psn packet.PSN, n int) {
	if len(h.reads) == maxOpenReads {
		h.reads = slices.Delete(h.reads, 0, 1)
	}
	h.reads = append(h.reads, &readMsg{first: psn, end: psn.Add(n - 1), missing: n})
}

// coverRead records a READ response at psn against the awaited READ whose
// span holds it, if any, and reports whether that completed the READ.
func (h *half) coverRead(psn packet.PSN) bool {
	i := h.readOf(psn)
	if i < 0 {
		return false
	}
	rd := h.reads[i]
	if rd.got == nil {
		rd.got = map[packet.PSN]bool{}
	}
	if !rd.got[psn] {
		rd.got[psn] = true
		rd.missing--
	}
	if rd.missing > 0 {
		return false
	}
	h.reads = slices.Delete(h.reads, i, i+1)
	return true
}

// markReread records that a READ request re-read from psn: the awaited
// READ whose span holds psn is read again from there, so its responses
// from psn on that come after are the responder's answer to the re-read,
// not late arrivals (responseLate).
func (h *half) markReread(psn packet.PSN) {
	i := h.readOf(psn)
	if i < 0 {
		return
	}
	rd := h.reads[i]
	if !rd.reread || psn.Before(rd.rereadFrom) {
		rd.reread, rd.rereadFrom = true, psn
	}
}

// insideRead reports whether psn lies inside an earlier READ's responses
// but is not that READ's first PSN: a re-read of the rest, after the
// requester saw a later response than the one it waited for.
func (h *half) insideRead(psn packet.PSN) bool {
	if h.readStarts[psn] {
		return false
	}
	for p := range h.readStarts {
		if psn.After(p) && !psn.After(h.high) {
			return true
		}
	}
	return false
}

// silenceThreshold is the quiet time that makes a rewind a timeout.
func (h *half) silenceThreshold() time.Duration {
	if h.silence > 0 {
		return h.silence
	}
	t := time.Millisecond
	if len(h.rtts) > 0 {
		s := slices.Clone(h.rtts)
		slices.Sort(s)
		t = max(t, 4*median(s))
	}
	return t
}

// dropPending forgets the RTT samples of resent PSNs (Karn's rule).
func (h *half) dropPending(from packet.PSN) {
	h.pend = slices.DeleteFunc(h.pend, func(p pending) bool { return !p.psn.Before(from) })
}

// closeEpisode records the open episode.
func (h *half) closeEpisode() {
	if h.ep == nil {
		return
	}
	ep := *h.ep
	var endT time.Time
	for i := range h.a.recs { // the time of LastFrame
		if h.a.recs[i].frame == ep.LastFrame {
			endT = h.a.recs[i].t
			break
		}
	}
	ep.Duration = Duration(endT.Sub(ep.start))
	h.c.Recoveries = append(h.c.Recoveries, ep)
	h.ep = nil
}

// isReadResponse reports whether op is an RC or RD READ response.
func isReadResponse(op packet.Opcode) bool {
	switch op {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle, packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly,
		packet.RDRDMAReadResponseFirst, packet.RDRDMAReadResponseMiddle, packet.RDRDMAReadResponseLast, packet.RDRDMAReadResponseOnly:
		return true
	}
	return false
}

// response handles a packet of the responder; last is the time of the
// connection's previous packet.
func (h *half) response(r *rec, last time.Time) {
	f := h.resp
	if f == nil {
		f = h.req // responses whose requests the capture does not hold
	}
	if r.mask&packet.MaskAETH != 0 {
		if r.syn.IsACK() {
			h.ack(r)
		} else {
			h.nak(f, r)
		}
	}
	_, dup := h.respSeen[r.psn]
	if !dup && isReadResponse(r.op) {
		h.respSeen[r.psn] = seen{r.frame, r.seg, r.t}
	}
	if h.ep != nil && !r.psn.Before(h.epLo) && !r.psn.After(h.highAtStart()) {
		h.ep.LastFrame = r.frame
	}
	if r.mask&packet.MaskStart != 0 {
		h.sample(r)
	}
	if !isReadResponse(r.op) {
		return
	}
	first := r.mask&packet.MaskStart != 0
	byRequest := h.pmtu > 0 && h.started && !r.psn.Before(h.firstReq)
	switch {
	case !h.rStarted:
	case !r.psn.After(h.rPrev) && h.responseLate(r, dup, last):
		h.lateResponse(f, r, byRequest)
		return
	case !r.psn.After(h.rPrev):
		f.PSNRewinds++
		h.rewind(r, last, false)
		if !dup {
			// The responder starts again at r.psn: the gaps from there
			// on stand, their PSNs lost before the capture point.
			h.rJumps = dropJumpsFrom(h.rJumps, r.psn)
		}
	case r.psn.After(h.rPrev.Next()) && (!first || h.rOpen):
		// Past the highest response, only the PSNs after it are missing
		// (those up to it were seen, or counted in an earlier gap);
		// inside a resent run of responses, the ones it skips.
		from := h.rPrev.Next()
		if r.psn.After(h.rHigh) && h.rHigh.After(h.rPrev) {
			from = h.rHigh.Next()
		}
		if skip := int(r.psn.Diff(from)); skip > 0 && (r.psn.After(h.rHigh.Next()) || !first) {
			f.gapAt(r.frame, skip)
			n := h.a.note(r.ref())
			n.Gap, n.GapPSN = skip, uint32(from)
			j := skipGap{frame: r.frame, seg: r.seg, n: skip, psn: from, evidence: true, prev: h.why}
			h.why = &evidence{cause: CauseImpliedNAK, frame: r.frame, t: r.t}
			if r.psn.After(h.rHigh) {
				if len(h.rJumps) == maxSkips {
					h.rJumps = slices.Delete(h.rJumps, 0, 1)
				}
				h.rJumps = append(h.rJumps, j)
			}
		}
	}
	h.rMid = r.mask&packet.MaskEnd == 0
	inOrder := !h.rStarted || r.psn == h.rPrev.Next()
	// A READ whose request the capture holds is one message once its whole
	// span was answered (coverRead); one whose request it does not hold
	// (sent before the capture began) or whose span is unknown (no PMTU),
	// once FIRST..LAST came in order.
	if h.coverRead(r.psn) {
		f.Messages++
	}
	switch {
	case first && r.mask&packet.MaskEnd != 0:
		if !byRequest {
			f.Messages++
		}
		h.rOpen = false
	case first:
		h.rOpen = true
	case r.mask&packet.MaskEnd != 0:
		if h.rOpen && inOrder && !byRequest {
			f.Messages++
		}
		h.rOpen = false
	case !inOrder:
		h.rOpen = false
	}
	if !dup {
		h.goodput(r)
	} else if isReadResponse(r.op) {
		h.a.note(r.ref()).Resent = true
	}
	if !h.rStarted || r.psn.After(h.rHigh) {
		h.rHigh = r.psn
	}
	h.rStarted = true
	h.rPrev = r.psn
}

// responseLate reports whether the READ response r, at or below the
// previous response's PSN, came late (reordered on the way) rather than
// as a retransmission or the responder starting again: its PSN is new to
// the capture (dup false), the connection was not silent long enough for
// a timeout, and either
//   - it lies in the span of a READ still waiting for it that was not read
//     again from its PSN or before (a re-read's answer starts again there),
//     and, if it starts a response message (FIRST or ONLY), at that READ's
//     first PSN: a response message that starts inside a READ's span
//     answers a READ request from there, a re-read whose record the capture
//     may hold after its answer; or
//   - no awaited READ holds it (its request is not in the capture, or its
//     span is unknown), it lies in a gap still open from a jump ahead, and
//     it is a MIDDLE or LAST, or follows a FIRST or MIDDLE: a responder
//     finishes one READ's responses before it answers another request, so
//     it cannot start again in the middle of one.
func (h *half) responseLate(r *rec, dup bool, last time.Time) bool {
	if dup || r.t.Sub(last) >= h.silenceThreshold() {
		return false
	}
	start := r.mask&packet.MaskStart != 0
	if i := h.readOf(r.psn); i >= 0 {
		rd := h.reads[i]
		if rd.reread && !r.psn.Before(rd.rereadFrom) {
			return false
		}
		return !start || r.psn == rd.first
	}
	for i := range h.rJumps {
		j := &h.rJumps[i]
		if j.holds(r.psn) && !j.got[r.psn] {
			return !start || h.rMid
		}
	}
	return false
}

// lateResponse handles a READ response that came late (responseLate): it
// fills its gap, counts its goodput and the message it completes, and
// leaves the response stream where it was, since later PSNs were already
// seen. It is no rewind and opens no recovery episode. A gap that got all
// its PSNs is no longer the half's evidence of an implied NAK: the one it
// replaced is again.
func (h *half) lateResponse(f *Flow, r *rec, byRequest bool) {
	f.PSNLate++
	h.rJumps = h.fillJumps(f, h.rJumps, r.psn, r.psn, func(j *skipGap) {
		if j.evidence && h.why != nil && h.why.frame == j.frame && h.why.cause == CauseImpliedNAK {
			h.why = j.prev
		}
	})
	if h.coverRead(r.psn) || !byRequest && r.mask&packet.MaskStart != 0 && r.mask&packet.MaskEnd != 0 {
		f.Messages++
	}
	h.goodput(r)
}

// nak counts a NAK or RNR NAK and keeps it as evidence.
func (h *half) nak(f *Flow, r *rec) {
	ev := &evidence{frame: r.frame, t: r.t}
	switch {
	case r.syn.IsRNR():
		f.NAKs.RNR++
		if !slices.Contains(f.NAKs.RNRTimers, r.syn.Value()) {
			f.NAKs.RNRTimers = append(f.NAKs.RNRTimers, r.syn.Value())
		}
		ev.cause, ev.rnrTimer = CauseRNR, r.syn.Value()
	case r.syn.IsNAK() && r.syn.NAKCode() == packet.NAKPSNSeqError:
		f.NAKs.SequenceError++
		ev.cause = CauseSequenceNAK
	case r.syn.IsNAK() && r.syn.NAKCode() == packet.NAKSelectiveRepeat:
		// A hole report of negotiated selective repeat: the responder
		// asks for one hole again, or (equal PSNs) says how far it has
		// received; the QP carries on.
		if uint32(r.psn) == r.msn&packet.PSNMask {
			f.NAKs.ProgressReports++
			return
		}
		f.NAKs.HoleReports++
		h.missed(r.psn)
		// The requester resends the hole's PSNs on it: the evidence
		// of the selective resend of that PSN, and of no other rewind
		// (the responder reports a hole again until it is filled).
		if !slices.ContainsFunc(h.holes, func(x holeReport) bool { return x.psn == r.psn }) {
			if len(h.holes) == maxSkips {
				h.holes = slices.Delete(h.holes, 0, 1)
			}
			ev.cause = CauseSelective
			h.holes = append(h.holes, holeReport{r.psn, ev})
		}
		return
	case r.syn.IsNAK():
		switch r.syn.NAKCode() {
		case packet.NAKRemoteAccess:
			f.NAKs.RemoteAccess++
		case packet.NAKInvalidRequest:
			f.NAKs.InvalidRequest++
		case packet.NAKRemoteOperation:
			f.NAKs.RemoteOperation++
		default:
			f.NAKs.Other++
		}
		h.fatal = append(h.fatal, fatalNAK{r.frame, r.psn, r.syn.NAKCode()})
		return
	default:
		f.NAKs.Other++
		return
	}
	if ev.cause == CauseSequenceNAK {
		h.seqNAK = seqNAKAt{psn: r.psn, frame: r.frame}
		h.missed(r.psn)
	}
	if h.why == nil {
		h.why = ev
	}
}

// sample takes an RTT sample for the request a response answers.
func (h *half) sample(r *rec) {
	if r.mask&packet.MaskAETH != 0 && !r.syn.IsACK() {
		return
	}
	n := 0
	for n < len(h.pend) && !h.pend[n].psn.After(r.psn) {
		if h.pend[n].psn == r.psn {
			h.rtts = append(h.rtts, r.t.Sub(h.pend[n].t))
		}
		n++
	}
	h.pend = h.pend[n:]
}

// goodput adds r's payload to its interval.
func (h *half) goodput(r *rec) {
	if r.payload == 0 {
		return
	}
	// Times are monotonic (Clock) and the interval covers the capture in
	// fewer than MaxIntervals intervals, so i lies in 0..MaxIntervals-1;
	// the clamp keeps a broken invariant from panicking or growing the
	// report.
	i := min(max(int(r.t.Sub(h.c.start)/h.interval), 0), MaxIntervals-1)
	for len(h.c.Goodput) <= i {
		h.c.Goodput = append(h.c.Goodput, Interval{Start: Duration(time.Duration(len(h.c.Goodput)) * h.interval)})
	}
	iv := &h.c.Goodput[i]
	iv.Bytes += r.payload
	iv.Gbps = float64(iv.Bytes) * 8 / h.interval.Seconds() / 1e9
}

// summarise computes min, median and max of samples.
func summarise(s []time.Duration) RTT {
	if len(s) == 0 {
		return RTT{}
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return RTT{Samples: len(s), Min: Duration(s[0]), Median: Duration(median(s)), Max: Duration(s[len(s)-1])}
}

// median is the median of sorted, which is not empty: its middle sample,
// or for an even number of samples the mean of the two middle ones
// (rounded toward the smaller), taken without adding them so that it
// cannot overflow.
func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	lo, hi := sorted[n/2-1], sorted[n/2]
	return lo + (hi-lo)/2
}

// gapAt counts a gap of n PSNs at frame.
func (f *Flow) gapAt(frame, n int) {
	f.PSNGaps++
	f.PSNMissing += n
	f.gapFrames = append(f.gapFrames, frame)
	f.FirstGapFrame = f.gapFrames[0]
}

// dropGap takes back a gap counted at frame (its PSNs are taken back by
// the caller): PSNGaps, and FirstGapFrame, which becomes the first gap
// that still stands.
func (f *Flow) dropGap(frame int) {
	f.PSNGaps--
	if i, ok := slices.BinarySearch(f.gapFrames, frame); ok {
		f.gapFrames = slices.Delete(f.gapFrames, i, i+1)
	}
	f.FirstGapFrame = 0
	if len(f.gapFrames) > 0 {
		f.FirstGapFrame = f.gapFrames[0]
	}
}

// note returns the Note of the packet ref, creating it.
func (a *Analyzer) note(ref Ref) *Note {
	n := a.notes[ref]
	if n == nil {
		n = &Note{}
		a.notes[ref] = n
	}
	return n
}

// ref is the frame and segment of r.
func (r *rec) ref() Ref { return Ref{r.frame, r.seg} }
