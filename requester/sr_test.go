package requester

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

const (
	srPMTU = 256
	srSQ   = packet.PSN(packet.PSNMask - 10) // wraps inside the tests' messages
	srPkts = 40
	srSize = srPkts * srPMTU
)

// srSetup returns a requester with selective repeat on, a fake responder
// speaking the contract, and the timed link between them.
func srSetup(t *testing.T) (*harness, *fakeResponder, *srLink) {
	cfg := baseConfig(srPMTU, srSQ)
	cfg.SelectiveRepeat = true
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 4*srSize, verbs.AccessLocalWrite, 1)
	f := newResponder(t, srPMTU, srSQ)
	f.sr.on = true
	f.mem.add(rkey, rbase, 4*srSize, verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic, 7)
	return h, f, newSRLink(h, f)
}

// postSRWrite posts WR 1: an RDMA WRITE of srSize bytes (srPkts packets)
// from baseA to rbase.
func postSRWrite(h *harness) {
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
}

// srWriteSent returns srSetup's requester with postSRWrite's packets all
// sent and taken (no responder answers them), a millisecond later.
func srWriteSent(t *testing.T) *harness {
	h, _, _ := srSetup(t)
	postSRWrite(h)
	require.Len(t, h.drain(), srPkts)
	h.now = h.now.Add(time.Millisecond)
	return h
}

// requireClean checks that every WR completed successfully, in order, and
// that nothing went back N or hit the IB timeout.
func requireClean(t *testing.T, h *harness, n int) {
	t.Helper()
	_, failed := h.r.Failed()
	require.False(t, failed, "requester failed: %+v", h.r.Counters())
	require.Len(t, h.cq.wcs, n)
	for i, wc := range h.cq.wcs {
		require.Equal(t, verbs.WCSuccess, wc.Status)
		require.Equal(t, uint64(i+1), wc.ID, "completion order")
	}
	c := h.r.Counters()
	require.Zero(t, c.CompleterRetryErr, "go-back-N retries")
	require.Zero(t, c.Timeouts, "IB timeouts")
	require.Zero(t, h.r.Outstanding())
}

// TestSRWriteSendHoles loses request packets of a 40-packet WRITE or SEND
// (scripted: PSN offset → times lost) and checks that exactly the lost
// packets are sent again, the data arrives intact, and the last resend
// of a reported hole asks for an ACK.
func TestSRWriteSendHoles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     verbs.WROpcode
		drops  map[int]int
		ackReq []int // PSN offsets whose resend carries AckReq
	}{
		{name: "single", op: verbs.WRRDMAWrite, drops: map[int]int{5: 1}, ackReq: []int{5}},
		{name: "multiple", op: verbs.WRRDMAWrite, drops: map[int]int{3: 1, 10: 1, 11: 1, 12: 1, 30: 1}, ackReq: []int{12, 30}},
		{name: "first", op: verbs.WRRDMAWrite, drops: map[int]int{0: 1}},
		{name: "tail", op: verbs.WRRDMAWrite, drops: map[int]int{39: 1}},
		{name: "tail-two", op: verbs.WRRDMAWrite, drops: map[int]int{38: 1, 39: 1}},
		{name: "lost-resend", op: verbs.WRRDMAWrite, drops: map[int]int{5: 2}},
		{name: "lost-resend-twice", op: verbs.WRRDMAWrite, drops: map[int]int{20: 3}},
		{name: "send-holes", op: verbs.WRSend, drops: map[int]int{0: 1, 7: 1, 8: 1, 39: 1}},
		{name: "send-clean", op: verbs.WRSend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f, l := srSetup(t)
			// A one-packet message first: the RTT is known when the
			// message under test goes.
			base := srSQ.Add(1)
			l.dropReq = dropNth(base, tc.drops)
			h.post(&verbs.SendWR{ID: 1, Opcode: tc.op, Flags: verbs.SendSignaled, RemoteAddr: rbase + srSize, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
			l.run(time.Second)
			h.post(&verbs.SendWR{ID: 2, Opcode: tc.op, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: srSize / 2, LKey: lkeyA}, {Addr: baseA + srSize, Length: srSize / 2, LKey: lkeyA}}})
			l.run(time.Second)
			requireClean(t, h, 2)
			want := gatherSGEs(t, h.mem, []verbs.SGE{{Addr: baseA, Length: srSize / 2, LKey: lkeyA}, {Addr: baseA + srSize, Length: srSize / 2, LKey: lkeyA}})
			if tc.op == verbs.WRSend {
				require.Len(t, f.msgs, 2)
				require.True(t, bytes.Equal(want, f.msgs[1]), "SEND data")
			} else {
				require.True(t, bytes.Equal(want, f.mem[rkey].buf[:srSize]), "WRITE data")
			}
			// Each lost packet is sent again as often as it was lost;
			// besides, only tail-loss probes (the oldest unacknowledged
			// packet) are sent twice: no go-back-N.
			lost := 0
			c := h.r.Counters()
			for k := range srPkts {
				n := l.sentCount(base.Add(k))
				require.GreaterOrEqual(t, n, 1+tc.drops[k], "PSN offset %d sent", k)
				if c.Recovery.TailProbes == 0 {
					require.Equal(t, 1+tc.drops[k], n, "PSN offset %d sent", k)
				}
				lost += tc.drops[k]
			}
			require.LessOrEqual(t, c.Retransmits, uint64(lost)+c.Recovery.TailProbes)
			for _, k := range tc.ackReq {
				require.True(t, l.resendAckReq(base.Add(k)), "resend of PSN offset %d without AckReq", k)
			}
			t.Logf("holes %d, resent %d, probes %d, rto %d", c.SRHolesReceived, c.SRPacketsResent,
				c.Recovery.TailProbes, c.Recovery.RTOExpiries)
		})
	}
}

