package rxe

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/retry"
)

// gateWaitTimeout is the local ACK timeout attribute of gateWaitPair's
// QPs: 16.8 ms.
const gateWaitTimeout = 12

// gateWaitPair is a UDP pair whose requester a has the local ACK timeout
// gateWaitTimeout and the given retry_cnt, and a's socket reader.
func gateWaitPair(t *testing.T, retryCnt uint8) (a, z *end, r *connReader) {
	t.Helper()
	a, z, _ = udpPairWith(t, Options{}, ConnectOptions{MTU: MTU4096, Timeout: gateWaitTimeout, RetryCnt: retryCnt, Explicit: QPAttrRetryCnt})
	r = a.dev.vecs[a.qp.vec.id].reader
	require.NotNil(t, r.shared, "the UDP netdev reads in turn")
	return a, z, r
}

// releaseGate lets r's gate go without reading the socket, as a reader
// that the process's scheduler let run again would after its batch.
func releaseGate(r *connReader) {
	for r.gate.Unlock() {
		// Taken back for us because the receive goroutine found the gate
		// held: let it go again without reading.
	}
}

// TestRetransmitWaitsForHeldGate holds the requester's socket gate, as a
// reader handling a batch whose thread gets no processor, while its WRITE's
// ACK waits unread in the socket, for many times the QP's whole failure
// budget ((retry_cnt+1) × ACK timeout) but less than gateWaitCap. The
// retransmit deadline must wait for the gate and then read the ACK: the
// WRITE completes and no timeout is counted (issue 13: the budget passes
// only without progress from the peer); a deadline that gave up on the
// gate after one try would spend the budget and fail the QP with
// RETRY_EXC_ERR. While the deadline waits, a WRITE posted then still
// leaves.
func TestRetransmitWaitsForHeldGate(t *testing.T) {
	const retryCnt = 1
	a, z, r := gateWaitPair(t, retryCnt)
	budget := time.Duration(retryCnt+1) * retry.AckTimeout(gateWaitTimeout)
	hold := 5 * budget
	require.Less(t, hold, a.qp.gateWaitCap()/4, "the hold stays well inside the cap, even on a loaded host")
	write := writer64(t, a, z)
	before := a.qp.Counters().Requester.Timeouts
	posted := writeUnread(t, r, z, write, 2)
	// Once the deadline has come, a new WRITE still leaves: the step goes
	// on while the deadline waits for the gate.
	time.Sleep(hold/2 - time.Since(posted))
	zRcvd := z.dev.Counters().RcvdPkts
	write(3)
	for z.dev.Counters().RcvdPkts == zRcvd {
		require.Less(t, time.Since(posted), a.qp.gateWaitCap()/2, "the WRITE posted while the deadline waits for the gate did not leave")
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(hold - time.Since(posted))
	// The holder reads and handles the socket, as a busy poller does at
	// the end of its batch, and lets the gate go.
	r.pollLocked()
	for _, id := range []uint64{2, 3} {
		wc := waitWC(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status, "the ACK in the socket is progress: %v", wc)
		require.Equal(t, id, wc.ID)
	}
	require.Equal(t, before, a.qp.Counters().Requester.Timeouts, "no timeout counted while the ACK waited behind the held gate")
	// With nothing outstanding the QP files no wake-up, even with the
	// next try of a past wait for the gate left behind: the wait would
	// otherwise wake the QP again and again.
	for a.qp.slot.filed.Load() != notFiled { // a wake-up filed earlier comes, once
		require.Less(t, time.Since(posted), testutil.Bound(), "the QP stays filed")
		time.Sleep(time.Millisecond)
	}
	a.qp.mu.Lock()
	idle := a.qp.timerAt.IsZero()
	a.qp.slot.gateRetry = time.Now().Add(-time.Millisecond)
	a.qp.armTimers()
	a.qp.mu.Unlock()
	require.True(t, idle, "nothing is outstanding")
	require.Equal(t, int64(notFiled), a.qp.slot.filed.Load(), "a QP without a deadline filed the gate's next try")
}

// TestRetransmitGateWaitIsBounded holds the requester's socket gate for
// good (a wedged reader, or one that a flood keeps busy), so the WRITE's
// ACK is never read: the QP still fails with RETRY_EXC_ERR, after its
// ACK timeout plus gateWaitCap (retry_cnt 0: one expiry), not at the
// first expiry and not never.
func TestRetransmitGateWaitIsBounded(t *testing.T) {
	a, z, r := gateWaitPair(t, 0)
	write := writer64(t, a, z)
	posted := writeUnread(t, r, z, write, 2)
	defer releaseGate(r)
	wc := waitWC(t, a.cq)
	failed := time.Since(posted)
	require.Equal(t, WCRetryExcErr, wc.Status)
	require.Equal(t, uint64(2), wc.ID)
	limit := retry.AckTimeout(gateWaitTimeout) + a.qp.gateWaitCap()
	require.GreaterOrEqual(t, failed, limit, "the expiry waited for the gate up to the cap")
	require.Less(t, failed, limit+5*time.Second, "the wait for the gate is bounded")
}

// TestGateWaitRetryWork: while a due retransmit deadline waits for a held
// socket gate, each of its tries (one every timeoutReadWait) steps the
// waiting QP alone, however many other connected QPs with nothing due
// its vector has (those with a deadline to come stay in the timer queue's
// heap), files its next try timeoutReadWait on, and allocates nothing
// (checked without the race detector). The test is the vector's
// transmit pass: it holds txMu and steps what the timer puts on the run
// queue.
func TestGateWaitRetryWork(t *testing.T) {
	for _, qps := range []int{1, 64, 1024} {
		t.Run(fmt.Sprintf("qps=%d", qps), func(t *testing.T) {
			a, z, r := gateWaitPair(t, 7)
			// The other QPs have nothing due: half of them have nothing
			// outstanding, half a WRITE that z does not execute (it comes
			// from a QP z's QP is not connected to, with a PSN z's QP
			// takes for a duplicate or out of sequence: it answers a.qp
			// with an ACK of its last PSN or a sequence-error NAK naming
			// the PSN it expects, a.qp's next) and a deadline 4.3 s on.
			var pending []*QP
			for i := range qps - 1 {
				qp, err := a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1}})
				require.NoError(t, err)
				require.NoError(t, qp.Connect(qp.Info(1), z.qp.Info(1), ConnectOptions{MTU: MTU4096, Timeout: 20}))
				if i%2 == 1 {
					_, err := qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 64)},
						RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()})
					require.NoError(t, err)
					pending = append(pending, qp)
				}
			}
			write := writer64(t, a, z)
			before := a.qp.Counters().Requester.Timeouts
			writeUnread(t, r, z, write, 2)
			defer releaseGate(r)
			waiting := func() bool {
				a.qp.mu.Lock()
				defer a.qp.mu.Unlock()
				return !a.qp.slot.gateRetry.IsZero()
			}
			bound := time.Now().Add(testutil.Bound())
			for !waiting() {
				require.True(t, time.Now().Before(bound), "the deadline never waited for the gate")
				time.Sleep(time.Millisecond)
			}
			for _, qp := range pending {
				qp.mu.Lock()
				at := qp.timerAt
				qp.mu.Unlock()
				require.True(t, at.After(time.Now()), "a deadline to come")
			}
			v := a.qp.vec
			v.txMu.Lock()
			defer v.txMu.Unlock()
			steps, others, early := 0, 0, 0
			try := func() {
				for !v.runnable() {
					if time.Now().After(bound) {
						return // the checks below fail
					}
					time.Sleep(20 * time.Microsecond)
				}
				for qp := v.nextRunnable(); qp != nil; qp = v.nextRunnable() {
					if qp != a.qp {
						others++
					}
					steps++
					if k, _ := qp.step(v.txMsgs, v.txOwners, 0); k != 0 {
						others++ // a QP with nothing to send built datagrams
					}
				}
				// The next try is filed no earlier than timeoutReadWait on.
				a.qp.mu.Lock()
				next := a.qp.slot.gateRetry
				a.qp.mu.Unlock()
				if next.IsZero() || a.qp.slot.filed.Load() < int64(next.Sub(timeBase)) {
					early++
				}
			}
			const tries = 50
			allocs := testing.AllocsPerRun(tries, try)
			require.True(t, waiting(), "the deadline still waits for the gate")
			require.Equal(t, before, a.qp.Counters().Requester.Timeouts, "no timeout acted on")
			require.Zero(t, others, "other QPs stepped, or datagrams built, during the tries")
			require.Zero(t, early, "tries whose next try was not filed timeoutReadWait on")
			require.LessOrEqual(t, steps, tries+1, "steps of the waiting QP")
			if !benchRaceEnabled { // allocation counts are not meaningful under the race detector
				require.Zero(t, allocs, "allocations per try of the gate")
			}
		})
	}
}

