package requester

import (
	"slices"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// orderPkts is the size, in packets, of the READs of orderHarness.
const orderPkts = 16

// orderHarness is a selective-repeat requester with one RTT sample (warm)
// and a window of n READs of orderPkts packets each.
type orderHarness struct {
	*harness
	p    packet.PSN // the first PSN of READ 1
	sent []orderSent
}

// orderSent is a packet the requester sent, and when.
type orderSent struct {
	at time.Time
	p  packet.Packet
}

// newOrderHarness returns an orderHarness for n READs whose requester took
// one RTT sample of rtt (a SEND acknowledged rtt after it left).
func newOrderHarness(t *testing.T, n int, rtt time.Duration) *orderHarness {
	cfg := baseConfig(srPMTU, srSQ)
	cfg.SelectiveRepeat = true
	cfg.Window = n * orderPkts
	cfg.MaxRdAtomic = 16
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, n*orderPkts*srPMTU, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 100, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rtt)
	h.recv(ack(srSQ))
	require.Equal(t, rtt, h.r.Counters().Recovery.SRTT)
	return &orderHarness{harness: h, p: srSQ.Next()}
}

// newOrderReads returns an orderHarness (newOrderHarness) whose requester
// has sent the requests of READs 1 to n.
func newOrderReads(t *testing.T, n int, rtt time.Duration) *orderHarness {
	o := newOrderHarness(t, n, rtt)
	for id := range uint64(n) {
		o.read(id + 1)
	}
	o.collect()
	require.Len(t, o.sent, n, "every READ request")
	return o
}

// read posts READ id (1-based): orderPkts packets, its own local bytes.
func (o *orderHarness) read(id uint64) {
	off := (id - 1) * orderPkts * srPMTU
	o.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		RemoteAddr: rbase + off, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + off, Length: orderPkts * srPMTU, LKey: lkeyA}}})
}

// first returns the first PSN of READ id.
func (o *orderHarness) first(id uint64) packet.PSN { return o.p.Add(int(id-1) * orderPkts) }

// resp returns response k of READ id's train as first sent.
func (o *orderHarness) resp(id uint64, k int) []byte {
	return readResp(srPMTU, o.first(id), make([]byte, orderPkts*srPMTU), 0, false)[k]
}

// reread returns response k of READ id as an extra stream from response
// from sends it (FIRST at from: a re-read of a sub-range).
func (o *orderHarness) reread(id uint64, from, to, k int) []byte {
	data := make([]byte, (to-from)*srPMTU)
	return readResp(srPMTU, o.first(id).Add(from), data, 0, false)[k-from]
}

// until runs the requester's timers up to t, collecting what it sends.
func (o *orderHarness) until(t time.Time) {
	o.t.Helper()
	o.collect()
	for {
		dl := o.r.Deadline()
		if dl.IsZero() || dl.After(t) {
			break
		}
		o.now = dl
		o.r.OnTimeout(o.now)
		o.collect()
	}
	o.now = t
}

// answer delivers the responses of READ id in order, one a microsecond,
// but those whose index is in lost.
func (o *orderHarness) answer(id uint64, lost ...int) {
	for k := range orderPkts {
		if !slices.Contains(lost, k) {
			o.in(o.resp(id, k))
			o.now = o.now.Add(time.Microsecond)
		}
	}
}

// in delivers b at now and collects what the requester sends.
func (o *orderHarness) in(b []byte) {
	o.t.Helper()
	o.recv(b)
	o.collect()
}

func (o *orderHarness) collect() {
	o.t.Helper()
	for _, b := range o.drain() {
		o.sent = append(o.sent, orderSent{o.now, parse(o.t, b)})
	}
}

// rereadsOf returns when the requester asked for READ id again from its
// first PSN (a re-read of the whole READ; the first request is the
// original), and checks that each asked for all of it.
func (o *orderHarness) rereadsOf(id uint64) []time.Time {
	o.t.Helper()
	var at []time.Time
	orig := true
	for _, s := range o.sent {
		if s.p.Opcode() != packet.RCRDMAReadRequest || s.p.PSN() != o.first(id) {
			continue
		}
		require.Equal(o.t, uint32(orderPkts*srPMTU), s.p.RETH().DMALen(), "the whole READ")
		if !orig {
			at = append(at, s.at)
		}
		orig = false
	}
	return at
}

