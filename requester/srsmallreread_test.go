package requester

import (
	"bytes"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// smallReadPMTU and smallReads shape the run of the single-packet READ
// tests: smallReads READs of one PMTU each, as rxectl read-bw -s 1024.
const (
	smallReadPMTU = 1024
	smallReads    = 200
)

// smallReadRun is one run of smallReads single-packet READs over an srLink
// against the fake responder, or the responder engine (engine), with
// selective repeat and max_rd_atomic 128: which READs (by index from 0)
// lose their response the first times it goes (drop), how much later a
// response goes the nth time (delay), and what the run saw.
type smallReadRun struct {
	engine bool
	drop   map[int]int
	delay  func(k, nth int) time.Duration
	// asked records, per READ index, when each READ request with its PSN
	// left the requester.
	asked map[int][]time.Time
}

// run posts a one-packet READ whose response is slow (an RTT sample that
// makes the resend interval far longer than the link's round trip, as on
// a host whose RTT samples vary), then the smallReads READs, runs the link
// until they complete, and checks their data byte for byte.
func (sr *smallReadRun) run(t *testing.T) (*harness, *srLink) {
	t.Helper()
	const slow = time.Millisecond
	cfg := baseConfig(smallReadPMTU, 0x100)
	cfg.SelectiveRepeat = true
	cfg.MaxRdAtomic = 128
	cfg.MaxWR = smallReads + 1
	size := smallReads * smallReadPMTU
	h, f, reg := withResponder(t, cfg, size, verbs.AccessRemoteRead, 5)
	f.sr.on = true
	var peer srPeer = f
	if sr.engine {
		e := newEngineResponder(h, smallReadPMTU, cfg.SQPSN, 64, 1)
		e.r.SetMaxDestRdAtomic(cfg.MaxRdAtomic)
		reg = e.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 5)
		peer = e
	}
	l := newSRLink(h, peer)
	l.extraResp = func(packet.Packet, int) time.Duration { return slow }
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: smallReadPMTU, LKey: lkeyA}}})
	l.run(time.Second)
	require.True(t, h.r.rec.rtt.Valid(), "an RTT sample before the READs under test")
	require.Greater(t, h.r.srInterval(h.now), 2*slow, "the resend interval")
	base := cfg.SQPSN.Next()
	sr.asked = map[int][]time.Time{}
	l.dropReq = func(p packet.Packet, nth int) bool {
		if p.Opcode() == packet.RCRDMAReadRequest {
			k := int(p.PSN().Diff(base))
			sr.asked[k] = append(sr.asked[k], h.now)
		}
		return false
	}
	l.dropResp = func(p packet.Packet, nth int) bool { return nth <= sr.drop[int(p.PSN().Diff(base))] }
	l.extraResp = func(p packet.Packet, nth int) time.Duration {
		if sr.delay == nil {
			return 0
		}
		return sr.delay(int(p.PSN().Diff(base)), nth)
	}
	for i := range smallReads {
		off := uint64(i * smallReadPMTU)
		h.post(&verbs.SendWR{ID: uint64(i + 2), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + off, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + off, Length: smallReadPMTU, LKey: lkeyA}}})
	}
	l.run(time.Second)
	requireClean(t, h, smallReads+1)
	if sr.engine {
		require.Empty(t, f.reads, "the engine, not the fake responder, answered")
	}
	require.True(t, bytes.Equal(reg.buf, h.mem[lkeyA].buf), "READ data")
	return h, l
}

// TestSRLostSmallReread loses the response of one single-packet READ of a
// pipelined run and then the response of its re-read, the later READs
// answered normally. The re-read asks for a READ the responder has
// executed (later responses prove it), which it serves as a duplicate in
// an extra stream ahead of the answers to the READs sent after the
// re-read (the responder engine too: it drops the first whole duplicate
// of a READ only when the READ has more than one response): once
// srReorder of those have arrived without it, the READ is asked for again
// within about a round trip, each time, not after the resend interval
// (doubled after the second re-read). Without a loss of the re-read's
// answer, nothing is asked for a third time.
func TestSRLostSmallReread(t *testing.T) {
	const lost = 20
	for _, tc := range []struct {
		name   string
		engine bool
		drop   int // times the response of READ lost is lost
		asks   int // times READ lost is asked for in all
	}{
		{name: "fake/answer-lost", drop: 2, asks: 3},
		{name: "fake/answered", drop: 1, asks: 2},
		{name: "engine/answer-lost", engine: true, drop: 2, asks: 3},
		{name: "engine/answered", engine: true, drop: 1, asks: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &smallReadRun{engine: tc.engine, drop: map[int]int{lost: tc.drop}}
			h, l := sr.run(t)
			asked := sr.asked[lost]
			t.Logf("asked at %v; srtt %v, interval %v; resent %d, resends lost %d, probes %d",
				asked, h.r.rec.rtt.SRTT(), h.r.srInterval(h.now), h.r.Counters().SRPacketsResent,
				h.r.Counters().SRResendsLost, h.r.Counters().Recovery.TailProbes)
			require.Len(t, asked, tc.asks, "READ %d asked for", lost)
			for i := 1; i < len(asked); i++ {
				// The evidence: srReorder responses to READs sent after
				// the last request, a round trip and a few packets later.
				require.LessOrEqual(t, asked[i].Sub(asked[i-1]), 3*l.delay, "ask %d within about a round trip", i+1)
			}
			require.Zero(t, h.r.Counters().Recovery.TailProbes, "tail-loss probes")
			require.Equal(t, uint64(tc.asks-2), h.r.Counters().SRResendsLost)
			require.Equal(t, uint64(tc.asks-1), h.r.Counters().SRPacketsResent)
		})
	}
}

// TestSRSmallRereadReordered: the answer to the re-read of a single-packet
// READ overtaken by one or two responses to READs sent after the re-read
// (fewer than srReorder) is no loss: the READ is asked for twice in all.
func TestSRSmallRereadReordered(t *testing.T) {
	const lost = 20
	for _, tc := range []struct {
		name  string
		delay time.Duration // of the re-read's answer
	}{
		{name: "overtaken-by-one", delay: 1500 * time.Nanosecond},
		{name: "overtaken-by-two", delay: 2500 * time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &smallReadRun{drop: map[int]int{lost: 1}, delay: func(k, nth int) time.Duration {
				if k == lost && nth == 2 {
					return tc.delay
				}
				return 0
			}}
			h, _ := sr.run(t)
			require.Len(t, sr.asked[lost], 2, "READ %d and its re-read", lost)
			require.Zero(t, h.r.Counters().SRResendsLost)
			require.Equal(t, uint64(1), h.r.Counters().SRPacketsResent)
		})
	}
}
