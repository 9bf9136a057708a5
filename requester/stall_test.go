package requester

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// postWrite4K posts a signaled 4 KiB WRITE (4 packets at PMTU 1024) and
// returns its packets.
func postWrite4K(t *testing.T, h *harness, id uint64) [][]byte {
	t.Helper()
	h.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4096, LKey: lkeyA}}, RemoteAddr: 0x1000, RKey: 7})
	sent := h.drain()
	require.Len(t, sent, 4)
	return sent
}

// TestRecoveryLateExpiryDeferred: the requester's process is not run for
// 10 ms (a loaded machine), so its recovery timer is handled long after
// it was due, while the ACK that would have stopped it waits unread. The
// expiry is no evidence of loss: no probe, no expiry counted, the silence
// is timed again from now; the ACK then completes the WRITE.
func TestRecoveryLateExpiryDeferred(t *testing.T) {
	const p0 = 0x100
	h, p := warmHarness(t, p0)
	postWrite4K(t, h, 1)
	due := h.r.Deadline()
	require.Equal(t, h.now.Add(retry.DefaultRecoveryFloor), due)

	h.now = due.Add(10 * time.Millisecond)
	h.r.OnTimeout(h.now)
	require.Empty(t, h.drain(), "no probe after a stall of this end")
	rc := h.r.Counters().Recovery
	require.Zero(t, rc.RTOExpiries)
	require.Zero(t, rc.TailProbes)
	require.Equal(t, uint64(1), rc.RTODeferred)
	require.Equal(t, h.now.Add(retry.DefaultRecoveryFloor), h.r.Deadline(), "timed again from now")

	h.recv(ack(p + 3))
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Zero(t, h.r.Counters().Retransmits)
}

// TestRecoveryLateExpiryProbesOnce: a deferral is granted once per episode
// without progress; if the timer is late again the requester probes, so a
// lost tail costs at most one more timeout on a machine whose timers are
// always late.
func TestRecoveryLateExpiryProbesOnce(t *testing.T) {
	const p0 = 0x200
	h, p := warmHarness(t, p0)
	postWrite4K(t, h, 1)
	h.now = h.r.Deadline().Add(5 * time.Millisecond)
	h.r.OnTimeout(h.now)
	require.Empty(t, h.drain())
	h.now = h.r.Deadline().Add(5 * time.Millisecond)
	h.r.OnTimeout(h.now)
	probe := h.drain()
	require.Len(t, probe, 1)
	require.Equal(t, p, parse(t, probe[0]).PSN())
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTOExpiries)
	require.Equal(t, uint64(1), rc.RTODeferred)
}

// TestRecoverySpuriousExpiryLearns: the peer stalls for 6 ms (its process
// descheduled) with the requester running on time: the timer fires and
// probes, backs off and probes again, and 100 µs after the second probe
// (sooner than any round trip) the answer acknowledges the packets sent
// before it: the expiries were spurious. The next timeouts are at least
// that silence, so the same stall does not fire the timer again; a real
// loss is still recovered by the probe, and the learned delay decays.
func TestRecoverySpuriousExpiryLearns(t *testing.T) {
	const p0 = 0x300
	h, p := warmHarness(t, p0)
	heard := h.now
	postWrite4K(t, h, 1)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 1, "an on-time expiry probes")
	h.now = h.r.Deadline()
	require.Equal(t, heard.Add(3*retry.DefaultRecoveryFloor), h.now, "backed off")
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 1, "and probes again")
	h.now = h.now.Add(100 * time.Microsecond)
	h.recv(ack(p + 3)) // the peer answers the original packets at last
	require.Equal(t, []uint64{1}, h.cq.ids())
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTOSpurious)
	require.Equal(t, uint64(2), rc.RTOExpiries)
	silence := h.now.Sub(heard)

	start := h.now
	postWrite4K(t, h, 2)
	require.Equal(t, start.Add(silence), h.r.Deadline(), "the timeout covers the stall just seen")
	h.now = start.Add(5 * time.Millisecond)
	h.r.OnTimeout(h.now)
	require.Empty(t, h.drain(), "a 5 ms stall fires nothing")
	h.recv(ack(p + 7))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())

	// Later, on a quiet machine, the learned delay has decayed (the
	// timeout is the RFC 6298 RTO of the samples, which include the 5 ms
	// one), and a probe's exact answer is a real loss, which teaches
	// nothing.
	h.now = h.now.Add(3 * retry.SpuriousHalfLife)
	h.recv(ack(p + 7)) // a duplicate ACK: the timer decays on responses
	require.Zero(t, h.r.rec.timer.Learned())
	start = h.now
	postWrite4K(t, h, 3)
	require.Equal(t, start.Add(h.r.rec.timer.Timeout(&h.r.rec.rtt)), h.r.Deadline())
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	probe := h.drain()
	require.Len(t, probe, 1)
	require.Equal(t, p+8, parse(t, probe[0]).PSN())
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 8)) // exactly the probe, a round trip later: the rest was lost
	require.Len(t, h.drain(), 3, "go-back-N resends the lost tail")
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 11))
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
	require.Equal(t, uint64(1), h.r.Counters().Recovery.RTOSpurious)
	require.Zero(t, h.r.rec.timer.Learned())
}

