package requester

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// srResponder is the selective-repeat part of the fake responder, as the
// wire contract describes the responder (docs/sr-requester.md): a request
// beyond ePSN is buffered and executed in PSN order once the hole before
// it is filled, then a standard ACK for the new ePSN−1 goes out; a packet
// that opens a new hole triggers one hole report for it; while the hole
// at ePSN persists it is reported again after every 16 further
// out-of-order arrivals.
type srResponder struct {
	on       bool
	ooo      map[packet.PSN][]byte
	high     packet.PSN // one past the highest PSN buffered
	arrivals int        // out-of-order arrivals
	draining bool       // executing buffered requests: one ACK at the end
	urgent   int        // responses at the head of out sent ahead of the others
	reports  [][2]packet.PSN
}

// srReReport is the responder's re-report interval (SRReReport).
const srReReport = 16

// srFuture buffers b if its PSN is beyond ePSN and reports whether it did.
func (f *fakeResponder) srFuture(b []byte) bool {
	p := parse(f.t, b)
	psn := p.PSN()
	if psn.Diff(f.epsn) <= 0 {
		return false
	}
	s := &f.sr
	if s.ooo == nil {
		s.ooo = map[packet.PSN][]byte{}
	}
	if len(s.ooo) == 0 {
		s.high = f.epsn
	}
	if psn.Diff(f.epsn) >= 1024 {
		return true // beyond the buffer: dropped
	}
	if _, dup := s.ooo[psn]; dup {
		return true
	}
	s.ooo[psn] = append([]byte(nil), b...)
	end := psn.Next()
	if p.Opcode() == packet.RCRDMAReadRequest {
		end = psn.Add(max(1, (int(p.RETH().DMALen())+f.pmtu-1)/f.pmtu))
	}
	if psn.After(s.high) {
		f.srReport(s.high, psn)
	}
	if end.After(s.high) {
		s.high = end
	}
	s.arrivals++
	if s.arrivals%srReReport == 0 {
		first := s.high
		for k := range s.ooo {
			if k.Before(first) {
				first = k
			}
		}
		f.srReport(f.epsn, first)
	}
	return true
}

// srReport sends the hole report [a, b), ahead of the responses queued.
func (f *fakeResponder) srReport(a, b packet.PSN) {
	f.sr.reports = append(f.sr.reports, [2]packet.PSN{a, b})
	f.sendUrgent(resp(packet.RCAcknowledge, a, packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(b), nil))
}

// sendUrgent queues b ahead of the responses queued, behind the urgent
// ones queued before it (as the responder engine's jumpQueue).
func (f *fakeResponder) sendUrgent(b []byte) {
	f.out = slices.Insert(f.out, f.sr.urgent, b)
	f.sr.urgent++
}

func (f *fakeResponder) pending() bool { return len(f.out) > 0 }

// next takes the next response to send.
func (f *fakeResponder) next() []byte {
	if len(f.out) == 0 {
		return nil
	}
	b := f.out[0]
	f.out = f.out[1:]
	if f.sr.urgent > 0 {
		f.sr.urgent--
	}
	return b
}

// srDrain executes the buffered requests that ePSN has reached, then
// acknowledges the new ePSN−1.
func (f *fakeResponder) srDrain() {
	drained := false
	for {
		for k := range f.sr.ooo {
			if k.Before(f.epsn) {
				delete(f.sr.ooo, k)
			}
		}
		b, ok := f.sr.ooo[f.epsn]
		if !ok {
			break
		}
		delete(f.sr.ooo, f.epsn)
		f.sr.draining = true
		f.handleInOrder(b)
		f.sr.draining = false
		drained = true
	}
	if drained {
		f.send(resp(packet.RCAcknowledge, f.epsn.Add(-1), packet.SyndromeACKUnlimited, f.msn, nil))
	}
}

// srLink is a timed link between the requester and the fake responder:
// packets leave one per gap in each direction and arrive delay later (plus
// an extra delay a test may give one to reorder it); scripted drops by
// PSN and by how many times that PSN went that way.
type srLink struct {
	h        *harness
	f        srPeer
	delay    time.Duration
	gap      time.Duration
	toResp   []timedPkt
	toReq    []timedPkt
	lastReq  time.Time // departure of the last request
	lastResp time.Time
	seenReq  map[packet.PSN]int
	seenResp map[packet.PSN]int
	// dropReq and dropResp decide the fate of the nth (from 1) packet
	// with p's PSN going that way; extra delays it.
	dropReq, dropResp func(p packet.Packet, nth int) bool
	extraReq          func(p packet.Packet, nth int) time.Duration
	extraResp         func(p packet.Packet, nth int) time.Duration
	sent              [][]byte // every request the requester built
	got               [][]byte // every response the requester received
}

func newSRLink(h *harness, f srPeer) *srLink {
	return &srLink{h: h, f: f, delay: 20 * time.Microsecond, gap: time.Microsecond,
		seenReq: map[packet.PSN]int{}, seenResp: map[packet.PSN]int{}}
}

// srPeer is the responder end of an srLink: the fake responder, or the
// responder engine (srengines_test.go).
type srPeer interface {
	handle(b []byte) // one request arrives
	pending() bool   // a response waits to be sent
	next() []byte    // the next response to send
}

