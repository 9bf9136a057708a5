package requester

import (
	"bytes"
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
