package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

const rttTest = 300 * time.Microsecond

// warm sends one 100-byte SEND and acknowledges it rttTest later, so the
// requester has one RTT sample of rttTest. It returns the next PSN.
func warm(t *testing.T, h *harness, psn packet.PSN) packet.PSN {
	t.Helper()
	h.post(&verbs.SendWR{ID: 100, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rttTest)
	h.recv(ack(psn))
	return psn.Next()
}

// warmHarness returns a harness whose requester sends from p0, with 64 KiB
// of local memory and one SEND acknowledged (warm), and the next PSN.
func warmHarness(t *testing.T, p0 packet.PSN) (*harness, packet.PSN) {
	t.Helper()
	h := newHarness(t, baseConfig(1024, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	return h, warm(t, h, p0)
}

func TestRTTSampleAndKarn(t *testing.T) {
	const p0 = 0x20
	h, p := warmHarness(t, p0)
	rc := h.r.Counters().Recovery
	require.Equal(t, rttTest, rc.SRTT)
	require.Equal(t, uint64(1), rc.RTTSamples)

	// A SEND whose packet is sent twice (a NAK rewinds it) gives no sample.
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 3000, LKey: lkeyA}}})
	require.Len(t, h.drain(), 3)
	h.recv(nak(p, packet.NAKPSNSeqError))
	require.Len(t, undouble(t, h.drain()), 3, "go-back-N from the NAK's PSN")
	h.now = h.now.Add(10 * rttTest)
	h.recv(ack(p + 2))
	rc = h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTTSamples, "Karn: the timed PSN was sent again")
	require.Equal(t, uint64(1), rc.KarnSkipped)
	require.Equal(t, rttTest, rc.SRTT)
}

// TestTailLossProbe: the last packets of a WRITE are lost, and the
// responder, having NAKed nothing, stays silent. After the recovery
// timeout (not the 67 ms IB timeout) the requester sends the oldest
// unacknowledged packet again with AckReq, without moving its send
// cursor. The responder had it: it re-ACKs what it has, and nothing else
// is resent until the next (backed-off) expiry probes the first PSN the
// responder lacks; that probe is acknowledged exactly, which proves the
// rest lost: the go-back-N resends it at once. No retry is consumed.
func TestTailLossProbe(t *testing.T) {
	const p0 = 0x40
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x1000, RKey: 7})
	sent := h.drain()
	require.Len(t, sent, 4)
	start := h.now
	rto := retry.DefaultRecoveryFloor // 2·SRTT and the RTO are below the floor
	require.Equal(t, start.Add(rto), h.r.Deadline(), "the recovery timer, not the IB timer")

	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	probe := h.drain()
	require.Len(t, probe, 1, "one probe")
	pp := parse(t, probe[0])
	require.Equal(t, p, pp.PSN(), "the oldest unacknowledged packet")
	require.Equal(t, packet.RCRDMAWriteFirst, pp.Opcode())
	require.True(t, pp.BTH().AckReq())
	rc := h.r.Counters()
	require.Equal(t, uint64(1), rc.Recovery.RTOExpiries)
	require.Equal(t, uint64(1), rc.Recovery.TailProbes)
	require.Zero(t, rc.Timeouts, "no IB timeout")
	require.Equal(t, uint8(7), h.r.retryBudget.Remaining(), "retry_cnt untouched")
	require.Equal(t, start.Add(rto+2*rto), h.r.Deadline(), "the recovery timer backs off")

	// The responder got the first two packets: the probe is a duplicate,
	// it re-ACKs the second. A slow peer would answer the same: nothing
	// more is sent.
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 1))
	require.Empty(t, h.drain())

	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	probe = h.drain()
	require.Len(t, probe, 1)
	require.Equal(t, p+2, parse(t, probe[0]).PSN())
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 2)) // executed: the responder was waiting for it
	again := h.drain()
	require.Len(t, again, 1, "only the lost tail is resent")
	require.Equal(t, sent[3], again[0], "byte-identical to the original")
	h.recv(ack(p + 3))
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Less(t, h.now.Sub(start), retry.AckTimeout(14)/4, "recovered in round trips")
	require.Zero(t, h.r.Counters().Timeouts)
}

