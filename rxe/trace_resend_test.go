package rxe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/syncbuf"
)

// traceEv is a trace line as the tests read it, with the optional fields
// of the resend events.
type traceEv struct {
	T        float64  `json:"t"`
	Dev      string   `json:"dev"`
	Ev       string   `json:"ev"`
	Engine   string   `json:"engine"`
	Op       string   `json:"op"`
	PSN      *uint32  `json:"psn"`
	Syndrome string   `json:"syndrome"`
	States   []string `json:"states"`
	Deadline int64    `json:"deadline_ns"`
	Cause    string   `json:"cause"`
	Timer    string   `json:"timer"`
	Action   string   `json:"action"`
	Resend   string   `json:"resend"`
}

// readTrace parses the lines of a trace the tests wrote.
func readTrace(t *testing.T, s string) []traceEv {
	t.Helper()
	var out []traceEv
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var ev traceEv
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		out = append(out, ev)
	}
	require.NoError(t, sc.Err())
	return out
}

// rnrTwice runs a SEND to a QP with no receive WQE whose RNR NAK reaches
// the requester twice (the copy while the RNR wait it started is under
// way), then posts the receive WQE; it returns the trace and the RNR NAKs
// the requester counted.
func rnrTwice(t *testing.T) (string, uint64) {
	var w syncbuf.Buffer
	var rnrs uint64
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPair(t, &w, "dup=RC_ACKNOWLEDGE#1,dir=recv")
		_, err := a.qp.PostSend(SendWR{ID: 5, Opcode: WRSend, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(0, 64)}})
		require.NoError(t, err)
		// The RNR wait is 0.64 ms (min_rnr_timer 12): post the receive
		// WQE during the first one.
		time.Sleep(100 * time.Microsecond)
		synctest.Wait()
		_, err = b.qp.PostRecv(RecvWR{ID: 6, SGList: []SGE{b.mr.SGE(0, 128)}})
		require.NoError(t, err)
		wc := waitVirtual(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status)
		synctest.Wait()
		rnrs = a.qp.Counters().Requester.RcvdRNRErr
	})
	return w.String(), rnrs
}