// TestRecoveryLostAckTeachesNothing: only the ACK of a WRITE was lost; the
// probe's own answer, a round trip after it, acknowledges the packets sent
// before it. That expiry was a loss (of the ACK), not a stall: the timeout
// stays where the RTT puts it, so losses do not ratchet it up.
func TestRecoveryLostAckTeachesNothing(t *testing.T) {
	const p0 = 0x400
	h, p := warmHarness(t, p0)
	for i := range 3 {
		postWrite4K(t, h, uint64(i+1))
		h.now = h.r.Deadline()
		h.r.OnTimeout(h.now)
		require.Len(t, h.drain(), 1)
		h.now = h.now.Add(rttTest)
		h.recv(ack(p + packet.PSN(4*i+3)))
	}
	require.Equal(t, []uint64{1, 2, 3}, h.cq.ids())
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(3), rc.RTOExpiries)
	require.Zero(t, rc.RTOSpurious)
	require.Zero(t, h.r.rec.timer.Learned())
	start := h.now
	postWrite4K(t, h, 4)
	require.Equal(t, start.Add(retry.DefaultRecoveryFloor), h.r.Deadline())
}

// TestRecoveryTimerOffDuringRNRWait: an RNR NAK answers the SEND; until
// the RNR wait ends the requester's deadline is that wait, not a recovery
// timeout that could send nothing, and the resend arms the recovery timer
// again.
func TestRecoveryTimerOffDuringRNRWait(t *testing.T) {
	const p0 = 0x500
	h, p := warmHarness(t, p0)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.now = h.now.Add(rttTest)
	h.recv(rnr(p, 18)) // 5.12 ms
	require.Equal(t, h.now.Add(retry.RNRDelay(18)), h.r.Deadline(), "the RNR wait alone")
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 1, "the resend")
	require.Equal(t, h.now.Add(retry.DefaultRecoveryFloor), h.r.Deadline(), "the recovery timer runs again")
	require.Zero(t, h.r.Counters().Recovery.RTOExpiries)
}

// TestSmallWindowAsksEveryEighth: with a window of 64 PSNs (a peer with a
// small receive buffer) every 8th packet asks for an ACK (ackPerWindow),
// so the start of the window is acknowledged while the rest is in flight
// and the window slides on instead of draining before every ACK.
func TestSmallWindowAsksEveryEighth(t *testing.T) {
	const p0 = 0x600
	cfg := baseConfig(1024, p0)
	cfg.Window = 64
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<17, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 128 << 10, LKey: lkeyA}}})
	sent := h.drain()
	require.Len(t, sent, 64, "the window")
	var asks []int
	for i, b := range sent {
		if parse(t, b).BTH().AckReq() {
			asks = append(asks, i)
		}
	}
	require.Equal(t, []int{7, 15, 23, 31, 39, 47, 55, 63}, asks)
	h.now = h.now.Add(rttTest)
	h.recv(ack(p0 + 7))
	require.Len(t, h.drain(), 8, "the ACK of the first eighth opens the window by 8")
}