// TestGateWaitCap: a due retransmit deadline waits for a held socket gate
// until gateWaitCap past the deadline and no longer, the cap being the
// QP's local ACK timeout, at least 1 s (waitsForGate, read at explicit
// times). The QP's peer is gone, so its WRITE stays outstanding (for
// 8 tries of at least 0.54 s); the test holds the QP's lock and puts its
// deadline past the retransmit timer's.
func TestGateWaitCap(t *testing.T) {
	for _, tc := range []struct {
		timeout uint8
		cap     time.Duration
	}{
		{17, time.Second},          // 0.54 s: the floor
		{20, retry.AckTimeout(20)}, // 4.3 s
	} {
		t.Run(fmt.Sprintf("timeout=%d", tc.timeout), func(t *testing.T) {
			a, b := smallPair(t, "pipe", qpOpts{timeout: tc.timeout, retryCnt: 7}, qpOpts{})
			require.NoError(t, b.dev.Close())
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return a.qp.Counters().Requester.PacketsSent > 0 }, testutil.Bound(), 100*time.Microsecond,
				"the WRITE left")
			a.qp.mu.Lock()
			defer a.qp.mu.Unlock()
			require.Equal(t, tc.cap, a.qp.gateWaitCap())
			saved := a.qp.timerAt
			defer func() { a.qp.timerAt = saved }()
			// Past the retransmit timer's deadline, armed at the last send.
			due := time.Now().Add(retry.AckTimeout(tc.timeout) + time.Millisecond)
			require.NotZero(t, a.qp.req.Expired(due)&requester.TimerRetransmit, "the WRITE is outstanding")
			a.qp.timerAt = due
			for _, c := range []struct {
				after time.Duration
				wait  bool
			}{
				{0, true},
				{tc.cap - time.Nanosecond, true},
				{tc.cap, false},
				{tc.cap + time.Millisecond, false},
				{2 * tc.cap, false},
			} {
				require.Equal(t, c.wait, a.qp.waitsForGate(due.Add(c.after)), "%v past the deadline", c.after)
			}
		})
	}
}