// insert adds a packet to a queue kept in arrival order.
func insert(q []timedPkt, tp timedPkt) []timedPkt {
	i := len(q)
	for i > 0 && q[i-1].at.After(tp.at) {
		i--
	}
	return slices.Insert(q, i, tp)
}

// depart schedules b, leaving after last, and returns the new last.
func (l *srLink) depart(q *[]timedPkt, last time.Time, b []byte, seen map[packet.PSN]int,
	drop func(packet.Packet, int) bool, extra func(packet.Packet, int) time.Duration) time.Time {
	p := parse(l.h.t, b)
	seen[p.PSN()]++
	nth := seen[p.PSN()]
	at := l.h.now
	if last.Add(l.gap).After(at) {
		at = last.Add(l.gap)
	}
	if drop != nil && drop(p, nth) {
		return at
	}
	arr := at.Add(l.delay)
	if extra != nil {
		arr = arr.Add(extra(p, nth))
	}
	*q = insert(*q, timedPkt{arr, b})
	return at
}

// run drives the link until nothing is outstanding, the requester failed
// or the virtual time limit passed. Both ends send when the link is free
// (one packet per gap), as rxe sends while the socket takes datagrams: a
// packet an end queues first (a resend, a hole report, a re-read's
// stream) goes out first.
func (l *srLink) run(limit time.Duration) {
	h := l.h
	end := h.now.Add(limit)
	for h.r.Outstanding() > 0 && h.now.Before(end) {
		if _, failed := h.r.Failed(); failed {
			return
		}
		if h.r.Pending() && !l.lastReq.Add(l.gap).After(h.now) {
			b := h.next()
			require.NotNil(h.t, b, "Pending but no packet: ndue %d hold %v dueLo %d comp %d high %d probe %v stopped %v", h.r.sr.ndue, h.r.sr.hold.Armed(), h.r.sr.dueLo, h.r.compPSN, h.r.highPSN, h.r.rec.probeDue, h.r.stopped)
			l.sent = append(l.sent, b)
			l.lastReq = l.depart(&l.toResp, l.lastReq, b, l.seenReq, l.dropReq, l.extraReq)
		}
		if l.f.pending() && !l.lastResp.Add(l.gap).After(h.now) {
			if o := l.f.next(); o != nil {
				l.lastResp = l.depart(&l.toReq, l.lastResp, o, l.seenResp, l.dropResp, l.extraResp)
			}
		}
		next := h.r.Deadline()
		earlier := func(t time.Time) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
		for _, q := range [][]timedPkt{l.toResp, l.toReq} {
			if len(q) > 0 {
				earlier(q[0].at)
			}
		}
		if h.r.Pending() {
			earlier(l.lastReq.Add(l.gap))
		}
		if l.f.pending() {
			earlier(l.lastResp.Add(l.gap))
		}
		require.False(h.t, next.IsZero(), "the link stalled with %d outstanding", h.r.Outstanding())
		if next.After(h.now) {
			h.now = next
		}
		for len(l.toResp) > 0 && !l.toResp[0].at.After(h.now) {
			l.f.handle(l.toResp[0].b)
			l.toResp = l.toResp[1:]
		}
		for len(l.toReq) > 0 && !l.toReq[0].at.After(h.now) {
			l.got = append(l.got, l.toReq[0].b)
			h.recv(l.toReq[0].b)
			l.toReq = l.toReq[1:]
		}
		if d := h.r.Deadline(); !d.IsZero() && !h.now.Before(d) {
			h.r.OnTimeout(h.now)
		}
	}
}

// sentCount returns how many requests with PSN psn the requester built.
func (l *srLink) sentCount(psn packet.PSN) int {
	n := 0
	for _, b := range l.sent {
		if parse(l.h.t, b).PSN() == psn {
			n++
		}
	}
	return n
}

// dropNth returns a drop rule that drops the packets with the given PSNs
// (relative to base) the given times: drops[k] = n drops the first n.
func dropNth(base packet.PSN, drops map[int]int) func(packet.Packet, int) bool {
	return func(p packet.Packet, nth int) bool {
		return nth <= drops[int(p.PSN().Diff(base))]
	}
}

// lossyBatch drops each request and response with probability loss (drawn
// from rng), posts n signaled work requests of op, each size bytes from
// baseA to rbase and on, runs the link for at most 10 s of virtual time,
// checks that the requester neither failed nor completed out of order, and
// returns how many packets were dropped and the virtual time it took.
func (l *srLink) lossyBatch(t *testing.T, op verbs.WROpcode, n, size int, loss float64, rng *rand.Rand) (int, time.Duration) {
	t.Helper()
	h := l.h
	lost := 0
	drop := func(packet.Packet, int) bool {
		if rng.Float64() < loss {
			lost++
			return true
		}
		return false
	}
	l.dropReq, l.dropResp = drop, drop
	for i := range n {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: op, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*size), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: uint32(size), LKey: lkeyA}}})
	}
	start := h.now
	l.run(10 * time.Second)
	st, failed := h.r.Failed()
	require.False(t, failed, "requester failed: %v", st)
	require.Len(t, h.cq.wcs, n)
	for i, wc := range h.cq.wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		require.Equal(t, uint64(i+1), wc.ID)
	}
	return lost, h.now.Sub(start)
}
