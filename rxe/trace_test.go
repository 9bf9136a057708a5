package rxe

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
)

var updateTrace = flag.Bool("rxe.update-trace", false, "rewrite testdata/trace_*.jsonl")

// tracedPair connects two traced devices through a pipe whose a-side drops
// as rules say, on synctest's virtual clock.
func tracedPair(t *testing.T, w *syncbuf.Buffer, rules ...string) (*end, *end) {
	return tracedPairSR(t, w, false, rules...)
}

// tracedPairSR is tracedPair with selective repeat negotiated when sr.
func tracedPairSR(t *testing.T, w *syncbuf.Buffer, sr bool, rules ...string) (*end, *end) {
	pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 64})
	sink, _ := NewTraceWriter(w)
	da, db := openPairWith(t, faults.Wrap(pa, faults.Config{Seed: 1, Rules: parseRules(t, rules...)}), pb,
		Options{LinkMTU: 1500, Trace: sink, CompVectors: 1}, "trace-a", "trace-b")
	a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
	// The golden traces are of IBTA go-back-N, the wire any RoCE peer
	// gets: neither end offers selective repeat.
	o := ConnectOptions{MTU: MTU1024, Timeout: 10, RetryCnt: 7, RNRRetry: 7, NoSelectiveRepeat: !sr}
	ia, ib := a.qp.Info(100), b.qp.Info(500)
	if !sr {
		ia.SelectiveRepeat, ib.SelectiveRepeat = false, false
	}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))
	return a, b
}

// TestTraceTimeout: a WRITE whose only packet is lost is resent when the
// ACK timer fires; the trace shows the send, the timer armed for the
// timeout (4.096 µs × 2^10) and fired, the completer's pass through
// ERROR_RETRY, the retry with its cause, the resend, the responder's
// states, the ACK and the completion, at exact virtual times.
func TestTraceTimeout(t *testing.T) {
	var w syncbuf.Buffer
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPair(t, &w, "drop=RC_RDMA_WRITE_ONLY#1,dir=send")
		_, err := a.qp.PostSend(SendWR{ID: 7, Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(0, 100)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		wc := waitVirtual(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status)
		synctest.Wait()
	})
	got := w.String()
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(got))
	for sc.Scan() {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		require.Contains(t, ev, "t")
		kinds = append(kinds, ev["ev"].(string))
	}
	require.Contains(t, kinds, string(TraceTimerFire))
	require.Contains(t, got, `"ev":"retry","engine":"requester","cause":"timeout"`)
	require.Contains(t, got, `"states":["GET_ACK","GET_WQE","CHECK_PSN","CHECK_ACK","WRITE_SEND"`)
	require.Contains(t, got, `"ev":"complete","engine":"completer","status":"SUCCESS","wc_opcode":"RDMA_WRITE","wr_id":7`)
	const golden = "testdata/trace_write_timeout.jsonl"
	if *updateTrace {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// TestTraceOffIsNil: without Options.Trace no sink is wrapped around the
// CQs and the responder collects no states.
func TestTraceOffIsNil(t *testing.T) {
	a, b := newPair(t, "pipe", MTU1024)
	_, ok := a.qp.sink(a.cq, "completer").(cqSink)
	require.True(t, ok)
	require.Nil(t, b.qp.responderTrace())
	transfer(t, a, b, WRSend, 100, 1)
	require.Nil(t, b.qp.respStates)
}

// TestTraceTimelineUDP: over UDP, where one read takes many datagrams and
// the QP handles them one after another, each event is stamped when the
// device records it, so the trace file reads as a timeline in its own
// order (no line's time before the line above it) and every request is
// received at or after it was sent.
func TestTraceTimelineUDP(t *testing.T) {
	var w syncbuf.Buffer
	sink, werr := NewTraceWriter(&w)
	a, b, _ := udpPair(t, Options{Trace: sink})
	const n, size = 32, 64 << 10
	for i := range n {
		flags := SendFlags(0)
		if i == n-1 {
			flags = SendSignaled
		}
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: flags,
			SGList: []SGE{a.mr.SGE(i*size, size)}, RemoteAddr: b.mr.Addr() + uint64(i*size), RKey: b.mr.RKey()})
		require.NoError(t, err)
	}
	require.Equal(t, WCSuccess, waitWCs(t, a.cq, 1)[0].Status)
	a.dev.Close()
	b.dev.Close()
	require.NoError(t, werr())

	type line struct {
		T      float64 `json:"t"`
		Dev    string  `json:"dev"`
		Ev     string  `json:"ev"`
		Engine string  `json:"engine"`
		PSN    *uint32 `json:"psn"`
	}
	sent := map[uint32]float64{}
	prev, recvs := -1.0, 0
	sc := bufio.NewScanner(strings.NewReader(w.String()))
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		require.GreaterOrEqual(t, l.T, prev, "a line back in time: %s", sc.Text())
		prev = l.T
		switch {
		case l.Ev == string(TraceSend) && l.Engine == "requester":
			if _, ok := sent[*l.PSN]; !ok {
				sent[*l.PSN] = l.T
			}
		case l.Ev == string(TraceRecv) && l.Engine == "responder":
			recvs++
			st, ok := sent[*l.PSN]
			require.True(t, ok, "PSN %d received, never sent", *l.PSN)
			require.GreaterOrEqual(t, l.T, st)
		}
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, recvs, n*size/4096, "every request packet received")
}