// TestGateWaitOnlyRetransmit: only an expiry of the retransmit timer, the
// one that spends retry_cnt, waits for a held socket gate beyond one
// try; a due RNR wait (which spends no retry_cnt) does not
// (waitsForGate). The peer has no receive WQE, so a's SEND draws RNR
// NAKs and waits its min_rnr_timer (491.52 ms) between tries.
func TestGateWaitOnlyRetransmit(t *testing.T) {
	a, _ := smallPair(t, "pipe", qpOpts{}, qpOpts{minRNRTimer: 31})
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	// Between RNR waits the SEND is outstanding again, under the
	// retransmit timer: look until the QP is in a wait.
	bound := time.Now().Add(testutil.Bound())
	for {
		a.qp.mu.Lock()
		at := a.qp.timerAt
		due := a.qp.req.Expired(at)
		if !at.IsZero() && due&requester.TimerRNR != 0 && due&requester.TimerRetransmit == 0 {
			waits := a.qp.waitsForGate(at)
			a.qp.mu.Unlock()
			require.False(t, waits, "a due RNR wait waits for the gate")
			return
		}
		a.qp.mu.Unlock()
		require.True(t, time.Now().Before(bound), "the SEND never waited for an RNR NAK's timer")
		time.Sleep(100 * time.Microsecond)
	}
}