// resendAckReq reports whether the second packet built with PSN psn asks
// for an ACK.
func (l *srLink) resendAckReq(psn packet.PSN) bool {
	n := 0
	for _, b := range l.sent {
		if p := parse(l.h.t, b); p.PSN() == psn {
			if n++; n == 2 {
				return p.AckReq()
			}
		}
	}
	return false
}

// reread is a READ request as the tests expect it: PSN offset, response
// packet offset of its VA, and its length in packets.
type reread struct{ psn, at, pkts int }

// readRequests returns the READ requests the requester built, relative to
// the READ at PSN base and remote address va.
func (l *srLink) readRequests(base packet.PSN, va uint64) []reread {
	var out []reread
	for _, b := range l.sent {
		p := parse(l.h.t, b)
		if p.Opcode() != packet.RCRDMAReadRequest {
			continue
		}
		reth := p.RETH()
		out = append(out, reread{int(p.PSN().Diff(base)), int(reth.VA()-va) / srPMTU,
			(int(reth.DMALen()) + srPMTU - 1) / srPMTU})
	}
	return out
}

// TestSRReadHoles loses READ responses (scripted by PSN offset) and
// checks that the responses are placed out of order and that only the
// missing ranges are re-read, each with the hole's first PSN, VA and
// length.
func TestSRReadHoles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drops map[int]int
		reqs  []reread // after the READ itself
		parts int      // Config.MaxReadPkts
	}{
		{name: "clean"},
		{name: "single", drops: map[int]int{7: 1}, reqs: []reread{{7, 7, 1}}},
		{name: "range", drops: map[int]int{7: 1, 8: 1, 9: 1}, reqs: []reread{{7, 7, 3}}},
		{name: "two-holes", drops: map[int]int{5: 1, 20: 1, 21: 1}, reqs: []reread{{5, 5, 1}, {20, 20, 2}}},
		{name: "first", drops: map[int]int{0: 1}, reqs: []reread{{0, 0, 1}}},
		{name: "tail", drops: map[int]int{39: 1}, reqs: []reread{{39, 39, 1}}},
		{name: "lost-reread", drops: map[int]int{7: 2}, reqs: []reread{{7, 7, 1}, {7, 7, 1}}},
		{name: "parts", parts: 16, drops: map[int]int{15: 1, 16: 1}, reqs: []reread{{16, 16, 16}, {32, 32, 8}, {15, 15, 1}, {16, 16, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f, l := srSetup(t)
			h.r.cfg.MaxReadPkts = tc.parts
			l.dropResp = dropNth(srSQ, tc.drops)
			sges := []verbs.SGE{{Addr: baseA + 3, Length: 1000, LKey: lkeyA}, {Addr: baseA + srSize, Length: srSize - 1000, LKey: lkeyA}}
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase + 64, RKey: rkey, SGList: sges})
			l.run(time.Second)
			requireClean(t, h, 1)
			require.True(t, bytes.Equal(f.mem[rkey].buf[64:64+srSize], gatherSGEs(t, h.mem, sges)), "READ data")
			first := reread{0, 0, srPkts}
			if tc.parts > 0 {
				first.pkts = tc.parts
			}
			want := append([]reread{first}, tc.reqs...)
			got := l.readRequests(srSQ, rbase+64)
			if tc.parts > 0 {
				// The parts and the re-reads interleave by timing; compare
				// as sets of requests.
				require.ElementsMatch(t, want, got)
			} else {
				require.Equal(t, want, got)
			}
			c := h.r.Counters()
			require.Equal(t, uint64(srSize), c.ReadBytes)
			t.Logf("rereads %d, probes %d, dropped responses %d", c.ReadHoleRereads, c.Recovery.TailProbes, c.ResponsesDropped)
		})
	}
}

