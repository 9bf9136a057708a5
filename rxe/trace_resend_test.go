package rxe

import (
	"bufio"
	"encoding/json"
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
