package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// An IB ACK timeout (IBA 9.7.6.1.3) that fires while the lost-READ-request
// watch has the oldest READ part still spends retry_cnt, but re-reads
// only what nobody has asked for again: a part the watch re-read less than
// its wait ago (the interval doubled per re-read, srWatchExpired) is left
// to the watch, which re-reads it at the end of that wait if it is still
// unanswered. A whole re-read at the timeout went a few milliseconds after
// the watch's, and the responder, which drops the first whole duplicate
// after a train left and serves the next (responder firstWholeDuplicate),
// then sent the whole READ again. A part nobody re-read yet is re-read at
// the timeout, and a dead peer still ends the QP with RETRY_EXC_ERR after
// retry_cnt + 1 timeouts.
//
// The default ACK timeout (-u 14) is 67.1 ms, and the RTTs of the rows put
// it either after the watch's first re-read (RTT 20 ms: watch interval
// 60 ms, its re-reads at 60 ms, then 120 ms and 240 ms apart) or before it
// (RTT 30 ms: interval 90 ms).
func TestSRTimeoutWatchedRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		rtt  time.Duration
		// atTimeout: READ 2's re-reads sent at the first IB timeout.
		atTimeout int
		// watchFirst: the watch re-read READ 2 before the timeout.
		watchFirst bool
	}{
		{name: "watch-asked", rtt: 20 * time.Millisecond, atTimeout: 0, watchFirst: true},
		{name: "nobody-asked", rtt: 30 * time.Millisecond, atTimeout: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrderReads(t, 2, tc.rtt)
			o.now = o.now.Add(tc.rtt)
			for k := range orderPkts {
				o.in(o.resp(1, k))
			}
			last := o.now
			ivl := o.r.srWatchInterval(o.now)
			ack := o.r.ack
			require.Len(t, o.cq.wcs, 1)
			require.True(t, o.r.srWatchHasHead(), "the watch has READ 2")
			require.Equal(t, tc.watchFirst, ivl < ack)

			// Up to the first IB timeout, and what it sends.
			atIB := ibTimeouts(o, last.Add(ack).Add(-time.Nanosecond))
			require.Empty(t, atIB)
			require.Equal(t, tc.watchFirst, len(o.rereadsOf(2)) == 1, "the watch re-read READ 2")
			atIB = ibTimeouts(o, last.Add(ack))
			require.Equal(t, []int{tc.atTimeout}, atIB, "packets sent at the IB timeout")
			require.Equal(t, uint8(6), o.r.retryBudget.Remaining(), "the timeout spends a retry")
			require.True(t, o.r.retrans.Armed(), "the IB timer runs on")

			// The peer is dead: RETRY_EXC_ERR after retry_cnt + 1 IB
			// timeouts. Each of them falls within the watch's wait after
			// a re-read of READ 2 (at most 4 intervals, less than 4 ACK
			// timeouts), so none re-reads it again.
			atIB = ibTimeouts(o, o.now.Add(10*time.Second))
			st, failed := o.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCRetryExcErr, st)
			require.Len(t, atIB, int(o.r.cfg.RetryCnt), "the IB timeouts after the first")
			require.Equal(t, make([]int, o.r.cfg.RetryCnt), atIB, "packets sent at each")
			at := o.rereadsOf(2)
			require.GreaterOrEqual(t, len(at), 3, "the watch re-reads on")
			for i := 1; i < len(at); i++ {
				require.GreaterOrEqual(t, at[i].Sub(at[i-1]), 2*ivl, "re-read %d: at most one per watch wait", i)
			}
			for _, s := range o.sent[2:] {
				require.Equal(t, packet.RCRDMAReadRequest, s.p.Opcode())
				require.Equal(t, o.first(2), s.p.PSN(), "only READ 2 is asked for again")
			}
		})
	}
}