// TestSRReorderNoResend reorders one packet by one or two positions in
// either direction: nothing is sent twice.
func TestSRReorderNoResend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		read  bool
		at    int
		delay time.Duration
	}{
		{"write-by-1", false, 3, 1500 * time.Nanosecond},
		{"write-by-2", false, 3, 2500 * time.Nanosecond},
		{"write-late-by-2", false, 30, 2500 * time.Nanosecond},
		{"read-by-1", true, 3, 1500 * time.Nanosecond},
		{"read-by-2", true, 10, 2500 * time.Nanosecond},
		{"read-first-by-2", true, 0, 2500 * time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, l := srSetup(t)
			extra := func(p packet.Packet, nth int) time.Duration {
				if nth == 1 && int(p.PSN().Diff(srSQ)) == srPkts+tc.at {
					return tc.delay
				}
				return 0
			}
			op := verbs.WRRDMAWrite
			if tc.read {
				op, l.extraResp = verbs.WRRDMARead, extra
			} else {
				l.extraReq = extra
			}
			// A clean message first, then the one reordered.
			h.post(&verbs.SendWR{ID: 1, Opcode: op, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
			h.post(&verbs.SendWR{ID: 2, Opcode: op, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
			l.run(time.Second)
			requireClean(t, h, 2)
			c := h.r.Counters()
			require.Zero(t, c.Retransmits, "packets sent twice")
			require.Zero(t, c.ReadHoleRereads)
		})
	}
}

// srHoleReport builds a hole report [a, b).
func srHoleReport(a, b packet.PSN) []byte {
	return resp(packet.RCAcknowledge, a, packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(b&packet.PSNMask), nil)
}

// TestSRHostileReports sends hole reports that do not fit what is
// outstanding, and floods of valid ones: the bad ones are ignored and
// counted, and a flood resends no more than the unacknowledged window
// once per interval. A report naming no hole is a progress report and
// resends nothing.
func TestSRHostileReports(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ackFirst    int // ACK this PSN offset first (-1: none)
		a, b        int // offsets from the first PSN
		n           int // reports sent
		ignored     uint64
		maxResent   uint64
		wantResends bool
		progress    bool // a == b: a progress report, not a hole
	}{
		{name: "beyond", ackFirst: -1, a: 50, b: 60, n: 1, ignored: 1},
		{name: "past-sent", ackFirst: -1, a: 10, b: 41, n: 1, ignored: 1},
		{name: "progress", ackFirst: -1, a: 10, b: 10, n: 1, progress: true},
		{name: "progress-past-sent", ackFirst: -1, a: 41, b: 41, n: 1, ignored: 1, progress: true},
		{name: "inverted", ackFirst: -1, a: 20, b: 10, n: 1, ignored: 1},
		{name: "huge", ackFirst: -1, a: 0, b: packet.PSNWindow - 1, n: 1, ignored: 1},
		{name: "stale", ackFirst: 19, a: 5, b: 10, n: 1, ignored: 1},
		{name: "partly-stale", ackFirst: 19, a: 5, b: 25, n: 1, maxResent: 5, wantResends: true},
		{name: "flood", ackFirst: -1, a: 0, b: 40, n: 1000, maxResent: 40, wantResends: true},
		{name: "flood-small", ackFirst: -1, a: 7, b: 8, n: 1000, maxResent: 1, wantResends: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := srWriteSent(t)
			if tc.ackFirst >= 0 {
				h.recv(ack(srSQ.Add(tc.ackFirst)))
			}
			resent := 0
			for round := range 2 {
				for range tc.n {
					h.recv(srHoleReport(srSQ.Add(tc.a), srSQ.Add(tc.b)))
				}
				// The responder has received up to the last PSN sent: a
				// hole with packets after it is a loss, not reordering.
				h.recv(srHoleReport(srSQ.Add(srPkts), srSQ.Add(srPkts)))
				// Past the reorder window, short of the recovery timer.
				h.now = h.now.Add(300 * time.Microsecond)
				h.r.OnTimeout(h.now)
				for _, b := range h.drain() {
					p := parse(t, b)
					require.True(t, p.PSN().InRange(srSQ.Add(max(tc.a, tc.ackFirst+1)), tc.b-max(tc.a, tc.ackFirst+1)),
						"resent PSN %#x outside the hole", p.PSN())
					resent++
				}
				if round == 0 && tc.wantResends {
					require.Positive(t, resent)
				}
			}
			c := h.r.Counters()
			if tc.progress {
				require.Zero(t, c.SRHolesReceived)
				// Each round's own progress report adds one.
				require.Equal(t, 2*uint64(tc.n)*(1-tc.ignored)+2, c.SRProgressReceived)
			} else {
				require.Equal(t, uint64(2*tc.n), c.SRHolesReceived)
			}
			require.Equal(t, 2*uint64(tc.n)*tc.ignored, c.SRHolesIgnored)
			require.LessOrEqual(t, uint64(resent), tc.maxResent, "resent within one interval")
			require.Equal(t, uint64(resent), c.SRPacketsResent)
			_, failed := h.r.Failed()
			require.False(t, failed)
		})
	}
}