// TestRetryTimeoutAfterNAK: after a sequence error NAK the go-back-N
// resends are watched with the retry timeout (the RTO without the
// recovery floor, at least retry.RetryFloor): an IB responder that NAKed
// the gap drops everything silently until the NAKed PSN arrives, so a
// resend of it lost again is found in about a round trip, not the 2 ms
// floor. Progress ends the episode; an RNR retry keeps the usual timeout.
func TestRetryTimeoutAfterNAK(t *testing.T) {
	const p0 = 0x600
	h, p := warmHarness(t, p0)
	rto := h.r.rec.rtt.RTO()
	require.Less(t, rto, retry.DefaultRecoveryFloor)
	require.Greater(t, rto, retry.RetryFloor)

	postWrite4K(t, h, 1)
	h.now = h.now.Add(rttTest)
	h.recv(nak(p+1, packet.NAKPSNSeqError))
	require.Len(t, undouble(t, h.drain()), 3, "go-back-N from the NAK's PSN")
	require.Equal(t, h.now.Add(rto), h.r.Deadline(), "the retry timeout")

	// The resend of p+1 is lost, both its copies (doubleResend): the
	// timer probes it after the retry timeout, then backs off.
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	got := h.drain()
	require.Len(t, got, 1)
	require.Equal(t, p+1, parse(t, got[0]).PSN(), "the probe: the NAKed PSN again")
	require.Equal(t, h.now.Add(2*rto), h.r.Deadline(), "backed off")

	// Progress ends the episode: the next WRITE has the usual timeout.
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 3))
	require.Equal(t, []uint64{1}, h.cq.ids())
	start := h.now
	postWrite4K(t, h, 2)
	require.Equal(t, start.Add(retry.DefaultRecoveryFloor), h.r.Deadline())
}

// TestRetryFirstPacketDoubled: a go-back-N retry that a sequence NAK
// started sends its first packet twice in a row (doubleResend), against a
// responder that NAKs a gap once and then drops everything until the
// missing PSN arrives (IBA 9.7.5.1.2). When the first copy of the resend
// is lost too, the second fills the gap at once: the WRITE or SEND
// completes in round trips, with no recovery timer expiry, where one copy
// would have waited for it. A READ's retry, a timer's retry and a QP with
// recovery off send each packet once.
func TestRetryFirstPacketDoubled(t *testing.T) {
	const pmtu, p0, pkts = 1024, 0x700, 8
	for _, tc := range []struct {
		name     string
		op       verbs.WROpcode
		off      bool
		dropReq  map[int]int // request PSN (from p0) -> copies dropped
		dropResp map[int]int
		doubled  uint64
		sentLost int  // times the request PSN p0+2 is sent
		expiries bool // the recovery timer must fire
	}{
		{name: "WRITE, resend lost", op: verbs.WRRDMAWrite, dropReq: map[int]int{2: 2}, doubled: 1, sentLost: 3},
		{name: "SEND, resend lost", op: verbs.WRSend, dropReq: map[int]int{2: 2}, doubled: 1, sentLost: 3},
		{name: "WRITE, one loss", op: verbs.WRRDMAWrite, dropReq: map[int]int{2: 1}, doubled: 1, sentLost: 3},
		{name: "WRITE, both copies lost", op: verbs.WRRDMAWrite, dropReq: map[int]int{2: 3}, doubled: 1, sentLost: 4, expiries: true},
		{name: "WRITE, recovery off", op: verbs.WRRDMAWrite, off: true, dropReq: map[int]int{2: 1}, sentLost: 2},
		{name: "READ, response lost", op: verbs.WRRDMARead, dropResp: map[int]int{2: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.Recovery.Off = tc.off
			h, f, remote := withResponder(t, cfg, pkts*pmtu, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 7)
			for i := range remote.buf {
				remote.buf[i] = byte(i * 7)
			}
			for i := range h.mem[lkeyA].buf {
				h.mem[lkeyA].buf[i] = byte(i * 3)
			}
			l := newSRLink(h, f)
			l.dropReq, l.dropResp = dropNth(p0, tc.dropReq), dropNth(p0, tc.dropResp)
			h.post(&verbs.SendWR{ID: 1, Opcode: tc.op, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: pkts * pmtu, LKey: lkeyA}}})
			start := h.now
			l.run(time.Second)
			_, failed := h.r.Failed()
			require.False(t, failed)
			require.Equal(t, []uint64{1}, h.cq.ids())
			switch tc.op {
			case verbs.WRSend:
				require.Equal(t, [][]byte{h.mem[lkeyA].buf}, f.msgs, "SEND data")
			default:
				require.Equal(t, remote.buf, h.mem[lkeyA].buf, "data")
			}
			c := h.r.Counters()
			require.Equal(t, tc.doubled, c.RetryDoubled)
			if tc.op == verbs.WRRDMARead {
				require.NotZero(t, c.ReadGaps, "the gap in the responses found")
			} else {
				require.Equal(t, uint64(1), c.RcvdSeqErr, "one NAK")
				require.Equal(t, tc.sentLost, l.sentCount(p0+2))
			}
			if tc.expiries {
				require.NotZero(t, c.Recovery.RTOExpiries, "both copies lost: the timer finds it")
			} else {
				require.Zero(t, c.Recovery.RTOExpiries, "no recovery timer expiry")
				require.Zero(t, c.Timeouts)
				require.Less(t, h.now.Sub(start), retry.RetryFloor, "recovered in round trips")
			}
		})
	}
}