// The watch's wait after a re-read is its interval, doubled per re-read,
// as the interval stood when the watch re-read (srWatchExpired). A delay
// learned from a stall (srWatchAnswered) is part of that interval and
// halves every retry.SpuriousHalfLife (retry.RecoveryTimer.Decay): when
// it halves between the watch's re-read and an IB ACK timeout, the
// timeout still finds the watch waiting for its re-read and sends no
// probe, which would be a second whole re-read of READ 2 well before the
// watch's next one. Asking whether the watch waits changes nothing in
// the recovery timer.
//
// With an RTT of 1 ms (interval 3 ms) and 12 ms learned, the watch re-reads
// READ 2 12 ms and 36 ms after READ 1's last response and next at 84 ms;
// the delay halves at 49 ms, and the IB timeout (-u 14) is at 67.1 ms.
func TestSRTimeoutWatchDecayed(t *testing.T) {
	const (
		rtt     = time.Millisecond
		learned = 12 * time.Millisecond
		idle    = 200 * time.Millisecond
	)
	o := newOrderHarness(t, 2, rtt)
	o.r.rec.timer.Learn(o.now, learned) // a stall learned before the READs
	halves := o.now.Add(retry.SpuriousHalfLife)
	o.now = o.now.Add(idle)
	o.read(1)
	o.read(2)
	o.collect()
	require.Len(t, o.sent, 2, "both READ requests")
	o.now = o.now.Add(rtt)
	for k := range orderPkts {
		o.in(o.resp(1, k))
	}
	last := o.now
	ack := o.r.ack
	require.Len(t, o.cq.wcs, 1)
	require.True(t, o.r.srWatchHasHead(), "the watch has READ 2")
	require.Equal(t, learned, o.r.srWatchInterval(last), "the learned delay sets the interval")

	require.Empty(t, ibTimeouts(o, last.Add(ack).Add(-time.Nanosecond)))
	require.Equal(t, []time.Time{last.Add(learned), last.Add(3 * learned)}, o.rereadsOf(2), "the watch's re-reads")
	require.Equal(t, last.Add(7*learned), o.r.sr.watch.When(), "the watch waits 4 intervals after its second re-read")
	require.True(t, halves.After(last.Add(3*learned)) && halves.Before(last.Add(ack)), "the delay halves after the second re-read, before the IB timeout")

	before := o.r.rec.timer
	asked := o.r.srWatchAsked(last.Add(ack))
	require.Equal(t, before, o.r.rec.timer, "srWatchAsked leaves the recovery timer alone")
	require.True(t, asked, "the watch waits for its re-read")

	require.Equal(t, []int{0}, ibTimeouts(o, last.Add(ack)), "packets sent at the IB timeout")
	require.Len(t, o.rereadsOf(2), 2)
	require.Equal(t, uint8(6), o.r.retryBudget.Remaining(), "the timeout spends a retry")
	require.True(t, o.r.retrans.Armed(), "the IB timer runs on")
	require.Equal(t, learned/2, o.r.srWatchInterval(o.now), "the learned delay halved")

	// The peer is dead: the watch re-reads on, the IB timeouts send
	// nothing, and the QP fails with RETRY_EXC_ERR.
	atIB := ibTimeouts(o, o.now.Add(10*time.Second))
	st, failed := o.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRetryExcErr, st)
	require.Equal(t, make([]int, o.r.cfg.RetryCnt), atIB, "packets sent at the IB timeouts after the first")
	require.Greater(t, len(o.rereadsOf(2)), 2, "the watch re-reads on")
}

// ibTimeouts runs o's timers up to t, as orderHarness.until does, and
// returns how many packets the requester sent at each IB ACK timeout on
// the way (an OnTimeout call that counted one in Counters.Timeouts).
func ibTimeouts(o *orderHarness, t time.Time) []int {
	o.t.Helper()
	o.collect()
	var n []int
	for !o.r.stopped {
		dl := o.r.Deadline()
		if dl.IsZero() || dl.After(t) {
			break
		}
		o.now = dl
		was, sent := o.r.Counters().Timeouts, len(o.sent)
		o.r.OnTimeout(o.now)
		o.collect()
		if o.r.Counters().Timeouts != was {
			n = append(n, len(o.sent)-sent)
		}
	}
	o.now = t
	return n
}