// TestTailProbeLostAck: only the acknowledgement was lost; the probe's
// answer completes the WQE and nothing else is resent.
func TestTailProbeLostAck(t *testing.T) {
	const p0 = 0x60
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 2048, LKey: lkeyA}}})
	require.Len(t, h.drain(), 2)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 1)
	h.recv(ack(p + 1)) // the responder re-ACKs the duplicate
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.False(t, h.r.Pending())
	require.Equal(t, uint64(1), h.r.Counters().Retransmits)
	require.True(t, h.r.Deadline().IsZero(), "nothing outstanding: no timer")
}

// TestReadProbeRereadsMissing: the last responses of a READ are lost; the
// probe asks again for only the missing bytes.
func TestReadProbeRereadsMissing(t *testing.T) {
	const p0 = 0x80
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	req := h.drain()
	require.Len(t, req, 1)
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	train := readResp(1024, p, data, 0, false)
	h.recv(train[0])
	h.recv(train[1]) // the last two are lost
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	probe := h.drain()
	require.Len(t, probe, 1)
	pp := parse(t, probe[0])
	require.Equal(t, packet.RCRDMAReadRequest, pp.Opcode())
	require.Equal(t, p+2, pp.PSN())
	require.Equal(t, uint64(0x5000+2048), pp.RETH().VA())
	require.Equal(t, uint32(2048), pp.RETH().DMALen(), "only the missing range")
	for _, b := range readResp(1024, p, data, 2, true) {
		h.recv(b)
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, data, h.mem[lkeyA].buf[:4096])
}

// TestRetryBudgetOnlyIBTimeouts: a peer that never answers fails the QP
// with RETRY_EXC_ERR after retry_cnt+1 IB timeouts, however many recovery
// probes went before; RetryResponses says the peer was silent.
func TestRetryBudgetOnlyIBTimeouts(t *testing.T) {
	const p0 = 0xA0
	cfg := baseConfig(1024, p0)
	cfg.Timeout, cfg.RetryCnt = 12, 2 // 16.8 ms
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	warm(t, h, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}, RemoteAddr: 0x1000, RKey: 7})
	start := h.now
	for i := 0; i < 1000; i++ {
		h.drain()
		if _, failed := h.r.Failed(); failed {
			break
		}
		h.now = h.r.Deadline()
		h.r.OnTimeout(h.now)
	}
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRetryExcErr, st)
	c := h.r.Counters()
	require.Equal(t, uint64(3), c.Timeouts, "retry_cnt+1 IB timeouts")
	require.Positive(t, c.Recovery.RTOExpiries)
	require.GreaterOrEqual(t, h.now.Sub(start), 3*retry.AckTimeout(12))
	require.True(t, c.Recovery.RetryFailed)
	require.Zero(t, c.Recovery.RetryResponses, "the peer never answered")
}

// TestRetryResponsesCounted: a peer that answers, but without progress and
// less often than the IB timeout (stale ACKs of older PSNs), is reported
// as answering when the budget runs out.
func TestRetryResponsesCounted(t *testing.T) {
	const p0 = 0xC0
	cfg := baseConfig(1024, p0)
	cfg.Timeout, cfg.RetryCnt = 12, 1
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	p := warm(t, h, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}, RemoteAddr: 0x1000, RKey: 7})
	stale := h.now.Add(retry.AckTimeout(12) / 2)
	for i := 0; i < 1000; i++ {
		h.drain()
		if _, failed := h.r.Failed(); failed {
			break
		}
		next := h.r.Deadline()
		if stale.Before(next) {
			h.now = stale
			h.recv(ack(p - 1)) // the peer is there, but no progress
			stale = stale.Add(retry.AckTimeout(12) * 3 / 2)
			continue
		}
		h.now = next
		h.r.OnTimeout(h.now)
	}
	c := h.r.Counters().Recovery
	require.True(t, c.RetryFailed)
	require.Positive(t, c.RetryResponses)
}