// srProbedWrites returns a selective-repeat harness sending from p0 whose
// requester has sent two signaled 4 KiB WRITEs (IDs 1 and 2, eight
// packets) after a warm-up, and then, at its recovery deadline, the
// tail-loss probe of their first packet; and that packet's PSN.
func srProbedWrites(t *testing.T, p0 packet.PSN) (*harness, packet.PSN) {
	t.Helper()
	cfg := baseConfig(1024, p0)
	cfg.SelectiveRepeat = true
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	p := warm(t, h, p0)
	postWrite4K(t, h, 1)
	postWrite4K(t, h, 2)
	probeAtDeadline(t, h, p)
	return h, p
}

// probeAtDeadline lets h's requester reach its recovery deadline and
// checks that it sent one probe, with PSN psn.
func probeAtDeadline(t *testing.T, h *harness, psn packet.PSN) {
	t.Helper()
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	probe := h.drain()
	require.Len(t, probe, 1, "the probe")
	require.Equal(t, psn, parse(t, probe[0]).PSN())
}

// TestSRSpuriousProbeNoChain: under selective repeat the recovery timer
// probes while two WRITEs are merely slow, and the first response after
// the probe, sooner than any round trip, acknowledges the first WRITE: an
// ACK that was on its way, not the probe's answer. The expiry was
// spurious, so no probe follows at once; one per such response resent a
// packet for nearly every ACK of a busy stream (368 resends in a 2 s
// SEND run with 0.1 % of its ACKs lost).
func TestSRSpuriousProbeNoChain(t *testing.T) {
	const p0 = 0x500
	h, p := srProbedWrites(t, p0)
	h.now = h.now.Add(rttTest / 10)
	h.recv(ack(p + 3)) // the first WRITE's ACK, long on its way
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Empty(t, h.drain(), "no second probe after a spurious expiry")
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTOSpurious)
	require.Equal(t, uint64(1), rc.TailProbes)
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 7))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
}

// postRead posts a signaled READ (ID 1) of n packets of pmtu bytes from
// remote address 0x5000 into local memory at baseA, checks that its one
// request left with PSN p, and returns the data the READ is to bring (byte
// i is i·mul) and the response train that carries it.
func postRead(t *testing.T, h *harness, p packet.PSN, pmtu, n, mul int) (data []byte, train [][]byte) {
	t.Helper()
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: uint32(n * pmtu), LKey: lkeyA}}, RemoteAddr: 0x5000, RKey: 9})
	req := h.drain()
	require.Len(t, req, 1)
	require.Equal(t, p, parse(t, req[0]).PSN())
	data = make([]byte, n*pmtu)
	for i := range data {
		data[i] = byte(i * mul)
	}
	return data, readResp(pmtu, p, data, 0, false)
}