// TestSRReportWithoutSR: without selective repeat a NAK with code 0x10 is
// an unknown NAK code, which fails the WQE with REM_OP_ERR as rxe does.
func TestSRReportWithoutSR(t *testing.T) {
	h := newHarness(t, baseConfig(srPMTU, srSQ))
	h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
	postSRWrite(h)
	h.drain()
	h.recv(srHoleReport(srSQ.Add(3), srSQ.Add(4)))
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRemOpErr, st)
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, verbs.WCRemOpErr, h.cq.wcs[0].Status)
	require.Zero(t, h.r.Counters().SRHolesReceived)
}

// TestSRAtomicLostAck loses an atomic's acknowledgement (once or twice)
// ahead of a WRITE: the atomic is sent again once later PSNs are answered,
// the responder replays it, and it is executed exactly once.
func TestSRAtomicLostAck(t *testing.T) {
	for _, lost := range []int{1, 2} {
		t.Run(fmt.Sprint(lost), func(t *testing.T) {
			h, f, l := srSetup(t)
			const atomOff = 3 * srSize
			orig := binary.NativeEndian.Uint64(f.mem[rkey].buf[atomOff:])
			l.dropResp = dropNth(srSQ, map[int]int{0: lost})
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, RemoteAddr: rbase + atomOff,
				RKey: rkey, CompareAdd: 5, SGList: []verbs.SGE{{Addr: baseA + 2*srSize, Length: 8, LKey: lkeyA}}})
			h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 8 * srPMTU, LKey: lkeyA}}})
			l.run(time.Second)
			requireClean(t, h, 2)
			require.Equal(t, orig+5, binary.NativeEndian.Uint64(f.mem[rkey].buf[atomOff:]), "executed once")
			require.Equal(t, orig, binary.NativeEndian.Uint64(h.mem[lkeyA].buf[2*srSize:]), "original value")
			require.Equal(t, 1+lost, l.sentCount(srSQ))
		})
	}
}

