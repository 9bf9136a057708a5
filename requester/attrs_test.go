package requester

import (
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSetPath retransmits a packet after a path change: the retransmission
// carries an ICRC for the new pseudo-header, not for the old one; an
// invalid pseudo-header is refused and changes nothing.
func TestSetPath(t *testing.T) {
	h := newHarness(t, baseConfig(256, 10))
	h.r.SetTimeout(10)
	h.mem.add(lkeyA, baseA, 4096, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}, RemoteAddr: rbase, RKey: rkey})
	first := h.next()

	bad := pseudo
	bad.Dst = netip.MustParseAddr("2001:db8::2")
	require.ErrorIs(t, h.r.SetPath(bad), packet.ErrPseudoHeader)
	moved := pseudo
	moved.Dst, moved.DstPort = netip.MustParseAddr("192.0.2.3"), 0xC003
	require.NoError(t, h.r.SetPath(moved))

	h.now = h.now.Add(retry.AckTimeout(10))
	h.r.OnTimeout(h.now)
	n := h.r.NextPacket(h.now, h.buf)
	require.Positive(t, n)
	again := h.buf[:n]
	require.Equal(t, first[:n-packet.ICRCSize], again[:n-packet.ICRCSize], "the same packet")
	require.NoError(t, moved.CheckICRC(again))
	require.Error(t, pseudo.CheckICRC(again))
}

// TestSetTimeoutAndRetry shortens the retransmit timer and the retry
// budget of a requester with a packet outstanding: the next arming uses
// the new timeout, and the new budget decides when the WQE fails.
func TestSetTimeoutAndRetry(t *testing.T) {
	cfg := baseConfig(256, 10)
	cfg.Timeout, cfg.RetryCnt = 20, 7
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 4096, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}, RemoteAddr: rbase, RKey: rkey})
	require.NotNil(t, h.next())
	require.Equal(t, h.now.Add(retry.AckTimeout(20)), h.r.Deadline(), "armed with the old timeout")

	h.r.SetTimeout(4)
	h.r.SetRetryCnt(1)
	h.r.SetRNRRetry(0)
	for range 2 { // the first timeout retries once; the second fails the WQE
		h.now = h.r.Deadline()
		h.r.OnTimeout(h.now)
		if b := h.next(); b != nil {
			require.Equal(t, h.now.Add(retry.AckTimeout(4)), h.r.Deadline(), "re-armed with the new timeout")
		}
	}
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRetryExcErr, st)
	require.Equal(t, uint64(2), h.r.Counters().Timeouts)
}

// TestSetMaxRdAtomic raises max_rd_atomic while READs wait for a slot: the
// waiting READ starts at once; lowered to 0, Post refuses READs.
func TestSetMaxRdAtomic(t *testing.T) {
	cfg := baseConfig(1024, 100)
	cfg.MaxRdAtomic = 1
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	read := func(id uint64) *verbs.SendWR {
		return &verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + id*64, Length: 16, LKey: lkeyA}}}
	}
	h.post(read(1))
	h.post(read(2))
	require.Len(t, h.drain(), 1, "one slot")
	h.r.SetMaxRdAtomic(2)
	require.Len(t, h.drain(), 1, "the second READ takes the new slot")
	h.r.SetMaxRdAtomic(0)
	require.ErrorIs(t, h.r.Post(read(3)), ErrNoRdAtomic)
}

// TestSetRetryOneBudget: a Modify that names only rnr_retry leaves the
// retry_cnt budget as the timeouts spent it, and one that names only
// retry_cnt leaves the RNR budget (rxe_qp_from_attr refills comp.retry_cnt
// under IB_QP_RETRY_CNT and comp.rnr_retry under IB_QP_RNR_RETRY, each
// alone).
func TestSetRetryOneBudget(t *testing.T) {
	cfg := baseConfig(256, 10)
	cfg.Timeout, cfg.RetryCnt, cfg.RNRRetry = 4, 1, 1
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 4096, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}, RemoteAddr: rbase, RKey: rkey})
	require.NotNil(t, h.next())
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now) // spends retry_cnt's only retry
	require.NotNil(t, h.next())
	_, failed := h.r.Failed()
	require.False(t, failed)

	h.r.SetRNRRetry(3) // Modify with QPAttrRNRRetry alone
	require.Equal(t, uint8(1), h.r.cfg.RetryCnt)
	require.Equal(t, uint8(3), h.r.cfg.RNRRetry)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	st, failed := h.r.Failed()
	require.True(t, failed, "the retry_cnt budget was not refilled")
	require.Equal(t, verbs.WCRetryExcErr, st)
}
