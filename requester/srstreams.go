package requester

import (
	"time"

	"github.com/gorxe/gorxe/packet"
)

// A re-read's response can be lost again. srLost takes it as lost once a
// later re-read was answered, or srReorder later PSNs of the same one, but
// srMark then still waits for the resend interval (an RTO, which can be a
// hundred round trips on a host whose RTT samples vary), and srDetect
// looks at the PSNs it has passed again only once per interval. That
// evidence is sound, and needs no wait, for the re-reads the responder
// answers as extra streams: a re-read of a READ part whose request the
// responder is known to have executed (a response of the part, or of a
// later request, had already arrived: sr.done is past the part's first
// PSN), so that it holds the part's READ and serves the re-read as a
// duplicate, in a stream of its own queued behind the extra streams
// queued before it and ahead of the trains (responder queueReadFront and
// jumpQueue). Those streams go out in the order the re-reads arrived,
// each in PSN order. That includes the re-read of a single-packet READ
// whose one response was lost: it asks for the whole part, but the
// responder has the READ, and serves it (it drops the first whole
// duplicate only of a READ of more than one response, responder
// firstWholeDuplicate; a dropped re-read would look like a lost answer
// here, and the next one is served). A re-read
// of a part not known executed (the lost READ request's, the watch's,
// srWatchRead) may be executed as the part's original request and
// answered by a train queued behind the others, and a probe's re-read
// may be answered by the part's own train (responder coveredRead): their
// answers say nothing of the order.
//
// An extra stream also goes out ahead of the answers to every request
// the responder receives after the re-read: those are queued behind it
// (trains and ACKs are not urgent). So the answer, as first sent, to a
// request sent after the re-read proves it answered too.
//
// So each extra-stream re-read sent gets a number (srStreamSent), and a
// PSN it asks for is taken as lost, and asked for again at once, when
// srReorder later-numbered re-reads have been answered, or when the same
// re-read has answered the PSN srReorder after it, or when responses as
// first sent to srReorder PSNs sent after it have arrived (sr.high)
// (RACK's reordering threshold, RFC 8985, counted in re-reads and in
// PSNs as srLost counts PSNs: a request or a response overtaken by one or
// two others is no loss). The re-reads sent and not yet settled wait in a
// ring in the order they were sent; a response looks only at the ring's
// head and the srReorder re-reads after it, and each PSN is looked at
// once when its evidence comes, so the work per response is bounded
// (srStreamsLost). A re-read beyond the ring's room falls back to the
// interval.

// srStreamsMax is how many extra-stream re-reads the ring holds.
const srStreamsMax = 128

// srStream is an extra-stream re-read in the ring: the PSNs [psn, end)
// not yet looked at, its number, and the first PSN not yet sent when it
// left.
type srStream struct {
	psn, end packet.PSN
	next     packet.PSN
	num      uint32
}

// srExtraStream reports whether a re-read of the READ w from x would be
// answered as an extra stream: the responder has executed the request of
// x's READ part (sr.done is past its first PSN: a response of the part,
// or of a later request, has arrived; the responder executes requests in
// PSN order), so it serves the re-read as a duplicate, and it is not the
// tail-loss probe. That holds for the whole-part re-read of a part none
// of whose responses came, such as the one response of a single-packet
// READ, once later responses have arrived.
func (r *Requester) srExtraStream(w *wqe, x packet.PSN) bool {
	if r.sr.probing {
		return false
	}
	k := uint32(x.Diff(w.origFirst))
	return r.sr.done.After(r.srPartStart(w, k))
}

// srStreamSent numbers the extra-stream re-read of the n response PSNs
// from x just sent: its PSNs not received carry the number, and it joins
// the ring (the oldest leaves a full ring).
func (r *Requester) srStreamSent(x packet.PSN, n uint32) {
	s := &r.sr
	if s.streams == nil {
		s.streams = make([]srStream, srStreamsMax)
	}
	if s.streamNext == 0 {
		s.streamNext = 1
	}
	num := s.streamNext
	if s.streamNext++; s.streamNext == 0 {
		s.streamNext = 1
	}
	end := x.Add(int(n))
	for y := x; y != end; y = y.Next() {
		if sl := s.lookup(y); sl != nil && sl.at != 0 && !s.srGot(y) {
			sl.stream = num
		}
	}
	if s.nstreams == len(s.streams) {
		s.shead = (s.shead + 1) % len(s.streams)
		s.nstreams--
	}
	s.streams[(s.shead+s.nstreams)%len(s.streams)] = srStream{psn: x, end: end, next: r.psn, num: num}
	s.nstreams++
}

// streamAnswered records the arrival of the READ response psn: if an
// extra-stream re-read asked for it last, the highest re-read answered and
// the highest PSN it answered move up to it.
func (s *selective) streamAnswered(psn packet.PSN) {
	sl := s.lookup(psn)
	if sl == nil || sl.stream == 0 {
		return
	}
	switch d := int32(sl.stream - s.streamHigh); {
	case s.streamHigh == 0 || d > 0:
		s.streamHigh, s.streamPSN = sl.stream, psn.Next()
	case d == 0 && psn.Next().After(s.streamPSN):
		s.streamPSN = psn.Next()
	default:
		return
	}
	s.streamNews = true
}

// srStreamsLost puts on the resend list, without waiting for the resend
// interval, the PSNs of extra-stream re-reads found lost since it last
// ran: all those still missing of a re-read srReorder or more re-reads
// before the highest answered, or sent srReorder or more PSNs before the
// highest answered as first sent (it leaves the ring), and of the
// highest re-read answered those srReorder or more PSNs before the
// highest it answered. Each is counted in SRResendsLost.
func (r *Requester) srStreamsLost(now time.Time) {
	s := &r.sr
	if !s.streamNews && (s.nstreams == 0 || !s.streamPassed(&s.streams[s.shead])) {
		return
	}
	s.streamNews = false
	for s.nstreams > 0 {
		st := &s.streams[s.shead]
		if int32(s.streamHigh-st.num) < srReorder && !s.streamPassed(st) {
			break
		}
		r.srStreamLost(now, st, st.end)
		s.shead = (s.shead + 1) % len(s.streams)
		s.nstreams--
	}
	// The ring holds re-reads numbered from streamHigh−srReorder+1 on, in
	// order: the highest answered is among its first srReorder.
	for i := range min(s.nstreams, srReorder) {
		if st := &s.streams[(s.shead+i)%len(s.streams)]; st.num == s.streamHigh {
			r.srStreamLost(now, st, s.streamPSN.Add(-srReorder))
			break
		}
	}
}

// streamPassed reports whether responses as first sent to srReorder
// PSNs sent after the re-read st have arrived: the responder queued their
// requests' answers behind st's stream.
func (s *selective) streamPassed(st *srStream) bool {
	return int(s.high.Diff(st.next)) >= srReorder
}

// srStreamLost puts the PSNs of the ring's re-read st before lim (at most
// its end) that it asked for last and that are still missing on the
// resend list, and moves st past them.
func (r *Requester) srStreamLost(now time.Time, st *srStream, lim packet.PSN) {
	s := &r.sr
	if st.end.Before(lim) {
		lim = st.end
	}
	for ; st.psn.Before(lim); st.psn = st.psn.Next() {
		sl := s.lookup(st.psn)
		if sl == nil || sl.stream != st.num || sl.due || s.srGot(st.psn) {
			continue // answered, acknowledged, asked for again since, or due
		}
		sl.lost = min(sl.lost+1, srRecheckBackoff)
		r.c.SRResendsLost++
		s.markDue(sl)
		r.noteLost(st.psn, true)
	}
}
