package requester

import (
	"testing"

	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSetTimeoutRecoveryCeiling: SetTimeout (RTS→RTS) moves the recovery
// timer's ceiling with the IB local ACK timeout. It used to change the IB
// timer only: a QP created with timeout 0 and given 14 later never armed
// the recovery timer (no tail-loss probe), one created with 14 and set to
// 0 kept probing under the old 67 ms ceiling.
func TestSetTimeoutRecoveryCeiling(t *testing.T) {
	cfg := baseConfig(1024, 0x10)
	cfg.Timeout = 0
	h, _, _ := withResponder(t, cfg, 4096, verbs.AccessRemoteWrite, 1)
	h.r.SetTimeout(14)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}})
	h.drain()
	require.Equal(t, h.now.Add(retry.AckTimeout(14)), h.r.retrans.When(), "IB timer follows SetTimeout")
	require.True(t, h.r.rec.due.Armed(), "recovery timer armed after SetTimeout(14) (ceiling %v)", h.r.rec.timer.Ceiling)
}

// SetTimeout(0) makes the local ACK timeout infinite (the timeout attribute 0) at
// once: a retransmit timer already armed is stopped, and no retry follows.
func TestSetTimeoutZeroStopsArmedTimer(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	require.Len(t, h.drain(), 1)
	require.True(t, h.r.retrans.Armed())
	h.r.SetTimeout(0)
	require.False(t, h.r.retrans.Armed())
	h.now = h.now.Add(retry.AckTimeout(14))
	h.r.OnTimeout(h.now)
	require.Zero(t, h.r.Counters().Timeouts)
	require.False(t, h.r.Pending())
}