// TestSRReadProbeOneResponse: under selective repeat the recovery timer
// fires while a 16-packet READ has delivered only its first four
// responses. The responder has the READ's request, so the probe asks
// for the last response only, not for the twelve missing ones again:
// when they were only slow ("slow") the probe costs one duplicate
// response; when they were lost ("lost") its answer proves the rest
// missing and they are re-read at once, in one request. If no response
// of the READ came ("unheard"), the request itself may be lost and the
// whole READ is asked for again, as before.
func TestSRReadProbeOneResponse(t *testing.T) {
	const (
		p0   = 0x700
		pmtu = 1024
		n    = 16
	)
	for _, tc := range []string{"slow", "lost", "unheard"} {
		t.Run(tc, func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.SelectiveRepeat = true
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			p := warm(t, h, p0)
			data, train := postRead(t, h, p, pmtu, n, 13)
			heard := 4
			if tc == "unheard" {
				heard = 0
			}
			for _, b := range train[:heard] {
				h.now = h.now.Add(time.Microsecond)
				h.recv(b)
			}
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			probe := h.drain()
			require.Len(t, probe, 1, "one probe")
			pp := parse(t, probe[0])
			require.Equal(t, packet.RCRDMAReadRequest, pp.Opcode())
			if tc == "unheard" {
				require.Equal(t, p, pp.PSN())
				require.Equal(t, uint32(n*pmtu), pp.RETH().DMALen(), "the whole READ")
				for _, b := range train {
					h.recv(b)
				}
			} else {
				require.Equal(t, p+n-1, pp.PSN(), "the last response")
				require.Equal(t, uint64(0x5000+(n-1)*pmtu), pp.RETH().VA())
				require.Equal(t, uint32(pmtu), pp.RETH().DMALen(), "one response")
				answer := readResp(pmtu, p+n-1, data[(n-1)*pmtu:], 0, false)
				require.Len(t, answer, 1)
				h.now = h.now.Add(rttTest)
				if tc == "slow" {
					for _, b := range train[heard:] {
						h.recv(b)
					}
					require.Equal(t, []uint64{1}, h.cq.ids())
					h.recv(answer[0]) // a duplicate now
					require.Empty(t, h.drain(), "nothing asked for again")
				} else {
					h.recv(answer[0])
					reread := h.drain()
					require.Len(t, reread, 1, "the rest re-read at once")
					rp := parse(t, reread[0])
					require.Equal(t, p+packet.PSN(heard), rp.PSN())
					require.Equal(t, uint64(0x5000+heard*pmtu), rp.RETH().VA())
					require.Equal(t, uint32((n-1-heard)*pmtu), rp.RETH().DMALen())
					for _, b := range readResp(pmtu, p+packet.PSN(heard), data[heard*pmtu:(n-1)*pmtu], 0, false) {
						h.recv(b)
					}
				}
			}
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, data, h.mem[lkeyA].buf[:n*pmtu])
			c := h.r.Counters()
			if tc == "unheard" {
				// The lost-request watch (srWatchRead) or the timer.
				require.Equal(t, uint64(1), c.Recovery.TailProbes+c.SRReadRequestsLost)
			} else {
				require.Equal(t, uint64(1), c.Recovery.TailProbes)
			}
		})
	}
}

// TestSRReadProbeSpurious: under selective repeat the recovery timer fires
// while a 16-packet READ has delivered only its first four responses, and
// the other twelve, on their way all along, arrive sooner after the
// probe than any round trip. The expiry is spurious (RTOSpurious), as it
// is for a SEND or WRITE probe (TestSRSpuriousProbeNoChain): the re-read
// probe's time is its own, not an earlier probe's.
func TestSRReadProbeSpurious(t *testing.T) {
	const (
		p0   = 0x900
		pmtu = 1024
		n    = 16
	)
	for _, earlier := range []bool{false, true} {
		t.Run(fmt.Sprintf("earlier probe %v", earlier), func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.SelectiveRepeat = true
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			p := warm(t, h, p0)
			if earlier {
				// A WRITE probed and answered long before the READ.
				postWrite4K(t, h, 7)
				h.now = h.r.Deadline()
				h.r.OnTimeout(h.now)
				require.Len(t, h.drain(), 1, "the WRITE's probe")
				h.now = h.now.Add(rttTest)
				h.recv(ack(p + 3))
				require.Equal(t, []uint64{7}, h.cq.ids())
				p += 4
				h.now = h.now.Add(10 * rttTest)
			}
			data, train := postRead(t, h, p, pmtu, n, 7)
			h.now = h.now.Add(rttTest)
			for _, b := range train[:4] {
				h.recv(b)
			}
			spurious := h.r.Counters().Recovery.RTOSpurious
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			require.Len(t, h.drain(), 1, "the probe")
			h.now = h.now.Add(rttTest / 10)
			for _, b := range train[4:] {
				h.recv(b)
			}
			require.Contains(t, h.cq.ids(), uint64(1))
			require.Equal(t, data, h.mem[lkeyA].buf[:n*pmtu])
			require.Equal(t, spurious+1, h.r.Counters().Recovery.RTOSpurious,
				"the rest of the READ came sooner after the probe than a round trip")
		})
	}
}