// TestSilenceTimerWaitsForHeldGate holds the requester's socket gate, as a
// reader whose thread gets no processor while handling a batch, while its
// WRITE's ACK waits unread in the socket, and asks, at explicit times past
// the QP's due recovery deadline, whether the deadline may wait longer for
// the gate: up to silenceGateWaitCap it must (an answer in the holder's
// batch would make the tail-loss probe spurious), from then on it must
// not; and the cap stays below the retransmit timer's wait and half the
// ACK timeout, so the recovery still comes before the retransmit timer.
//
// The QP's ACK timeout is testutil.QPTimeout (1.07 s): the recovery
// timeout, max(RTO, 2·SRTT), is capped at the ACK timeout, and under
// -race on a loaded host the four WRITEs' round trips gave SRTTs that
// put it at or near perftest's 67 ms, where the retransmit deadline came
// first or within the cap (2 of 60 runs beside two busy loops and a full
// suite).
func TestSilenceTimerWaitsForHeldGate(t *testing.T) {
	a, z, _ := udpPairWith(t, Options{}, ConnectOptions{MTU: MTU4096, Timeout: testutil.QPTimeout})
	r := a.dev.vecs[a.qp.vec.id].reader
	require.NotNil(t, r.shared, "the UDP netdev reads in turn")
	write := writer64(t, a, z)
	for id := range uint64(4) { // RTT samples: the recovery timer runs near its floor
		write(id)
		require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	}
	writeUnread(t, r, z, write, 10)
	defer releaseGate(r)
	capWait := a.qp.silenceGateWaitCap()
	require.Equal(t, silenceGateWaitMax, capWait, "a 1.07 s ACK timeout leaves the ceiling")
	require.Less(t, capWait, a.qp.gateWaitCap())
	a.qp.mu.Lock()
	defer a.qp.mu.Unlock()
	at := a.qp.timerAt
	require.NotZero(t, at, "the WRITE has a deadline")
	for _, c := range []struct {
		after time.Duration
		waits bool
	}{
		{0, true},
		{timeoutReadWait, true},
		{capWait - time.Microsecond, true},
		{capWait, false},
		{capWait + timeoutReadWait, false},
	} {
		now := at.Add(c.after)
		require.Equal(t, requester.TimerRecovery, a.qp.req.Expired(now), "%v past the deadline, only the recovery timer is due", c.after)
		require.Equal(t, c.waits, a.qp.waitsForGate(now), "%v past the recovery deadline", c.after)
	}
}

// TestSilenceGateWaitCap checks silenceGateWaitCap against the QP's local
// ACK timeout: half of it, at most silenceGateWaitMax.
func TestSilenceGateWaitCap(t *testing.T) {
	for _, c := range []struct {
		timeout uint8
		want    time.Duration
	}{
		{8, retry.AckTimeout(8) / 2},   // 1.05 ms: half
		{12, retry.AckTimeout(12) / 2}, // 16.8 ms: half
		{14, silenceGateWaitMax},       // 67 ms: the ceiling
		{20, silenceGateWaitMax},
	} {
		qp := &QP{}
		qp.attr.Timeout = c.timeout
		require.Equal(t, c.want, qp.silenceGateWaitCap(), "timeout %d", c.timeout)
	}
}

// TestGateRetryEndsWithItsDeadline: the next try of a deadline that waits
// for a held gate (gateRetry) holds back the QP's wake-up only while the
// QP's deadline is still the one that waits (gateFor). Once an answer
// read meanwhile has moved the deadline, a new one due before that try
// is filed at its own time, not up to timeoutReadWait late.
func TestGateRetryEndsWithItsDeadline(t *testing.T) {
	a, _, _ := gateWaitPair(t, 0)
	filedAt := func() time.Time {
		return timeBase.Add(time.Duration(a.qp.slot.filed.Load()))
	}
	a.qp.mu.Lock()
	defer a.qp.mu.Unlock()
	d := time.Now().Add(time.Hour) // far off: no wake-up comes during the test
	a.qp.timerAt = d
	a.qp.slot.gateFor, a.qp.slot.gateRetry = d, d.Add(timeoutReadWait)
	a.qp.armTimers()
	require.True(t, filedAt().Equal(d.Add(timeoutReadWait)), "the waiting deadline is filed at its next try")

	moved := d.Add(timeoutReadWait / 10)
	a.qp.timerAt = moved
	a.qp.armTimers()
	require.True(t, filedAt().Equal(moved), "a new deadline is filed at its own time, not %v late at the old wait's try", filedAt().Sub(moved))
	a.qp.timerAt = time.Time{}
}