// TestAdaptiveWindow: a sequence NAK halves the window; acknowledgements
// grow it back; FixedWindow keeps 128.
func TestAdaptiveWindow(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		const p0 = 0
		cfg := baseConfig(256, p0)
		cfg.Recovery.FixedWindow = fixed
		h := newHarness(t, cfg)
		h.mem.add(lkeyA, baseA, 1<<20, verbs.AccessLocalWrite, 1)
		h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, SGList: []verbs.SGE{{Addr: baseA, Length: 256 * 1000, LKey: lkeyA}},
			RemoteAddr: 0x1000, RKey: 7})
		require.Len(t, h.drain(), DefaultWindow)
		h.recv(nak(10, packet.NAKPSNSeqError))
		want := DefaultWindow / 2
		if fixed {
			want = DefaultWindow
		}
		require.Equal(t, want, h.r.Counters().Recovery.Window)
		out := undouble(t, h.drain())
		require.Len(t, out, want, "go-back-N sends one window")
		require.Equal(t, packet.PSN(10), parse(t, out[0]).PSN())
		last := parse(t, out[len(out)-1])
		require.True(t, last.BTH().AckReq(), "the packet that fills the window asks for an ACK")
		h.now = h.now.Add(time.Millisecond)
		h.recv(ack(last.PSN()))
		require.Greater(t, h.r.Counters().Recovery.Window, want-1)
		if !fixed {
			require.Greater(t, h.r.Counters().Recovery.Window, want, "a clean window grows it")
		}
	}
}

// TestReadSampleOnOwnResponse: under go-back-N a timed READ request's RTT
// sample ends on its own first response, so the re-read of a hole in an
// earlier READ (read-ahead) does not void it, while a resend of the timed
// request itself still does (Karn's rule).
func TestReadSampleOnOwnResponse(t *testing.T) {
	const p0 = 0x40
	h, p := warmHarness(t, p0)
	read := func(id uint64, off int) {
		h.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{{Addr: baseA + uint64(off), Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	}
	data := make([]byte, 4096)
	read(1, 0)
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rttTest)
	a := readResp(1024, p, data, 0, false)
	h.recv(a[0]) // READ 1's own first response: a sample
	require.Equal(t, uint64(2), h.r.Counters().Recovery.RTTSamples)

	read(2, 4096) // timed: PSN p+4
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rttTest)
	h.recv(a[2]) // a[1] lost: READ 1 is re-read from p+1
	again := h.drain()
	require.Len(t, again, 1)
	require.Equal(t, p+1, parse(t, again[0]).PSN())
	h.now = h.now.Add(2 * rttTest)
	b := readResp(1024, p+4, data, 0, false)
	h.recv(b[0]) // READ 2's own first response, placed ahead
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(3), rc.RTTSamples, "the re-read of READ 1 does not void READ 2's sample")
	require.Zero(t, rc.KarnSkipped)

	// The timed request itself sent again: no sample.
	h2, q := warmHarness(t, 0x900)
	h2.post(&verbs.SendWR{ID: 7, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	require.Len(t, h2.drain(), 1)
	h2.now = h2.now.Add(rttTest)
	c := readResp(1024, q, data, 0, false)
	h2.recv(c[1]) // the FIRST lost: the READ is asked for again from q
	rr := h2.drain()
	require.Len(t, rr, 1)
	require.Equal(t, q, parse(t, rr[0]).PSN())
	h2.now = h2.now.Add(rttTest)
	for _, x := range readResp(1024, q, data, 0, false) {
		h2.recv(x)
	}
	require.Equal(t, []uint64{7}, h2.cq.ids())
	rc = h2.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTTSamples, "Karn: the timed READ was sent again")
	require.Equal(t, uint64(1), rc.KarnSkipped)
}