// TestSRDeadPeer: against a peer that answers nothing, selective repeat
// keeps the IB budget: RETRY_EXC_ERR after retry_cnt + 1 IB timeouts,
// probes in between, never a go-back-N.
func TestSRDeadPeer(t *testing.T) {
	h, _, l := srSetup(t)
	l.dropReq = func(packet.Packet, int) bool { return true }
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 4 * srPMTU, LKey: lkeyA}}})
	l.run(10 * time.Second)
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCRetryExcErr, st)
	c := h.r.Counters()
	require.Equal(t, uint64(h.r.cfg.RetryCnt)+1, c.Timeouts)
	require.Zero(t, c.CompleterRetryErr)
	for k := 1; k < 4; k++ {
		require.Equal(t, 1, l.sentCount(srSQ.Add(k)), "PSN offset %d: only the oldest is probed", k)
	}
	require.True(t, c.Recovery.RetryFailed)
	require.Zero(t, c.Recovery.RetryResponses)
}

// srCheck verifies the selective-repeat bookkeeping: the counts of
// received-response bits, of due resend slots and of resent slots match
// what is stored, and the ring of extra-stream re-reads holds consecutive
// numbers, oldest first.
func (r *Requester) srCheck() error {
	s := &r.sr
	n := 0
	for _, w := range s.got {
		n += bits.OnesCount64(w)
	}
	if n != s.ngot {
		return fmt.Errorf("%d response bits set, %d counted", n, s.ngot)
	}
	d := 0
	for _, sl := range s.slots {
		if sl.due {
			d++
		}
	}
	if d != s.ndue {
		return fmt.Errorf("%d resend slots due, %d counted", d, s.ndue)
	}
	rs := 0
	for _, sl := range s.slots {
		if sl.at != 0 {
			rs++
		}
	}
	if rs != s.nresent {
		return fmt.Errorf("%d resent slots, %d counted", rs, s.nresent)
	}
	if s.nstreams < 0 || s.nstreams > len(s.streams) {
		return fmt.Errorf("%d extra-stream re-reads in a ring of %d", s.nstreams, len(s.streams))
	}
	for i := 1; i < s.nstreams; i++ {
		a, b := s.streams[(s.shead+i-1)%len(s.streams)], s.streams[(s.shead+i)%len(s.streams)]
		if b.num != a.num+1 && !(a.num == ^uint32(0) && b.num == 1) {
			return fmt.Errorf("extra-stream re-reads %d then %d in the ring", a.num, b.num)
		}
	}
	return nil
}

// TestProbeAtomicWrite: the tail-loss probe of an ATOMIC_WRITE at the head
// of the send queue carries its 8 bytes again, with and without selective
// repeat (the send cursor had passed them).
func TestProbeAtomicWrite(t *testing.T) {
	for _, sr := range []bool{false, true} {
		t.Run(fmt.Sprint(sr), func(t *testing.T) {
			cfg := baseConfig(srPMTU, srSQ)
			cfg.SelectiveRepeat = sr
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
			h.drain()
			h.now = h.now.Add(100 * time.Microsecond)
			h.recv(ack(srSQ)) // an RTT sample: the recovery timer fires before the IB timer
			h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRAtomicWrite, Flags: verbs.SendSignaled | verbs.SendInline,
				RemoteAddr: rbase, RKey: rkey, InlineData: []byte("8 bytes!")})
			first := h.drain()
			require.Len(t, first, 1)
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			probe := h.drain()
			_, failed := h.r.Failed()
			require.False(t, failed)
			require.Len(t, probe, 1)
			require.Equal(t, uint64(1), h.r.Counters().Recovery.TailProbes)
			require.Equal(t, parse(t, first[0]).Payload(), parse(t, probe[0]).Payload())
			require.True(t, parse(t, probe[0]).AckReq())
		})
	}
}

