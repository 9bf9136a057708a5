package requester

import (
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Selective repeat (Config.SelectiveRepeat; docs/sr-requester.md): the
// responder buffers out-of-order requests, executes them in PSN order and
// reports holes with packet.NAKSelectiveRepeat; the requester resends only
// the PSNs reported, places READ responses where they belong whatever
// their order, and re-reads only the ranges missing.

const (
	// srTrack is how many PSNs from the oldest unacknowledged one the
	// requester tracks under selective repeat: responses received (a
	// bitmap) and resend times (a ring). Responses further ahead are
	// dropped and asked for again once the oldest PSN has moved.
	srTrack = 4096

	// srReorder is the reorder threshold: a READ response or atomic
	// acknowledgement is taken as lost once a response for a PSN this far
	// after it has arrived (RACK's idea, RFC 8985; reordering by one or two
	// PSNs is not loss).
	srReorder = 3

	// srHoldPackets is the reorder threshold of a hole the responder
	// reports: its resends wait until the responder reports received
	// the request packet this many request packets after the one at the
	// hole's start (srThreshold), so a request overtaken by up to three
	// later ones, which fills its hole before that, is not resent. The
	// responder reports it at once (responder.SRReorderPackets).
	srHoldPackets = 4
)

// srSlot is the resend state of one PSN: whether it is due to be resent,
// when it was last resent (a selective.stamp, 0 never), how often, how
// often its resend was found lost (srRecheck, srResendLost,
// srStreamsLost), and what had been sent by then.
type srSlot struct {
	psn   packet.PSN
	due   bool
	tries uint8
	lost  uint8
	at    int64
	// next is the first PSN not yet sent when psn was last resent: the
	// packets from it on left after the resend (srResendLost).
	next packet.PSN
	// stream is the number of the extra-stream re-read that last asked
	// for the READ response psn (srstreams.go), 0 if its last resend was
	// none.
	stream uint32
}

// srMaxBackoff is how many times a PSN's resend interval doubles.
const srMaxBackoff = 1

// sent records that the PSN of sl was resent at at (a selective.stamp).
func (sl *srSlot) sent(at int64) {
	sl.at = at
	sl.tries = min(sl.tries+1, srMaxBackoff+1)
}

// stamp returns now as the int64 the resend state keeps: nanoseconds since
// epoch (the first time stamped), plus one, so that 0 still means never.
// It is not now.UnixNano: that is the wall clock, which NTP, a resumed VM
// or date -s step back and forth, while the requester's times carry the
// monotonic clock, and a deadline made with time.Unix from it has no
// monotonic reading, so Before, Sub and time.Until compare it with now on
// the wall clock (package time, "Monotonic Clocks"). A difference of two
// stamps, and timeAt of one, keep the monotonic clock of the times given.
func (s *selective) stamp(now time.Time) int64 {
	if s.epoch.IsZero() {
		s.epoch = now
	}
	return max(int64(now.Sub(s.epoch)), 0) + 1
}

// timeAt returns the time of the stamp at (not 0), with the monotonic
// reading of the times stamped.
func (s *selective) timeAt(at int64) time.Time { return s.epoch.Add(time.Duration(at - 1)) }

// selective is the requester's selective-repeat state.
type selective struct {
	// got has the bit of each READ response or atomic acknowledgement PSN
	// received and not yet passed by the oldest unacknowledged PSN, indexed
	// by PSN mod srTrack; ngot counts the bits set.
	got  [srTrack / 64]uint64
	ngot int
	// base is the oldest unacknowledged PSN the state was last synced to
	// (srSync): nothing before it is tracked.
	base packet.PSN
	// slots is the per-PSN resend state (allocated at the first resend);
	// ndue counts the due slots, none of them before dueLo.
	slots []srSlot
	ndue  int
	dueLo packet.PSN
	// done: the responder has executed every request before it (an ACK is
	// cumulative, and a response proves the requests before its own).
	done packet.PSN
	// high is one past the highest PSN answered by a response to a request
	// as first sent (or an ACK): responses come in PSN order, so a PSN
	// srReorder before it is lost. rrAt is the time of the latest re-read
	// (or atomic resent) answered (srAnswerOf: a response sooner than a
	// round trip after its PSN's last re-read counts for none), rrHigh one
	// past the highest PSN answered by it: the responder sends a re-read's
	// stream ahead of the responses it had queued, so a re-read PSN is
	// lost only when a later re-read was answered, or srReorder later PSNs
	// of the same one (srLost).
	high   packet.PSN
	rrAt   int64
	rrHigh packet.PSN
	// scanned: response holes before it have been looked at (srDetect);
	// rescan is when they are looked at again from the oldest PSN.
	scanned packet.PSN
	rescan  int64
	// epoch is the first time stamped: the times above (slot at, rrAt,
	// rescan) count from it (stamp).
	epoch time.Time
	// hint is the WQE index where the last PSN lookup ended.
	hint uint64
	// rereadPkts is set while a re-read is built: the packets it asks
	// for; forceAck while a resend that must ask for an ACK is built.
	rereadPkts uint32
	forceAck   bool
	// probeHigh is the next PSN to send when the last probe was built.
	probeHigh packet.PSN
	// tail is the READ response PSN a one-response probe asked for again
	// while tailOut (srProbe): its answer comes after every response of
	// its READ part before it, so it raises high (srResponded).
	tail    packet.PSN
	tailOut bool
	// hold keeps the resends of a hole report back for a reorder window
	// (srReorderWindow): a request merely overtaken by the ones after it
	// fills the hole in that time, and the cumulative ACK that follows
	// takes its PSNs off the list.
	hold retry.Deadline
	// holdByPackets: the hold ends, before its deadline, once held is
	// after holdFor (srHeldBack).
	holdByPackets bool
	holdFor       packet.PSN
	// recheck is when the oldest resent request packet is taken as lost
	// if still unacknowledged (srRecheck); nresent counts the slots of
	// resent PSNs, none of them before resentLo.
	recheck  retry.Deadline
	nresent  int
	resentLo packet.PSN
	// watch is when the READ part starting at watchPSN, asked for and
	// with every request before it answered, is taken as lost if none of
	// its responses came (srWatchRead); watchDeferred: its expiry was
	// timed again once for lateness.
	watch         retry.Deadline
	watchPSN      packet.PSN
	watchDeferred bool
	// watchAhead is when (a stamp; 0 never) the latest response to a PSN
	// before watchPSN came while the watch was armed: the responder was
	// still sending a stream queued ahead of the watched part's train
	// (srWatchExpired).
	watchAhead int64
	// watchCheck: the part [watchPSN, watchEnd) was re-read by the watch
	// and none of its responses has come since (srWatchAnswered).
	watchCheck bool
	watchEnd   packet.PSN
	// held is one past the highest PSN the responder reported received
	// (hole and progress reports): the packets before it are not in
	// flight, whether executed or held out of order (srInFlight).
	held packet.PSN
	// span is how far past the last request known executed the requester
	// sends: what the peer's out-of-order buffer holds, at least the
	// window, less than srTrack.
	span int
	// streams holds the extra-stream re-reads sent and not yet found
	// answered or lost, oldest first (srstreams.go; allocated at the
	// first): a ring of len nstreams from shead. streamNext numbers the
	// next one (never 0); streamHigh is the highest number answered and
	// streamPSN one past the highest PSN it answered; streamNews: they
	// moved since srStreamsLost last looked.
	streams    []srStream
	shead      int
	nstreams   int
	streamNext uint32
	streamHigh uint32
	streamPSN  packet.PSN
	streamNews bool
	// probing is set while the tail-loss probe is built: its re-read is
	// not taken as an extra stream (srStreamSent).
	probing bool
}

// initSelective sets the selective-repeat marks to the first PSN.
func (r *Requester) initSelective() {
	s := &r.sr
	s.base, s.dueLo, s.done, s.high, s.rrHigh, s.scanned = r.compPSN, r.compPSN, r.compPSN, r.compPSN, r.compPSN, r.compPSN
	s.held = r.compPSN
	s.tailOut = false
	s.span = srSendSpan(&r.cfg)
}

// srSendSpan is how many PSNs past the last request the responder executed
// the requester may send under c: what the peer's out-of-order buffer
// holds, at least the window, within the tracked PSNs.
func srSendSpan(c *Config) int {
	return min(max(packet.OOOPackets(c.PeerOOOLimit, c.PMTU), c.Window), srTrack-1)
}

// windowFull reports whether the next new packet must wait for room: the
// PSNs outstanding fill the window (go-back-N), or, under selective repeat,
// the packets in flight (srInFlight) fill it, the PSNs after the last
// request known executed reach what the peer's out-of-order buffer holds
// (requests it may have to hold behind a hole; READ responses missing
// need no room there), or the PSNs outstanding reach the tracked range.
func (r *Requester) windowFull() bool {
	out := int(r.psn.Diff(r.compPSN))
	if !r.cfg.SelectiveRepeat {
		return out >= r.sendWindow()
	}
	executed := r.compPSN
	atLeast(&executed, r.sr.done)
	return out >= srTrack-1 || int(r.psn.Diff(executed)) >= r.sr.span || r.srInFlight() >= r.sendWindow()
}

// inFlight returns how many packets sent are not known to have arrived:
// the PSNs outstanding less the READ responses placed ahead of a hole
// (readparts.go), or srInFlight under selective repeat.
func (r *Requester) inFlight() int {
	if !r.cfg.SelectiveRepeat {
		return max(int(r.psn.Diff(r.compPSN))-r.sr.ngot, 0)
	}
	return r.srInFlight()
}

// srInFlight estimates the packets in flight under selective repeat: the
// PSNs outstanding less the READ responses and atomic acknowledgements
// received, or the PSNs after the last one the responder reported
// received (requests it holds out of order are not in flight), whichever
// is fewer.
func (r *Requester) srInFlight() int {
	n := int(r.psn.Diff(r.compPSN)) - r.sr.ngot
	if r.sr.held.After(r.compPSN) {
		n = min(n, int(r.psn.Diff(r.sr.held)))
	}
	return max(n, 0)
}

// srTimedAnswered reports whether the responder has answered the packet
// timed for the RTT (rec.timed) although the cumulative ACK may not cover
// it yet: a response as first sent to it or a later PSN (sr.high: the
// responder executes requests in PSN order, so a READ response or ACK at
// or past the timed PSN follows its arrival), or a hole or progress report
// naming a later PSN received while the timed one is not on the resend
// list (it was not in a hole). Under selective repeat the cumulative ACK
// waits for every hole before the timed PSN to be repaired, so a sample
// ended by it would measure the repairs (a lost re-read's timeout among
// them) and inflate SRTT, the recovery timer and the resend interval in
// turn (docs/recovery.md).
func (r *Requester) srTimedAnswered() bool {
	t := r.rec.timed
	s := &r.sr
	return s.high.After(t) || s.held.After(t) && !s.isDue(t)
}

// srProgress records a progress report or the end of a hole report: the
// responder has received the PSNs before end. An end after every PSN sent
// is ignored.
func (r *Requester) srProgress(end packet.PSN) {
	if !end.After(r.highPSN) {
		atLeast(&r.sr.held, end)
	}
}

// srIndex returns the bitmap and ring index of psn.
func srIndex(psn packet.PSN) uint32 { return uint32(psn) % srTrack }

// srGot reports whether the response of psn has been received.
func (s *selective) srGot(psn packet.PSN) bool {
	i := srIndex(psn)
	return s.got[i/64]&(1<<(i%64)) != 0
}

// setGot records the response of psn.
func (s *selective) setGot(psn packet.PSN) {
	i := srIndex(psn)
	if s.got[i/64]&(1<<(i%64)) == 0 {
		s.got[i/64] |= 1 << (i % 64)
		s.ngot++
	}
}

// clearGot forgets the response of psn.
func (s *selective) clearGot(psn packet.PSN) {
	i := srIndex(psn)
	if s.got[i/64]&(1<<(i%64)) != 0 {
		s.got[i/64] &^= 1 << (i % 64)
		s.ngot--
	}
}

// slot returns psn's resend slot, claiming it if it holds another PSN.
func (s *selective) slot(psn packet.PSN) *srSlot {
	if s.slots == nil {
		s.slots = make([]srSlot, srTrack)
	}
	sl := &s.slots[srIndex(psn)]
	if sl.psn != psn {
		if sl.due {
			s.ndue--
		}
		if sl.at != 0 {
			s.nresent--
		}
		*sl = srSlot{psn: psn}
	}
	return sl
}

// lookup returns psn's resend slot if it holds psn, without claiming it
// (slot does), or nil.
func (s *selective) lookup(psn packet.PSN) *srSlot {
	if s.slots == nil {
		return nil
	}
	if sl := &s.slots[srIndex(psn)]; sl.psn == psn {
		return sl
	}
	return nil
}

// isDue reports whether psn is due to be resent.
func (s *selective) isDue(psn packet.PSN) bool {
	sl := s.lookup(psn)
	return sl != nil && sl.due
}

// clearDue takes psn off the resend list.
func (s *selective) clearDue(psn packet.PSN) {
	if sl := s.lookup(psn); sl != nil && sl.due {
		sl.due = false
		s.ndue--
	}
}

// forget drops the resend state of psn, now acknowledged: when the PSN
// comes round again (2^24 PSNs later) it is a new packet.
func (s *selective) forget(psn packet.PSN) {
	if sl := s.lookup(psn); sl != nil {
		if sl.due {
			s.ndue--
		}
		if sl.at != 0 {
			s.nresent--
		}
		*sl = srSlot{}
	}
}

// clearAllDue empties the resend list.
func (s *selective) clearAllDue() {
	for i := range s.slots {
		s.slots[i].due = false
	}
	s.ndue = 0
}

// srSync brings the state up to the oldest unacknowledged PSN: the marks
// and resend requests of PSNs before it are dropped, and the PSN marks
// never lag behind it (so that they never wrap).
func (r *Requester) srSync() {
	s := &r.sr
	if s.base == r.compPSN {
		return // the marks were synced to it and only move forward
	}
	if d := int(r.compPSN.Diff(s.base)); d > 0 && (s.ngot > 0 || s.slots != nil) {
		if d >= srTrack {
			s.got, s.ngot = [srTrack / 64]uint64{}, 0
			clear(s.slots)
			s.ndue, s.nresent = 0, 0
		} else {
			for x := s.base; x != r.compPSN; x = x.Next() {
				s.clearGot(x)
				s.forget(x)
			}
		}
	}
	s.base = r.compPSN
	if s.ndue == 0 {
		s.hold.Stop()
	}
	atLeast(&s.scanned, r.compPSN)
	atLeast(&s.done, r.compPSN)
	atLeast(&s.high, r.compPSN)
	atLeast(&s.rrHigh, r.compPSN)
	atLeast(&s.dueLo, r.compPSN)
	atLeast(&s.held, r.compPSN)
}

// atLeast moves *p up to q if it is before q.
func atLeast(p *packet.PSN, q packet.PSN) {
	if p.Before(q) {
		*p = q
	}
}

// srSpan returns the first PSN of the started WQE w and one past its last:
// for a READ the PSNs of its whole response, for the others their request
// packets.
func (r *Requester) srSpan(w *wqe) (first, end packet.PSN) {
	if w.kind == kindRead {
		return w.origFirst, w.origFirst.Add(int(r.pkts(w.length)))
	}
	return w.firstPSN, w.lastPSN.Next()
}

// srFind returns the index of the started WQE whose PSNs include psn.
// Lookups mostly move forward, so it starts at the last one found.
func (r *Requester) srFind(psn packet.PSN) (uint64, bool) {
	i := r.head
	if h := r.sr.hint; h > r.head && h < r.tail {
		if first, _ := r.srSpan(r.slot(h)); !psn.Before(first) && r.slot(h).started {
			i = h
		}
	}
	for ; i != r.tail; i++ {
		w := r.slot(i)
		if !w.started {
			break
		}
		first, end := r.srSpan(w)
		if psn.Before(first) {
			break
		}
		if psn.Before(end) {
			r.sr.hint = i
			return i, true
		}
	}
	return 0, false
}

// srRequested returns how many response PSNs of the READ w have been
// asked for: all of them once the last part went out, else its whole parts.
func (r *Requester) srRequested(w *wqe) uint32 {
	if w.sentAll {
		return r.pkts(w.length)
	}
	return w.off / r.pmtu
}

// srPartStart returns the first PSN of the READ part (readChunk) holding
// response k of the READ w.
func (r *Requester) srPartStart(w *wqe, k uint32) packet.PSN {
	if m := uint32(r.cfg.MaxReadPkts); m > 0 {
		k = k / m * m
	} else {
		k = 0
	}
	return w.origFirst.Add(int(k))
}

// srPartEnd returns one past the last PSN of the READ part (readChunk)
// holding response k of the READ w.
func (r *Requester) srPartEnd(w *wqe, k uint32) packet.PSN {
	n := r.pkts(w.length)
	if m := uint32(r.cfg.MaxReadPkts); m > 0 {
		n = min(n, (k/m+1)*m)
	}
	return w.origFirst.Add(int(n))
}

// srInterval is how long a resent PSN is not resent again: about an RTT
// with its variation (RFC 6298's RTO without floor), so that the answer to
// the resend had time to come; before the first sample the time since the
// first packet left (an upper bound of the RTT).
func (r *Requester) srInterval(now time.Time) time.Duration {
	if r.rec.rtt.Valid() {
		return r.rec.rtt.RTO()
	}
	return r.sinceFirst(now)
}

// sinceFirst returns the time since the first packet left, 0 before.
func (r *Requester) sinceFirst(now time.Time) time.Duration {
	if r.rec.firstSent.IsZero() {
		return 0
	}
	return now.Sub(r.rec.firstSent)
}

// srReorderWindow is how long the resends of a hole report wait for the
// hole to fill by itself: a quarter of the smoothed RTT (RFC 8985's
// reordering window), at least srMinReorderWindow and at most
// srMaxReorderWindow.
func (r *Requester) srReorderWindow(now time.Time) time.Duration {
	srtt := r.rec.rtt.SRTT()
	if !r.rec.rtt.Valid() {
		srtt = r.sinceFirst(now)
	}
	return max(min(srtt/4, srMaxReorderWindow), srMinReorderWindow)
}

// srMinReorderWindow and srMaxReorderWindow bound srReorderWindow. The
// floor covers the packets that overtook a hole and the ones that fill
// it arriving in one receive batch, or in two a moment apart, where the
// hole report is handled first: a quarter of an RTT near zero would
// resend at once what is already arriving.
const (
	srMinReorderWindow = 50 * time.Microsecond
	srMaxReorderWindow = time.Millisecond
)

// srReady reports whether a resend may go now: the list is not empty and
// no reorder hold keeps it back (an expired or answered one ends).
func (r *Requester) srReady(now time.Time) bool {
	if r.sr.hold.Expired(now) || !r.srHeldBack() {
		r.sr.hold.Stop()
	}
	return r.sr.ndue > 0 && !r.sr.hold.Armed() && !r.stopped
}

// srHeldBack reports whether the reorder hold keeps the resends back: it
// is armed and, if it waits for packets (srMarkHeld), the responder has not
// yet reported received the request packet srHoldPackets request packets
// past the one at the hole's start (srThreshold).
func (r *Requester) srHeldBack() bool {
	s := &r.sr
	return s.hold.Armed() && !(s.holdByPackets && s.held.After(s.holdFor))
}

// srWhy is why srMark is asked to put a PSN on the resend list.
type srWhy uint8

const (
	// srFound: the requester found it lost (srDetect, srRecheck, the
	// lost-READ-request watch).
	srFound srWhy = iota
	// srNamed: a hole report names it missing.
	srNamed
	// srForced: the tail-loss probe asks for it, whatever the interval.
	srForced
)

// srMark puts psn on the resend list unless it was resent less than an
// interval ago; after its second resend, two intervals (an answer queued
// behind a long READ stream is not asked for again every RTT). A PSN a
// hole report names missing (srNamed) goes within the interval too when
// that report proves its last resend lost (srResendLost: the report came
// after packets sent after the resend), and srForced ignores the
// interval. A PSN the requester found lost itself (srFound) waits for
// the interval whatever the reports say: for a READ response or an
// atomic acknowledgement, a report naming later request packets
// received proves nothing about the answer, which may be queued behind
// the responder's streams or overtaken on the way by one or two
// packets (TestSRRereadReorderedPastReport). It reports whether it put
// psn on the list. (A re-read answered as an extra stream and found lost
// goes on the list without this wait: srStreamsLost.)
func (r *Requester) srMark(now time.Time, psn packet.PSN, why srWhy) bool {
	s := &r.sr
	sl := s.slot(psn)
	if sl.due {
		return false
	}
	if why != srForced && sl.at != 0 && s.stamp(now)-sl.at < int64(r.srInterval(now))<<(sl.tries-1) {
		if why != srNamed || !r.srResendLost(sl) {
			return false
		}
		sl.lost = min(sl.lost+1, srRecheckBackoff)
		r.c.SRResendsLost++
	}
	s.markDue(sl)
	return true
}

// markDue puts the PSN of sl, not due, on the resend list.
func (s *selective) markDue(sl *srSlot) {
	sl.due = true
	s.ndue++
	if sl.psn.Before(s.dueLo) || s.ndue == 1 {
		s.dueLo = sl.psn
	}
}

// srFail fails the requester with status found on w's response (a bad
// response, a local protection error): w completes with it when Flush
// (or, as the oldest WQE, now) reaches it.
func (r *Requester) srFail(w *wqe, status verbs.WCStatus) {
	w.state = wqeErrored
	w.status = status
	r.fail(status)
	if r.slot(r.head) == w {
		r.finish(w, status)
	}
	r.state = CompError
}

// srHandles reports whether the response p goes through the
// selective-repeat completer: ACKs, hole reports, error NAKs, READ
// responses and atomic acknowledgements. RNR NAKs and sequence NAKs take
// the IBTA path (run).
func (r *Requester) srHandles(p *packet.Packet) bool {
	if !r.cfg.SelectiveRepeat {
		return false
	}
	if p.Opcode() != packet.RCAcknowledge {
		return true
	}
	syn := p.AETH().Syndrome()
	return syn.IsACK() || syn.IsNAK() && syn.NAKCode() != packet.NAKPSNSeqError
}

// srReceive is the completer of a response under selective repeat: it
// records what p proves received or executed, completes the WQEs that are
// done, in send queue order, and looks for lost READ responses.
func (r *Requester) srReceive(now time.Time, p *packet.Packet) {
	r.ntrace = 0
	r.state = CompDone
	r.srSync()
	switch op := p.Opcode(); {
	case op == packet.RCAcknowledge && p.AETH().Syndrome().IsNAK() &&
		p.AETH().Syndrome().NAKCode() == packet.NAKSelectiveRepeat:
		r.srHole(now, p)
	case op == packet.RCAcknowledge && p.AETH().Syndrome().IsNAK():
		r.srErrorNAK(p)
	case op == packet.RCAcknowledge:
		r.srAck(p)
	case op == packet.RCAtomicAcknowledge:
		r.srAtomic(now, p)
	default:
		r.srWatchAnswered(now, p.PSN())
		r.srRead(now, p)
	}
	if r.stopped {
		return
	}
	r.srAdvance()
	if r.stopped {
		return
	}
	r.srSync()
	r.srDetect(now)
	if op := p.Opcode(); op == packet.RCRDMAReadResponseFirst || op == packet.RCRDMAReadResponseMiddle {
		// Not the end of a READ part's stream: the watch cannot move to
		// a new part, but a response at or past the watched part ends it.
		// (srWatchRead looks the part up, which is too much per packet.)
		if r.sr.watch.Armed() && !p.PSN().Before(r.sr.watchPSN) {
			r.sr.watch.Stop()
		}
	} else {
		r.srWatchRead(now)
	}
	if p.Opcode() != packet.RCAcknowledge && r.sr.watch.Armed() && p.PSN().Before(r.sr.watchPSN) {
		r.sr.watchAhead = r.sr.stamp(now)
	}
	if r.sr.slots != nil {
		r.srArmRecheck(now)
	}
}

// srAskUnknown is the resentAt of a response that answers an earlier
// request of its PSN than the last, and it is not known which (srAnswerOf).
const srAskUnknown = -1

// srResponded records that the responder executed every request before
// done and answered PSN psn, to a request sent at resentAt (a resend or
// re-read, a selective.stamp), as first sent (0), or to one not known
// (srAskUnknown: it proves only what it executed).
func (r *Requester) srResponded(done, psn packet.PSN, resentAt int64) {
	s := &r.sr
	if done.After(s.done) {
		s.done = done
	}
	if s.tailOut && psn == s.tail {
		// The answer to a one-response probe: the responder sent the
		// PSNs of the part before it first (srProbe).
		s.tailOut = false
		atLeast(&s.high, psn.Next())
	}
	switch {
	case resentAt == srAskUnknown:
	case resentAt == 0:
		if psn.Next().After(s.high) {
			s.high = psn.Next()
		}
	case resentAt > s.rrAt:
		s.rrAt, s.rrHigh = resentAt, psn.Next()
	case resentAt == s.rrAt && psn.Next().After(s.rrHigh):
		s.rrHigh = psn.Next()
	}
	r.resetBudgets()
}

// srAnswerOf returns the request that the response to psn received at now
// answers, for srResponded: its last resend (a stamp), 0 if it never was
// resent, or srAskUnknown if the response came sooner than the fastest
// round trip measured after that resend. Such a response answers an
// earlier request of the PSN, the original or an earlier re-read (RFC
// 8985 6.2, step 2, for an ACK of a retransmitted segment), one that was
// only late, say held by a stalled peer while the tail-loss probe asked
// again. Credited to the last resend, it would make every PSN re-read
// before that resend lost for srLost, while their answers, queued behind
// it, were still on their way (TestSRRereadLateAnswerCredit).
func (r *Requester) srAnswerOf(now time.Time, psn packet.PSN) int64 {
	s := &r.sr
	at := s.resentAt(psn)
	if at != 0 && s.stamp(now)-at < int64(r.rec.rtt.Stats().Min) {
		return srAskUnknown
	}
	return at
}

// resentAt returns when psn was last resent (a stamp), 0 if it
// never was.
func (s *selective) resentAt(psn packet.PSN) int64 {
	if sl := s.lookup(psn); sl != nil {
		return sl.at
	}
	return 0
}

// tries returns how many times psn was resent, 0 if it never was.
func (s *selective) tries(psn packet.PSN) uint8 {
	if sl := s.lookup(psn); sl != nil {
		return sl.tries
	}
	return 0
}

// srLost reports whether the missing response of psn is taken as lost: as
// first asked for, once a response srReorder PSNs after it has arrived;
// asked for again, once a later re-read was answered or srReorder later
// PSNs of the same one. A PSN asked for again is then put on the resend
// list by srDetect once its last resend is an interval old (srMark):
// this evidence counts every re-read, the whole-part ones whose answers
// may come as a train behind the others included, and a re-read merely
// overtaken by the next one. srStreamsLost acts at once on the stricter
// evidence of extra-stream re-reads.
func (r *Requester) srLost(psn packet.PSN) bool {
	s := &r.sr
	if at := s.resentAt(psn); at != 0 {
		return s.rrAt > at || s.rrAt == at && int(s.rrHigh.Diff(psn)) > srReorder
	}
	return int(s.high.Diff(psn)) > srReorder
}

// srAck takes a cumulative ACK: every request up to its PSN was executed.
// An ACK for a PSN never sent is dropped.
func (r *Requester) srAck(p *packet.Packet) {
	psn := p.PSN()
	if !psn.Before(r.highPSN) || psn.Next().Before(r.compPSN) {
		r.c.ResponsesDropped++
		return
	}
	r.srResponded(psn.Next(), psn, 0)
}

// srErrorNAK takes a NAK for an invalid request, a remote access or a
// remote operational error (as rxe check_ack takes them): the responder
// executed every request before its PSN and failed the request holding
// it, which fails that WQE with the matching status. Under selective
// repeat responses arrive out of order, so the NAK's PSN may lie past
// READ responses still missing (lost, or still on their way): it fails
// the READ all the same, as the responder answers no re-read after it
// (it is in the error state). Its PSN may also lie before the oldest
// unacknowledged PSN, inside the oldest WQE: the responder failed on the
// extra stream of a re-read whose PSNs the original stream answered
// meanwhile; that fails the oldest WQE too. A NAK for a PSN of no
// outstanding WQE is dropped.
func (r *Requester) srErrorNAK(p *packet.Packet) {
	psn := p.PSN()
	i, ok := r.srFind(psn)
	if !ok {
		r.c.ResponsesDropped++
		return
	}
	syn := p.AETH().Syndrome()
	status := verbs.WCRemOpErr // remote operational error, and unknown codes (rxe)
	switch syn.NAKCode() {
	case packet.NAKInvalidRequest:
		status = verbs.WCRemInvReqErr
	case packet.NAKRemoteAccess:
		status = verbs.WCRemAccessErr
	}
	w := r.slot(i)
	w.vendor = uint32(syn)
	atLeast(&r.sr.done, psn)
	r.srAdvance()
	if r.stopped || i < r.head {
		return // w completed: every response of it had arrived
	}
	r.srFail(w, status)
}

// srAtomic takes an atomic acknowledgement received at now: the original
// value goes to the atomic's local buffer, once.
func (r *Requester) srAtomic(now time.Time, p *packet.Packet) {
	psn := p.PSN()
	i, ok := r.srFind(psn)
	if !ok || psn.Before(r.compPSN) || r.sr.srGot(psn) || int(psn.Diff(r.compPSN)) >= srTrack {
		r.c.ResponsesDropped++
		return
	}
	w := r.slot(i)
	if w.kind != kindAtomic || !p.AETH().Syndrome().IsACK() {
		r.srFail(w, verbs.WCBadRespErr)
		return
	}
	if r.doAtomic(p, w) == CompError {
		r.srFail(w, verbs.WCLocProtErr)
		return
	}
	r.sr.setGot(psn)
	r.srResponded(psn.Next(), psn, r.srAnswerOf(now, psn))
}

// srRead places a READ response received at now at its offset in the
// WQE's SGEs, whatever the order it arrives in: response PSN origFirst + k
// carries bytes k × PMTU on. The response to an ATOMIC_WRITE is an empty
// ONLY. Duplicates, responses to what was not asked for and responses
// beyond the tracked PSNs are dropped; a malformed one fails the
// requester.
func (r *Requester) srRead(now time.Time, p *packet.Packet) {
	psn := p.PSN()
	i, ok := r.srFind(psn)
	if !ok || psn.Before(r.compPSN) || int(psn.Diff(r.compPSN)) < srTrack && r.sr.srGot(psn) {
		r.c.ResponsesDropped++
		return
	}
	w := r.slot(i)
	if int(psn.Diff(r.compPSN)) >= srTrack {
		// Beyond the tracked PSNs: dropped, to be re-read, but it still
		// proves its request executed and the PSNs before it answered.
		r.c.ResponsesDropped++
		if k := uint32(psn.Diff(w.origFirst)); w.kind == kindRead && k < r.srRequested(w) {
			r.srResponded(r.srPartEnd(w, k), psn, r.srAnswerOf(now, psn))
		}
		return
	}
	data := p.Payload()
	n := uint32(len(data))
	op := p.Opcode()
	if op != packet.RCRDMAReadResponseMiddle && !p.AETH().Syndrome().IsACK() {
		r.srFail(w, verbs.WCBadRespErr)
		return
	}
	if w.kind == kindAtomicWrite {
		if op != packet.RCRDMAReadResponseOnly || n != 0 {
			r.srFail(w, verbs.WCBadRespErr)
			return
		}
		r.sr.setGot(psn)
		r.srResponded(psn.Next(), psn, r.srAnswerOf(now, psn))
		return
	}
	k := uint32(psn.Diff(w.origFirst))
	if w.kind != kindRead {
		r.srFail(w, verbs.WCBadRespErr)
		return
	}
	if k >= r.srRequested(w) {
		r.c.ResponsesDropped++
		return
	}
	off := k * r.pmtu
	if !r.srReadShape(op, n, w.length-off) {
		r.srFail(w, verbs.WCBadRespErr)
		return
	}
	if !r.srPlace(w, off, data) {
		r.srFail(w, verbs.WCLocProtErr)
		return
	}
	r.c.ReadBytes += uint64(n)
	r.sr.setGot(psn)
	ask := r.srAnswerOf(now, psn)
	if ask != srAskUnknown {
		r.sr.streamAnswered(psn)
	}
	r.srResponded(r.srPartEnd(w, k), psn, ask)
}

// srReadShape reports whether a READ response with opcode op and n bytes
// fits a place with resid bytes of the message left from it: FIRST and
// MIDDLE carry a full PMTU and are not the last packet of the message;
// LAST and ONLY carry the rest up to a PMTU (a re-read or a READ part may
// end before the message does).
func (r *Requester) srReadShape(op packet.Opcode, n, resid uint32) bool {
	switch op {
	case packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle:
		return n == r.pmtu && resid > r.pmtu
	case packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly:
		return n == min(resid, r.pmtu)
	}
	return false
}

// srPlace copies data to byte off of w's message: with the placement
// cursor if it continues the bytes placed in order, else from a cursor
// sought to off.
func (r *Requester) srPlace(w *wqe, off uint32, data []byte) bool {
	if off == w.rcvd {
		if !r.scatter(w, data) {
			return false
		}
		w.rcvd += uint32(len(data))
		return true
	}
	var c sge.Cursor
	c.Seek(w.sges, off)
	return c.Scatter(r.mem, w.sges, data)
}

// srAdvance completes, in send queue order, the WQEs whose PSNs are all
// acknowledged, and moves the oldest unacknowledged PSN over what is.
func (r *Requester) srAdvance() {
	for r.head != r.tail && !r.stopped {
		w := r.slot(r.head)
		if !w.started || w.state == wqeErrored || !r.srConsume(w) {
			return
		}
		r.finish(w, verbs.WCSuccess)
	}
}

// srConsume moves the oldest unacknowledged PSN over the acknowledged PSNs
// of w, the oldest WQE, and reports whether w is complete: a SEND or WRITE
// once the responder executed it, a READ or atomic once every response
// arrived.
func (r *Requester) srConsume(w *wqe) bool {
	s := &r.sr
	if w.kind.segmented() {
		if w.sentAll && w.lastPSN.Before(s.done) {
			r.compPSN = w.lastPSN.Next()
			return true
		}
		if s.done.After(r.compPSN) {
			r.compPSN = s.done
		}
		return false
	}
	first, end := r.srSpan(w)
	if w.kind == kindRead {
		end = first.Add(int(r.srRequested(w)))
	}
	if r.compPSN.Before(first) {
		r.compPSN = first
	}
	for r.compPSN.Before(end) && s.srGot(r.compPSN) {
		s.clearGot(r.compPSN)
		r.compPSN = r.compPSN.Next()
	}
	if w.kind == kindRead {
		if rcvd := min(w.length, uint32(r.compPSN.Diff(first))*r.pmtu); rcvd != w.rcvd {
			w.rcvd = rcvd
			w.place.Seek(w.sges, rcvd)
		}
	}
	return w.sentAll && r.compPSN == end
}