// TestTraceRNRWaitStarted: a late RNR NAK, one that comes while the RNR
// wait of an earlier one is under way, takes the completer through
// RNR_RETRY, but rnrRetry starts nothing for it (rxe_comp.c
// COMPST_RNR_RETRY after req_retry has reset the WQE: it is no longer
// being processed): the trace has one RNR retry event, for the NAK that
// started the wait, with the wait's length and the PSN the resend starts
// from.
func TestTraceRNRWaitStarted(t *testing.T) {
	got, rnrs := rnrTwice(t)
	require.Equal(t, uint64(2), rnrs, "the RNR NAK and its copy")
	var retries []traceEv
	for _, ev := range readTrace(t, got) {
		if ev.Ev == "retry" {
			retries = append(retries, ev)
		}
	}
	require.Len(t, retries, 1, "one RNR wait started")
	require.Equal(t, RetryRNR, retries[0].Cause)
	require.NotNil(t, retries[0].PSN)
	require.Equal(t, uint32(100), *retries[0].PSN, "resend from the SEND's PSN")
	require.Equal(t, int64(640*time.Microsecond), retries[0].Deadline, "the RNR wait (IBA 9.7.5.2.8, timer 12)")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestTraceRNRWaitEnd: the end of an RNR wait runs no completer pass (rxe's
// rnr_nak_timer only schedules the requester, which resends from the PSN
// req_retry went back to): its timer_fire names the timer and the resend,
// and no completer states follow it (the trace repeated the last pass's).
func TestTraceRNRWaitEnd(t *testing.T) {
	got, _ := rnrTwice(t)
	evs := readTrace(t, got)
	var fires []traceEv
	passes, recvs := 0, 0
	for _, ev := range evs {
		switch {
		case ev.Ev == "timer_fire":
			fires = append(fires, ev)
			if strings.Contains(ev.Timer, "retransmit") {
				recvs++ // the retransmit timer runs the completer
			}
		case ev.Ev == "recv" && ev.Engine == "completer":
			recvs++
		case ev.Ev == "states" && ev.Engine == "completer":
			passes++
		}
	}
	require.Equal(t, recvs, passes, "a completer pass per response and per retransmit timeout, none for other timers")
	require.NotEmpty(t, fires)
	f := fires[0]
	require.Equal(t, "rnr_wait", f.Timer)
	require.Equal(t, "rnr", f.Action)
	require.NotNil(t, f.PSN)
	require.Equal(t, uint32(100), *f.PSN)
	require.InDelta(t, 0.00064, f.T, 1e-9)
}

// TestTraceRecoveryProbe: the last packet of a WRITE is lost; the
// recovery timer (docs/recovery.md; IBA leaves recovery before the local
// ACK timeout to the requester) expires first and sends the oldest
// unacknowledged packet as a tail-loss probe. The timer_fire names the
// recovery timer and the probe's PSN, runs no completer pass, and the
// probe's send event says it is one.
func TestTraceRecoveryProbe(t *testing.T) {
	trace := traceOf(t, false, writeAfterSample, "drop=RC_RDMA_WRITE_LAST#1,dir=send")
	var probes []uint32
	passes, runs := 0, 0
	for _, ev := range readTrace(t, trace) {
		switch {
		case ev.Ev == "timer_fire":
			require.Equal(t, "recovery", ev.Timer, "the IB timeout never fires")
			require.Equal(t, "tail_probe", ev.Action)
			require.NotNil(t, ev.PSN)
			probes = append(probes, *ev.PSN)
		case ev.Ev == "recv" && ev.Engine == "completer":
			runs++
		case ev.Ev == "states" && ev.Engine == "completer":
			passes++
		}
	}
	require.Equal(t, runs, passes, "no completer pass for the recovery timer")
	// The first probe's answer acknowledges up to 103: the next expiry
	// probes 104.
	require.Equal(t, []uint32{101, 104}, probes)
}

// TestTraceProbeAnswered: a WRITE's third packet is lost and so is the
// sequence NAK for it; the recovery timer's tail-loss probe resends the
// oldest unacknowledged packet, whose answer acknowledges exactly it, so
// the requester goes back N from the next PSN at once (probeAnswered), a
// retry outside ERROR_RETRY. The trace has a retry event with that cause
// and the PSN it resends from, and each resent packet says what kind of
// resend it is.
func TestTraceProbeAnswered(t *testing.T) {
	trace := traceOf(t, false, writeAfterSample, "drop=RC_RDMA_WRITE_MIDDLE#1,dir=send", "drop=RC_ACKNOWLEDGE#2,dir=recv")
	requireOneRetry(t, trace, "probe answered", "go_back_n", 102,
		map[uint32]string{101: "tail_probe ", 102: "go_back_n ", 103: "go_back_n ", 104: "go_back_n "})
}

// TestTraceReadGapAhead: of two READs, the first's last response is lost
// and so is a middle response of the second. The second's first response
// starts a re-read of the first READ's rest (an implied NAK); its
// response after the hole starts a re-read of its own rest (readGapAhead,
// outside ERROR_RETRY). Both are retry events, and both READ requests
// sent again are re-reads.
func TestTraceReadGapAhead(t *testing.T) {
	var w syncbuf.Buffer
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPair(t, &w, "drop=RC_RDMA_READ_RESPONSE_LAST#1,dir=recv", "drop=RC_RDMA_READ_RESPONSE_MIDDLE#3,dir=recv")
		for i := range 2 {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled,
				SGList: []SGE{a.mr.SGE(i*4096, 4096)}, RemoteAddr: b.mr.Addr() + uint64(i*4096), RKey: b.mr.RKey()})
			require.NoError(t, err)
		}
		for range 2 {
			require.Equal(t, WCSuccess, waitVirtual(t, a.cq).Status)
		}
		synctest.Wait()
	})
	var causes, rereads []string
	for _, ev := range readTrace(t, w.String()) {
		switch {
		case ev.Ev == "retry":
			causes = append(causes, ev.Cause+"/"+ev.Resend)
		case ev.Ev == "send" && ev.Engine == "requester" && ev.Resend != "":
			rereads = append(rereads, ev.Resend)
		}
	}
	require.Equal(t, []string{"implied NAK/reread", "gap in a later READ/reread"}, causes, w.String())
	require.Equal(t, []string{"reread", "reread"}, rereads)
}

// TestTraceHoleReport: under selective repeat a WRITE's second packet is
// lost; the responder reports the hole (packet.NAKSelectiveRepeat) and the
// requester resends that packet only (srHole, srResend), which the
// completer's states do not show (the selective-repeat completer is no
// rxe state machine). The trace has a retry event for the report and the
// resend says it is a selective-repeat one.
func TestTraceHoleReport(t *testing.T) {
	trace := traceOf(t, true, write4K, "drop=RC_RDMA_WRITE_MIDDLE#1,dir=send")
	requireOneRetry(t, trace, "hole report", "selective_repeat", 101, map[uint32]string{101: "selective_repeat "})
}