// TestTraceWriterNeverGoesBack: an event stamped before the line written
// last (its goroutine took the writer's lock later) is written at that
// line's time, so the file's times never go back.
func TestTraceWriterNeverGoesBack(t *testing.T) {
	var w syncbuf.Buffer
	sink, werr := NewTraceWriter(&w)
	t0 := time.Unix(1_700_000_000, 0)
	for _, us := range []int{0, 30, 10, 40} {
		sink(TraceEvent{Time: t0.Add(time.Duration(us) * time.Microsecond), Kind: TraceQPState})
	}
	require.NoError(t, werr())
	var ts []float64
	sc := bufio.NewScanner(strings.NewReader(w.String()))
	for sc.Scan() {
		var l struct{ T float64 }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		ts = append(ts, l.T)
	}
	require.Equal(t, []float64{0, 0.00003, 0.00003, 0.00004}, ts)
}

// TestTraceRetryOncePerEpisode: a READ whose second response is lost gets
// its other responses after the hole, and each one takes the completer
// through ERROR_RETRY (an implied NAK, IBA 9.7.5.1.1), but only the first
// starts a retry: rxe's COMPST_ERROR_RETRY starts one per episode
// (comp.started_retry) unless the timer fired. The trace has one retry
// event per retry started, as completer_retry_err counts them, not one per
// pass.
func TestTraceRetryOncePerEpisode(t *testing.T) {
	var w syncbuf.Buffer
	var retries uint64
	synctest.Test(t, func(t *testing.T) {
		a, b := tracedPair(t, &w, "drop=RC_RDMA_READ_RESPONSE_MIDDLE#1,dir=recv")
		_, err := a.qp.PostSend(SendWR{ID: 9, Opcode: WRRDMARead, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(0, 8<<10)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		wc := waitVirtual(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status)
		synctest.Wait()
		retries = a.qp.Counters().Requester.CompleterRetryErr
	})
	var passes, events int
	sc := bufio.NewScanner(strings.NewReader(w.String()))
	for sc.Scan() {
		var ev struct {
			Dev    string   `json:"dev"`
			Ev     string   `json:"ev"`
			Engine string   `json:"engine"`
			States []string `json:"states"`
			Cause  string   `json:"cause"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		switch {
		case ev.Ev == string(TraceStates) && ev.Engine == "completer" && slices.Contains(ev.States, "ERROR_RETRY"):
			passes++
		case ev.Ev == string(TraceRetry):
			events++
			require.Equal(t, RetryImpliedNAK, ev.Cause)
		}
	}
	require.Greater(t, passes, 1, "the responses after the hole each pass ERROR_RETRY")
	require.Equal(t, uint64(1), retries, "one re-read")
	require.Equal(t, 1, events, "one retry event per retry started")
}
