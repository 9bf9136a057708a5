package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestRetryTimeoutLateExpiryDeferred: during a go-back-N retry that a NAK
// started, the recovery timer runs with RetryTimeout (here the RTO, 900 µs),
// not Timeout (the 2 ms floor). An expiry handled 400 µs late, almost half
// the timeout it was armed with, shows that this end was not running
// (retry.RecoveryTimer.OnExpiry, docs/recovery.md "Stalls are not losses"),
// and is timed again from now without a probe; judged against a quarter of
// Timeout (500 µs) it was taken for the peer's silence and probed.
func TestRetryTimeoutLateExpiryDeferred(t *testing.T) {
	const p0 = 0x300
	h, p := warmHarness(t, p0) // SRTT 300 µs, RTTVAR 150 µs: RTO 900 µs
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 3000, LKey: lkeyA}}})
	require.Len(t, h.drain(), 3)
	h.now = h.now.Add(rttTest)
	h.recv(nak(p, packet.NAKPSNSeqError))
	require.Len(t, undouble(t, h.drain()), 3, "go-back-N from the NAK's PSN")
	require.True(t, h.r.nakRetry)

	armed := h.r.rec.timer.RetryTimeout(&h.r.rec.rtt)
	require.Equal(t, 900*time.Microsecond, armed)
	require.Less(t, armed, h.r.rec.timer.Timeout(&h.r.rec.rtt))
	due := h.r.Deadline()
	require.Equal(t, h.now.Add(armed), due, "the recovery timer at RetryTimeout")

	late := 400 * time.Microsecond
	require.Greater(t, late, armed/4)
	h.now = due.Add(late)
	h.r.OnTimeout(h.now)
	require.Zero(t, len(h.drain()), "no probe: this end was not running for almost half the timeout")
	rc := h.r.Counters().Recovery
	require.Zero(t, rc.RTOExpiries)
	require.Equal(t, uint64(1), rc.RTODeferred)
	require.Equal(t, h.now.Add(armed), h.r.Deadline(), "timed again from now")
	require.Equal(t, uint8(6), h.r.retryBudget.Remaining(), "retry_cnt: the NAK's retry only")
}