// TestTraceSRTimeoutProbe: under selective repeat the local ACK timeout
// goes back N no more: errorRetry starts no retry and the oldest
// unacknowledged packet alone is resent as a probe (OnTimeout, srProbe).
// Each timer_fire says so, the completer's ERROR_RETRY passes have no
// retry event, and the resends are the probes.
func TestTraceSRTimeoutProbe(t *testing.T) {
	trace := traceOf(t, true, write4K, "drop=RC_RDMA_WRITE_LAST#1,dir=send")
	var fires []string
	retries := 0
	resends := map[uint32]string{}
	for _, ev := range readTrace(t, trace) {
		switch {
		case ev.Ev == "timer_fire":
			require.NotNil(t, ev.PSN, trace)
			fires = append(fires, fmt.Sprintf("%s/%s/%d", ev.Timer, ev.Action, *ev.PSN))
		case ev.Ev == "retry":
			retries++
		case ev.Ev == "send" && ev.Engine == "requester" && ev.Resend != "":
			resends[*ev.PSN] += ev.Resend + " "
		}
	}
	// The first probe's answer acknowledges up to 102 (the responder had
	// them, and no AckReq had asked); the next timeout probes 103.
	require.Equal(t, []string{"retransmit/tail_probe/100", "retransmit/tail_probe/103"}, fires, trace)
	require.Zero(t, retries)
	require.Equal(t, map[uint32]string{100: "tail_probe ", 103: "tail_probe "}, resends)
}

// retriesAndResends returns a trace's retry events and, per PSN, the
// kinds of the requester's resends of it, each followed by a space.
func retriesAndResends(t *testing.T, trace string) ([]traceEv, map[uint32]string) {
	t.Helper()
	var retries []traceEv
	resends := map[uint32]string{}
	for _, ev := range readTrace(t, trace) {
		switch {
		case ev.Ev == "retry":
			retries = append(retries, ev)
		case ev.Ev == "send" && ev.Engine == "requester" && ev.Resend != "":
			resends[*ev.PSN] += ev.Resend + " "
		}
	}
	return retries, resends
}

// writeAfterSample WRITEs 64 bytes from a to b, which gives the RTT sample
// the recovery timer needs, then, a millisecond later, 4 KiB (in a
// synctest bubble).
func writeAfterSample(t *testing.T, a, b *end) {
	t.Helper()
	writeWait(t, a, b, 2, 64)
	time.Sleep(time.Millisecond)
	writeWait(t, a, b, 3, 4<<10)
}

// writeWait WRITEs n bytes from the start of a's buffer to b's as work
// request id and waits for its successful completion.
func writeWait(t *testing.T, a, b *end, id uint64, n int) {
	t.Helper()
	_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRRDMAWrite, Flags: SendSignaled,
		SGList: []SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitVirtual(t, a.cq).Status)
}

// TestTraceSRLostResponse: under selective repeat a READ's second
// response is lost; the requester places the later responses and finds
// the hole itself once srReorder later PSNs have come (srDetect), then
// re-reads that one PSN. The trace has one retry event saying the loss was
// detected from later responses, naming the lost PSN, and the resend is a
// re-read, as the retry event says.
func TestTraceSRLostResponse(t *testing.T) {
	var w syncbuf.Buffer
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPairSR(t, &w, true, "drop=RC_RDMA_READ_RESPONSE_MIDDLE#1,dir=recv")
		_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(0, 8<<10)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitVirtual(t, a.cq).Status)
		synctest.Wait()
	})
	requireOneRetry(t, w.String(), "lost response", "reread", 101, map[uint32]string{101: "reread "})
}

// requireOneRetry checks that trace has exactly one retry event, with
// cause, resend kind and PSN, and that the requester's resends are
// resends (per PSN, as retriesAndResends gives them).
func requireOneRetry(t *testing.T, trace, cause, resend string, psn uint32, resends map[uint32]string) {
	t.Helper()
	retries, got := retriesAndResends(t, trace)
	require.Len(t, retries, 1, trace)
	require.Equal(t, cause, retries[0].Cause)
	require.Equal(t, resend, retries[0].Resend)
	require.NotNil(t, retries[0].PSN)
	require.Equal(t, psn, *retries[0].PSN)
	require.Equal(t, resends, got, trace)
}

// traceOf runs run on a tracedPairSR with rules (selective repeat
// negotiated when sr) in a synctest bubble until every goroutine of the
// bubble is durably blocked, and returns the trace written meanwhile.
func traceOf(t *testing.T, sr bool, run func(t *testing.T, a, b *end), rules ...string) string {
	t.Helper()
	var w syncbuf.Buffer
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPairSR(t, &w, sr, rules...)
		run(t, a, b)
		synctest.Wait()
	})
	return w.String()
}

// write4K WRITEs 4 KiB from a to b as work request 3 and waits for its
// completion (writeWait).
func write4K(t *testing.T, a, b *end) { writeWait(t, a, b, 3, 4<<10) }