// TestSRReadBeyondTracked: a READ of more response packets than the
// requester tracks past a hole (srTrack) misses its first response until
// the responses beyond the tracked PSNs arrive: those are dropped and,
// once the hole is filled, re-read with one request; the data arrives
// intact.
func TestSRReadBeyondTracked(t *testing.T) {
	const pkts = srTrack + 900
	h, f, l := srSetup(t)
	h.mem.add(lkeyB, baseB, pkts*srPMTU, verbs.AccessLocalWrite, 2)
	src := f.mem.add(rkey+1, rbase, pkts*srPMTU, verbs.AccessRemoteRead, 9)
	start := h.now
	l.dropResp = func(p packet.Packet, _ int) bool {
		return p.PSN() == srSQ && h.now.Before(start.Add(pkts*time.Microsecond))
	}
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey + 1,
		SGList: []verbs.SGE{{Addr: baseB, Length: pkts * srPMTU, LKey: lkeyB}}})
	l.run(time.Second)
	requireClean(t, h, 1)
	require.True(t, bytes.Equal(src.buf, h.mem[lkeyB].buf), "READ data")
	reqs := l.readRequests(srSQ, rbase)
	require.Equal(t, reread{0, 0, pkts}, reqs[0])
	require.Equal(t, reread{srTrack, srTrack, pkts - srTrack}, reqs[len(reqs)-1], "the rest in one re-read")
	for _, rr := range reqs[1 : len(reqs)-1] {
		require.Equal(t, reread{0, 0, 1}, rr, "re-reads of the hole")
	}
	require.Positive(t, h.r.Counters().ResponsesDropped)
}

// TestSRNoAllocations: a cycle with selective repeat and losses — a WRITE
// whose second packet is reported missing and resent, a READ whose
// responses arrive out of order with one lost and re-read — allocates
// nothing once the resend ring exists (the first resend allocates it).
func TestSRNoAllocations(t *testing.T) {
	const pmtu = 1024
	cfg := baseConfig(pmtu, 0xFFFFF0)
	cfg.SelectiveRepeat = true
	mem := fakeMem{}
	mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	cq := &countCQ{}
	r := New(cfg, mem, cq)
	buf := make([]byte, pmtu+maxHeaders)
	write := &verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 3000, LKey: lkeyA}}}
	read := &verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 8000, Length: 8 * pmtu, LKey: lkeyA}}}
	hole := srHoleReport(0, 0)
	ackB := ack(0)
	rr := readResp(pmtu, 0, make([]byte, 8*pmtu), 0, false)
	now := t0
	resent, rereads := 0, 0
	deliver := func(b []byte, psn packet.PSN) {
		packet.BTH(b).SetPSN(psn)
		p, _ := packet.Parse(b)
		r.Receive(now, p)
	}
	cycle := func() {
		if r.Post(write) != nil || r.Post(read) != nil {
			panic("post")
		}
		psn := r.SQPSN()
		for r.NextPacket(now, buf) > 0 {
		}
		// WRITE PSNs +0..+2, READ +3..+10. The responder misses +1.
		now = now.Add(100 * time.Microsecond)
		packet.AETH(hole[packet.BTHSize:]).Encode(packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(psn.Add(2)))
		deliver(hole, psn.Add(1))
		now = now.Add(time.Millisecond) // past the reorder window
		r.OnTimeout(now)
		for r.NextPacket(now, buf) > 0 {
			resent++
		}
		deliver(ackB, psn.Add(2))
		// READ responses: +4 lost, the others two by two swapped.
		for _, i := range []int{1, 0, 3, 2, 5, 4, 7, 6} {
			if i != 1 {
				deliver(rr[i], psn.Add(3+i))
			}
		}
		for r.NextPacket(now, buf) > 0 {
			rereads++
		}
		deliver(rr[1], psn.Add(4))
		now = now.Add(time.Microsecond)
		r.OnTimeout(now)
		_ = r.Deadline()
	}
	cycle()
	require.Equal(t, 2, cq.n)
	require.Equal(t, 1, resent)
	require.Equal(t, 1, rereads)
	require.Zero(t, testing.AllocsPerRun(200, cycle))
	require.Zero(t, r.Outstanding())
	_, failed := r.Failed()
	require.False(t, failed)
	c := r.Counters()
	require.Equal(t, c.SRHolesReceived, c.SRPacketsResent-c.ReadHoleRereads)
	require.Equal(t, c.SRHolesReceived, c.ReadHoleRereads)
}