// TestRecoverySpuriousAckOfProbePSN: under go-back-N the recovery timer
// fires on a WRITE of four packets, and the ACK of exactly its first PSN
// (the probe's) comes a tenth of a round trip after the probe: that is the
// original packet's ACK, not the probe's answer, so the expiry is spurious
// and nothing is sent again (a probe's answer acknowledging exactly its
// PSN would start a go-back-N from the next one, probeAnswered).
func TestRecoverySpuriousAckOfProbePSN(t *testing.T) {
	const p0 = 0xa00
	h, p := warmHarness(t, p0)
	postWrite4K(t, h, 1)
	probeAtDeadline(t, h, p)
	h.now = h.now.Add(rttTest / 10)
	h.recv(ack(p))
	require.Zero(t, len(h.drain()), "no go-back-N on an ACK that was on its way")
	rc := h.r.Counters().Recovery
	require.Equal(t, uint64(1), rc.RTOSpurious)
	require.Zero(t, h.r.Counters().CompleterRetryErr)
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 3))
	require.Equal(t, []uint64{1}, h.cq.ids())
}

// TestSRSlowResponderNoChain: under selective repeat the recovery timer
// fires on two WRITEs (eight packets) while the responder is slow, not
// lossy. The first ACK after the probe comes later than a round trip and
// acknowledges the first WRITE, whose four packets the responder had
// besides the probed one: it had later packets than the probe's, so the
// rest sent before the probe is not a lost tail but still on its way, and
// no second probe goes (srProbeAnswered). A lost tail, whose answer
// acknowledges exactly the probe's PSN, is probed packet by packet
// ("lost tail").
func TestSRSlowResponderNoChain(t *testing.T) {
	const p0 = 0xb00
	for _, tc := range []string{"slow", "lost tail"} {
		t.Run(tc, func(t *testing.T) {
			h, p := srProbedWrites(t, p0)
			h.now = h.now.Add(2 * rttTest)
			if tc == "slow" {
				h.recv(ack(p + 3))
				require.Equal(t, []uint64{1}, h.cq.ids())
				require.Zero(t, len(h.drain()), "no second probe")
				h.now = h.now.Add(rttTest / 10)
				h.recv(ack(p + 7))
				require.Equal(t, []uint64{1, 2}, h.cq.ids())
				require.Equal(t, uint64(1), h.r.Counters().Recovery.TailProbes)
				return
			}
			for i := range packet.PSN(8) {
				h.recv(ack(p + i))
				if i == 7 {
					break
				}
				next := h.drain()
				require.Len(t, next, 1, "the next packet of the lost tail, probed at once")
				require.Equal(t, p+i+1, parse(t, next[0]).PSN())
				h.now = h.now.Add(rttTest)
			}
			require.Equal(t, []uint64{1, 2}, h.cq.ids())
			require.Equal(t, uint64(8), h.r.Counters().Recovery.TailProbes)
		})
	}
}

// TestRecoveryLearnedDecaysWhileIdle: a stall taught the recovery timer a
// long delay, then the QP was idle (nothing sent, nothing received) for
// three half-lives. The first packet after the pause arms the timer with
// the decayed timeout, the RTO of the samples, not with the delay learned
// seconds before, so a tail lost after a pause costs a round trip's
// timeout, not the old stall's. The same holds when the owner restarts a
// running timer (DeferRecovery) after a pause.
func TestRecoveryLearnedDecaysWhileIdle(t *testing.T) {
	const p0 = 0x500
	h, p := warmHarness(t, p0)
	const stall = 10 * time.Millisecond
	h.r.rec.timer.Learn(h.now, stall)
	start := h.now
	postWrite4K(t, h, 1)
	require.Equal(t, start.Add(stall), h.r.Deadline(), "the learned delay covers the stall")
	h.now = h.now.Add(rttTest)
	h.recv(ack(p + 3))
	require.Equal(t, []uint64{1}, h.cq.ids())

	h.now = h.now.Add(3 * retry.SpuriousHalfLife) // idle: nothing sent or received
	start = h.now
	postWrite4K(t, h, 2)
	require.Equal(t, start.Add(h.r.rec.timer.Timeout(&h.r.rec.rtt)), h.r.Deadline())
	require.Less(t, h.r.Deadline().Sub(start), stall/4, "three half-lives leave at most an eighth of it")

	h.r.rec.timer.Learn(h.now, stall) // another stall, then a pause before a deferred send
	h.now = h.now.Add(3 * retry.SpuriousHalfLife)
	h.r.DeferRecovery(h.now) // WRITE 2 is still outstanding: its timer runs
	due := h.r.rec.due.When()
	require.Equal(t, h.now.Add(h.r.rec.timer.Timeout(&h.r.rec.rtt)), due)
	require.Less(t, due.Sub(h.now), stall/4)
}