// The responder serves READ requests in PSN order, one train after the
// other (IBA 9.5), and sends the extra stream of a re-read ahead of the
// trains it has queued (responder/sr.go). So a READ whose responses have
// not begun is only queued while responses of earlier PSNs still arrive,
// and a READ request is known lost when the responder reports a later
// request received while its PSNs are missing, or when nothing at all
// comes for an interval after the last earlier response (the watch,
// srWatchRead). Each row counts the whole-READ re-reads of READ 2 and
// when they left.
func TestSRWatchReadOrder(t *testing.T) {
	const (
		lostFrom, lostTo = 1, 11 // READ 1's responses lost on the way
		step             = 200 * time.Microsecond
	)
	for _, tc := range []struct {
		name string
		// lost: READ 2's request was lost; later: READ 3 went out after
		// it and the responder reported READ 2's PSNs missing.
		lost, later bool
		// stream: the re-read of READ 1's lost responses comes back one
		// response per step, ahead of READ 2's train.
		stream bool
	}{
		{name: "queued-behind-a-stream", stream: true},
		{name: "lost-behind-a-stream", lost: true, stream: true},
		{name: "lost-later-reported", lost: true, later: true, stream: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 2
			if tc.later {
				n = 3
			}
			o := newOrderReads(t, n, rttTest)

			// READ 1's train arrives with responses 1..10 lost; the
			// responses after them make them lost (srDetect), and they
			// are re-read at once.
			o.now = o.now.Add(rttTest)
			if tc.later {
				// READ 3 reached the responder, READ 2 did not: the
				// report goes ahead of the trains.
				o.in(srHoleReport(o.first(2), o.first(3)))
			}
			for k := range orderPkts {
				if k < lostFrom || k >= lostTo {
					o.in(o.resp(1, k))
				}
			}
			var rr []orderSent
			for _, s := range o.sent[n:] {
				if s.p.PSN() == o.first(1).Add(lostFrom) {
					rr = append(rr, s)
				}
			}
			require.Len(t, rr, 1, "READ 1's lost responses are re-read")
			require.Equal(t, uint32((lostTo-lostFrom)*srPMTU), rr[0].p.RETH().DMALen())
			ivl := o.r.srInterval(o.now)

			// The re-read's stream comes back slowly, longer than an
			// interval in all, ahead of READ 2's train.
			o.now = o.now.Add(rttTest)
			for k := lostFrom; k < lostTo; k++ {
				o.until(o.now.Add(step))
				o.in(o.reread(1, lostFrom, lostTo, k))
			}
			streamEnd := o.now
			require.Greater(t, streamEnd.Sub(rr[0].at), 2*ivl, "a stream longer than the watch's interval")
			require.Len(t, o.cq.wcs, 1, "READ 1 completed")

			if !tc.lost {
				// READ 2's train follows the stream.
				o.until(o.now.Add(step))
				for k := range orderPkts {
					o.in(o.resp(2, k))
				}
				o.until(o.now.Add(4 * ivl))
				require.Empty(t, o.rereadsOf(2), "a READ queued behind a stream is not re-read")
				require.Len(t, o.cq.wcs, 2)
				require.Zero(t, o.r.Counters().SRReadRequestsLost)
				return
			}
			o.until(streamEnd.Add(3 * ivl / 2))
			at := o.rereadsOf(2)
			require.Len(t, at, 1, "a lost READ request is re-read once")
			if tc.later {
				require.True(t, at[0].Before(streamEnd), "the hole report finds it at once")
				require.Zero(t, o.r.Counters().SRReadRequestsLost, "not the watch")
			} else {
				require.False(t, at[0].Before(streamEnd.Add(ivl)), "not while the stream ahead of it arrives")
				require.Equal(t, uint64(1), o.r.Counters().SRReadRequestsLost)
			}
			require.Zero(t, o.r.Counters().Recovery.RTOExpiries, "found before the recovery timer")
		})
	}
}

// A lost last READ request is found by the watch: an interval after the
// last response of the READ before it, the READ is re-read whole. If the
// request arrived after all and its train was only taken late by this
// end, the responder drops the first whole duplicate after the train left
// and serves the next (responder firstWholeDuplicate), so the next
// re-read waits twice the interval, and the train that comes meanwhile
// ends the watch. If the re-read is lost too, that next re-read goes. The
// recovery timer's probe (at least retry.DefaultRecoveryFloor, 2 ms) does
// not re-read the part sooner: with an RTT of 500 µs its timeout falls
// between one and two of the watch's intervals.
func TestSRWatchLastReadBackoff(t *testing.T) {
	for _, tc := range []struct {
		name string
		rtt  time.Duration
		// answer: READ 2's train arrives answer/2 intervals after the
		// first re-read (0: never, the request and the re-read were
		// lost).
		answer time.Duration
	}{
		{name: "slow", rtt: rttTest, answer: 3},
		{name: "slow-probe-due", rtt: 500 * time.Microsecond, answer: 3},
		{name: "lost", rtt: rttTest},
		{name: "lost-probe-due", rtt: 500 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrderReads(t, 2, tc.rtt)
			o.now = o.now.Add(rttTest)
			for k := range orderPkts {
				o.in(o.resp(1, k))
			}
			last := o.now
			ivl := o.r.srInterval(o.now)
			require.Len(t, o.cq.wcs, 1)

			o.until(last.Add(ivl))
			at := o.rereadsOf(2)
			require.Len(t, at, 1, "the watch re-reads the last READ after an interval")
			require.Equal(t, last.Add(ivl), at[0])
			if tc.answer > 0 {
				// 1.5 intervals after the re-read: slower than one
				// interval, sooner than two.
				o.until(at[0].Add(tc.answer * ivl / 2))
				require.Len(t, o.rereadsOf(2), 1, "no second re-read within twice the interval")
				for k := range orderPkts {
					o.in(o.resp(2, k))
				}
				o.until(o.now.Add(8 * ivl))
				require.Len(t, o.rereadsOf(2), 1)
				require.Len(t, o.cq.wcs, 2)
				return
			}
			o.until(at[0].Add(2 * ivl))
			at = o.rereadsOf(2)
			require.Len(t, at, 2, "the lost re-read is re-read once more")
			require.Equal(t, 2*ivl, at[1].Sub(at[0]), "after twice the interval")
			require.Equal(t, uint64(2), o.r.Counters().SRReadRequestsLost)
		})
	}
}