// TestReadRetryAnswerLost: under go-back-N a READ's response 2 is lost,
// the rest come, and the retry asks again from 2. The answer to the retry
// loses response 2 as well; its stream starts over below the responses
// seen after the hole, which shows it passed the hole, so the requester
// asks again at once instead of waiting for the recovery timer. The
// original stream's responses, rising, ask for nothing more.
func TestReadRetryAnswerLost(t *testing.T) {
	const p0 = 0x900
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 8192, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	require.Len(t, h.drain(), 1)
	data := make([]byte, 8192)
	for i := range data {
		data[i] = byte(i * 5)
	}
	train := readResp(1024, p, data, 0, false)
	requireReread := func(what string) {
		t.Helper()
		out := h.drain()
		require.Len(t, out, 1, what)
		pp := parse(t, out[0])
		require.Equal(t, packet.RCRDMAReadRequest, pp.Opcode(), what)
		require.Equal(t, p+2, pp.PSN(), what)
		require.Equal(t, uint64(0x5000+2048), pp.RETH().VA(), what)
	}
	h.now = h.now.Add(rttTest)
	h.recv(train[0])
	h.recv(train[1])
	for _, b := range train[3:] {
		h.recv(b)
	}
	requireReread("the first retry")
	h.now = h.now.Add(rttTest)
	retry := readResp(1024, p+2, data[2048:], 0, true)
	h.recv(retry[1]) // retry[0], response 2, is lost again
	requireReread("the second retry, at once")
	for _, b := range retry[2:] {
		h.recv(b)
	}
	require.Empty(t, h.drain(), "the rest of the lost stream asks for nothing")
	require.Equal(t, uint64(1), h.r.Counters().ReadRereadsLost)
	h.now = h.now.Add(rttTest)
	for _, b := range retry {
		h.recv(b)
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, data, h.mem[lkeyA].buf[:8192])
	require.Zero(t, h.r.Counters().Recovery.RTOExpiries)
}

// TestReadRetryReorderNoRetry: after the retry of a hole in a 16-packet
// READ, responses of the original stream still on their way arrive
// reordered, a PSN falling back far from the hole. That is reordering,
// not a stream that started over at the hole, so it asks for nothing
// again (each such retry rewound the responder's train and spent
// retry_cnt).
func TestReadRetryReorderNoRetry(t *testing.T) {
	const p0 = 0xa00
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 16 * 1024, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	require.Len(t, h.drain(), 1)
	data := make([]byte, 16*1024)
	train := readResp(1024, p, data, 0, false)
	h.now = h.now.Add(rttTest)
	h.recv(train[0])
	h.recv(train[1])
	for _, i := range []int{3, 4, 5, 6, 7, 8} {
		h.recv(train[i])
	}
	require.Len(t, h.drain(), 1, "the retry of the hole")
	for _, i := range []int{12, 10, 11, 13} { // reordered on the way
		h.recv(train[i])
	}
	require.Empty(t, h.drain(), "reordering asks for nothing again")
	require.Zero(t, h.r.Counters().ReadRereadsLost)
}

// TestRTTBootstrapTimedReadLost: the first READ of a connection is the
// timed request, and its own first response is lost. The first response
// that does come (the READ's second) bounds the round trip from above
// (the time since the first packet left), as it does when no packet is
// timed: without that bound the re-read of the hole voids the timed
// sample (Karn), nothing is sampled, and the recovery timer stays at the
// IB local ACK timeout (67 ms at perftest's -u 14), so the next silence
// (a lost READ request) waits for the IB timer.
func TestRTTBootstrapTimedReadLost(t *testing.T) {
	const p0 = 0x700
	h := newHarness(t, baseConfig(1024, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rttTest)
	a := readResp(1024, p0, make([]byte, 4096), 0, false)
	h.recv(a[1]) // a[0], the timed request's own first response, is lost
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTTSamples, "the first response bounds the round trip")
	require.Equal(t, rttTest, rc.SRTT)
	again := h.drain()
	require.Len(t, again, 1, "the hole is re-read")
	require.Equal(t, packet.PSN(p0), parse(t, again[0]).PSN())
	require.Less(t, h.r.Deadline().Sub(h.now), 10*time.Millisecond,
		"the recovery timer follows the bound, not the IB timeout")
}