// TestSRWindowAboveDefaultAdapts: under selective repeat a window above
// rxe's 128 PSNs (an rxe device gives up to 256 toward a gorxe peer whose
// buffer absorbs it) halves after a loss, once per round trip and not
// below 128, and grows back on clean round trips; a window of 128 or less
// does not move (selective repeat resends only what was lost).
func TestSRWindowAboveDefaultAdapts(t *testing.T) {
	for _, tc := range []struct {
		window, afterLoss int
	}{
		{256, DefaultWindow},
		{DefaultWindow, DefaultWindow},
		{64, 64},
	} {
		t.Run(fmt.Sprint(tc.window), func(t *testing.T) {
			const pkts, p0 = 600, srSQ
			cfg := baseConfig(srPMTU, p0)
			cfg.SelectiveRepeat = true
			cfg.Window = tc.window
			h, f, remote := withResponder(t, cfg, pkts*srPMTU, verbs.AccessRemoteWrite, 7)
			f.sr.on = true
			l := newSRLink(h, f)
			// PSNs 5 and 6 lost, one after the other: one decrease.
			l.dropReq = dropNth(p0, map[int]int{5: 1, 6: 1})
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: pkts * srPMTU, LKey: lkeyA}}})
			low, end := tc.window, h.now.Add(time.Second)
			for h.r.Outstanding() > 0 && h.now.Before(end) {
				l.run(50 * time.Microsecond)
				low = min(low, h.r.Counters().Recovery.Window)
				if _, failed := h.r.Failed(); failed {
					break
				}
			}
			_, failed := h.r.Failed()
			require.False(t, failed)
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, h.mem[lkeyA].buf, remote.buf)
			rc := h.r.Counters().Recovery
			require.Equal(t, tc.afterLoss, low, "the smallest window")
			if tc.window > DefaultWindow {
				require.Equal(t, uint64(1), rc.WindowDecr, "two losses in one round trip: one decrease")
				require.Greater(t, rc.Window, DefaultWindow, "clean round trips grow it back")
			} else {
				require.Zero(t, rc.WindowDecr)
				require.Equal(t, tc.window, rc.Window)
			}
		})
	}
}

// TestSRRereadAtPartStart: a re-read that starts at the first PSN of a
// READ part none of whose responses has come asks for the whole part. It
// has the PSN of the part's original request, and a responder that has
// not received the original (lost, or overtaken by the re-read) executes
// it as the original: a shorter one would end the READ's PSNs early
// there, and every later request of the QP would be out of order for that
// responder for good. Once a response of the part has come, the responder
// has the original, and the re-read asks only for the missing range (here
// up to that response, which shows the gap before it as lost).
func TestSRRereadAtPartStart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered bool // response 10 has come
		from     int  // the missing range marked for a re-read: [from, from+5)
		want     reread
	}{
		{"unanswered, at the start", false, 0, reread{0, 0, srPkts}},
		{"answered, at the start", true, 0, reread{0, 0, 10}}, // up to the response that came
		{"unanswered, inside", false, 2, reread{2, 2, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := srSetup(t)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
			require.Len(t, h.drain(), 1)
			h.now = h.now.Add(time.Millisecond)
			if tc.answered {
				h.recv(readResp(srPMTU, srSQ, make([]byte, srSize), 0, false)[10])
			}
			h.r.srMarkRange(h.now, srSQ.Add(tc.from), srSQ.Add(tc.from+5), srForced)
			out := h.drain()
			require.NotEmpty(t, out)
			p := parse(t, out[0])
			require.Equal(t, packet.RCRDMAReadRequest, p.Opcode())
			got := reread{int(p.PSN().Diff(srSQ)), int(p.RETH().VA()-rbase) / srPMTU, int(p.RETH().DMALen()) / srPMTU}
			require.Equal(t, tc.want, got)
		})
	}
}
