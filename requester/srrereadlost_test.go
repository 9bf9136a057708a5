package requester

import (
	"bytes"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// rereadLostPMTU and rereadLostSize shape the READ of the lost re-read
// tests: 1 MiB in 1024 response packets.
const (
	rereadLostPMTU = 1024
	rereadLostSize = 1 << 20
)

// rereadLostRun is one run of a 1 MiB READ over an srLink against the fake
// responder, or the responder engine (engine), with selective repeat:
// which response PSN offsets are dropped the nth time they go (drop),
// delayed (delay), and what the run saw.
type rereadLostRun struct {
	engine bool
	drop   map[int]int           // response PSN offset → times dropped
	delay  map[int]time.Duration // response PSN offset → extra delay of its re-read's response (nth 2)
	// slow delays the response of the first READ, which gives the RTT
	// sample: a resend interval far above the link's round trip, as on a
	// host whose RTT samples vary.
	slow time.Duration
	// evidence is the offset of the response whose arrival proves the
	// re-read's response lost, evidenceNth which time it went (0: the
	// second, a re-read's), and evidenceAt when it arrived.
	evidence    int
	evidenceNth int
	evidenceAt  time.Time
	// then posts a 16 KiB READ right after the 1 MiB one: it goes once
	// the window has room, after the re-reads of the first responses.
	then bool
	// asked records, per offset, when each READ request with that PSN
	// left the requester.
	asked map[int][]time.Time
}

// requireAskedAgain runs rr and checks that its evidence arrived (what
// says what it is) and that PSN 100, re-read twice in all before it (twice
// says how), was asked for a third time no earlier than the evidence and
// within two round trips of it, counted once in SRResendsLost.
func (rr *rereadLostRun) requireAskedAgain(t *testing.T, what, twice string) {
	t.Helper()
	h, l := rr.run(t)
	require.False(t, rr.evidenceAt.IsZero(), what)
	require.Len(t, rr.asked[100], 2, twice)
	third := rr.asked[100][1]
	t.Logf("evidence at %v, third request %v after it; srtt %v, interval %v",
		rr.evidenceAt.Sub(t0), third.Sub(rr.evidenceAt), h.r.rec.rtt.SRTT(), h.r.srInterval(h.now))
	require.False(t, third.Before(rr.evidenceAt), "asked again before the evidence")
	require.LessOrEqual(t, third.Sub(rr.evidenceAt), 4*l.delay, "asked again within two round trips of the evidence")
	require.Equal(t, uint64(1), h.r.Counters().SRResendsLost)
}

// run posts a one-packet READ (an RTT sample) and then the 1 MiB READ, runs
// the link until both complete, and checks the READ's data byte for byte.
func (rr *rereadLostRun) run(t *testing.T) (*harness, *srLink) {
	if rr.evidenceNth == 0 {
		rr.evidenceNth = 2
	}
	cfg := baseConfig(rereadLostPMTU, 0x100)
	cfg.SelectiveRepeat = true
	h, f, reg := withResponder(t, cfg, rereadLostSize, verbs.AccessRemoteRead, 9)
	f.sr.on = true
	var peer srPeer = f
	if rr.engine {
		e := newEngineResponder(h, rereadLostPMTU, cfg.SQPSN, 64, 1)
		reg = e.mem.add(rkey, rbase, rereadLostSize, verbs.AccessRemoteRead, 9)
		peer = e
	}
	l := newSRLink(h, peer)
	l.extraResp = func(packet.Packet, int) time.Duration { return rr.slow }
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: rereadLostPMTU, LKey: lkeyA}}})
	l.run(time.Second)
	require.True(t, h.r.rec.rtt.Valid(), "an RTT sample before the READ under test")
	require.Greater(t, h.r.srInterval(h.now), 10*rr.slow/4, "the resend interval")
	base := cfg.SQPSN.Next()
	rr.asked = map[int][]time.Time{}
	l.dropReq = func(p packet.Packet, nth int) bool {
		if p.Opcode() == packet.RCRDMAReadRequest {
			k := int(p.PSN().Diff(base))
			rr.asked[k] = append(rr.asked[k], h.now)
		}
		return false
	}
	l.dropResp = func(p packet.Packet, nth int) bool {
		k := int(p.PSN().Diff(base))
		if nth <= rr.drop[k] {
			return true
		}
		if k == rr.evidence && nth == rr.evidenceNth && rr.evidenceAt.IsZero() {
			rr.evidenceAt = h.now.Add(l.delay) // sent now, it arrives a link delay later
		}
		return false
	}
	l.extraResp = func(p packet.Packet, nth int) time.Duration {
		if nth == 2 {
			return rr.delay[int(p.PSN().Diff(base))]
		}
		return 0
	}
	sges := []verbs.SGE{{Addr: baseA, Length: rereadLostSize, LKey: lkeyA}}
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, SGList: sges})
	n := 2
	if rr.then {
		// The same bytes again, to the same place.
		h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA, Length: 16 << 10, LKey: lkeyA}}})
		n = 3
	}
	l.run(time.Second)
	requireClean(t, h, n)
	if rr.engine {
		require.Empty(t, f.reads, "the engine, not the fake responder, answered")
	}
	require.True(t, bytes.Equal(reg.buf, gatherSGEs(t, h.mem, sges)), "READ data")
	return h, l
}

// TestSRLostRereadResponse loses READ responses 100 to 105 of a 1 MiB READ
// and then, of the one re-read that asks for them again, the response of
// 100: once the re-read's response of 103 has arrived (srReorder PSNs
// after it, in the same stream), 100 is taken as lost and asked for a
// third time within about a round trip, not after the resend interval.
func TestSRLostRereadResponse(t *testing.T) {
	for _, engine := range []bool{false, true} {
		t.Run(peerName(engine), func(t *testing.T) { testLostRereadResponse(t, engine) })
	}
}

// peerName names the far end of a lost re-read test.
func peerName(engine bool) string {
	if engine {
		return "engine"
	}
	return "fake"
}

func testLostRereadResponse(t *testing.T, engine bool) {
	rr := &rereadLostRun{engine: engine, drop: map[int]int{100: 2, 101: 1, 102: 1, 103: 1, 104: 1, 105: 1}, evidence: 103,
		slow: time.Millisecond}
	rr.requireAskedAgain(t, "the re-read's response of 103 arrived", "re-reads from 100: the range, then 100 again")
}

// TestSRLostRereadAcrossStreams loses READ responses 100, 102, 104, 106,
// 108 and 110 of a 1 MiB READ, each re-read alone, and the response of
// the re-read of 100: once the re-reads of srReorder holes sent after it
// were answered (102, 104, 106), 100 is asked for a third time within
// about a round trip.
func TestSRLostRereadAcrossStreams(t *testing.T) {
	for _, engine := range []bool{false, true} {
		t.Run(peerName(engine), func(t *testing.T) { testLostRereadAcrossStreams(t, engine) })
	}
}

func testLostRereadAcrossStreams(t *testing.T, engine bool) {
	rr := &rereadLostRun{engine: engine, drop: map[int]int{100: 2, 102: 1, 104: 1, 106: 1, 108: 1, 110: 1}, evidence: 106,
		slow: time.Millisecond}
	rr.requireAskedAgain(t, "the re-read's response of 106 arrived", "re-reads of 100")
}

// TestSRLostRereadThenRead loses READ response 100 of a 1 MiB READ and
// then its re-read's response, with no other loss: a 16 KiB READ posted
// behind it goes out after the re-read, so its third response, queued
// by the responder behind the re-read's extra stream, proves the
// re-read's answer lost, and 100 is asked for a third time within about
// a round trip.
func TestSRLostRereadThenRead(t *testing.T) {
	for _, engine := range []bool{false, true} {
		t.Run(peerName(engine), func(t *testing.T) {
			rr := &rereadLostRun{engine: engine, drop: map[int]int{100: 2}, then: true,
				evidence: 1024 + 2, evidenceNth: 1, slow: time.Millisecond}
			rr.requireAskedAgain(t, "READ 3's third response arrived", "re-reads of 100")
		})
	}
}

// TestSRRereadResponseReordered loses READ responses of a 1 MiB READ and
// delays the response of a re-read behind one or two responses of the
// same re-read or of re-reads sent after it (fewer than srReorder): that
// is no loss, and nothing is asked for a third time.
func TestSRRereadResponseReordered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   map[int]int
		delay  map[int]time.Duration
		starts []int // the offsets the re-reads start at
	}{
		// 100's re-read response arrives after those of 101 and 102.
		{name: "same-stream", drop: map[int]int{100: 1, 101: 1, 102: 1, 103: 1, 104: 1, 105: 1},
			delay: map[int]time.Duration{100: 2500 * time.Nanosecond}, starts: []int{100}},
		// 100's re-read response arrives after those of the re-reads
		// of 102 and 104.
		{name: "later-streams", drop: map[int]int{100: 1, 102: 1, 104: 1, 106: 1, 108: 1, 110: 1},
			delay: map[int]time.Duration{100: 5 * time.Microsecond}, starts: []int{100, 102, 104, 106, 108, 110}},
	} {
		for _, engine := range []bool{false, true} {
			t.Run(tc.name+"/"+peerName(engine), func(t *testing.T) {
				rr := &rereadLostRun{engine: engine, drop: tc.drop, delay: tc.delay, slow: time.Millisecond}
				h, _ := rr.run(t)
				require.Len(t, rr.asked, 1+len(tc.starts), "READ requests: %v", rr.asked)
				require.Len(t, rr.asked[0], 1, "the READ")
				for _, k := range tc.starts {
					require.Len(t, rr.asked[k], 1, "re-reads from %d", k)
				}
				require.Zero(t, h.r.Counters().SRResendsLost)
			})
		}
	}
}

// TestSRExtraStream: a re-read is numbered as an extra stream only when a
// response of its READ part or of a later one has arrived (the responder
// executed the part's request, holds its READ and serves the re-read as a
// duplicate, in re-read order), not when none has (the watch's or a hole
// report's re-read may be executed as the original request, its train
// queued behind the others), and never for the tail-loss probe (its range
// may be answered by the part's own train).
func TestSRExtraStream(t *testing.T) {
	cfg := baseConfig(srPMTU, srSQ)
	cfg.SelectiveRepeat = true
	cfg.MaxReadPkts = 8
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: srSize, LKey: lkeyA}}})
	require.NotEmpty(t, h.drain())
	w := h.r.slot(h.r.head)
	require.False(t, h.r.srExtraStream(w, srSQ.Add(3)), "no response of the part")
	h.recv(readResp(srPMTU, srSQ, make([]byte, 8*srPMTU), 0, false)[1])
	require.True(t, h.r.srExtraStream(w, srSQ.Add(3)), "a response of the part arrived")
	require.True(t, h.r.srExtraStream(w, srSQ), "from the part's first PSN")
	require.False(t, h.r.srExtraStream(w, srSQ.Add(8)), "the next part")
	h.recv(readResp(srPMTU, srSQ.Add(16), make([]byte, 8*srPMTU), 0, false)[0])
	require.True(t, h.r.srExtraStream(w, srSQ.Add(8)), "no response of the part, one of a later part")
	require.False(t, h.r.srExtraStream(w, srSQ.Add(24)), "a part after the latest response")
	h.r.sr.probing = true
	require.False(t, h.r.srExtraStream(w, srSQ.Add(3)), "the probe's re-read")
}

// TestSRLostRereadLaterRequests: READ 1 loses response 5, which is re-read
// alone; READ 3 is posted and sent after that re-read. The responder
// queues READ 3's train behind the re-read's extra stream, so once READ
// 3's responses 0 to 2 have arrived (srReorder PSNs sent after the
// re-read) without the re-read's answer, 5 is asked for again at once;
// its answer overtaken by two of them is no loss.
func TestSRLostRereadLaterRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answerAfter: how many of READ 3's responses arrive before the
		// re-read's answer (-1: it is lost).
		answerAfter int
		rereads     int // re-reads of 5
	}{
		{name: "lost", answerAfter: -1, rereads: 2},
		{name: "overtaken-by-two", answerAfter: 2, rereads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrderHarness(t, 3, rttTest) // room for READ 3
			o.read(1)
			o.read(2)
			o.collect()
			require.Len(t, o.sent, 2, "READs 1 and 2")
			o.now = o.now.Add(rttTest)
			o.answer(1, 5)
			rereads := func() []orderSent {
				var out []orderSent
				for _, s := range o.sent {
					if s.p.Opcode() == packet.RCRDMAReadRequest && s.p.PSN() == o.first(1).Add(5) {
						out = append(out, s)
					}
				}
				return out
			}
			require.Len(t, rereads(), 1, "5 re-read")
			o.read(3)
			o.collect()
			require.Equal(t, o.first(3), o.sent[len(o.sent)-1].p.PSN(), "READ 3 sent after the re-read")
			o.answer(2)
			require.Len(t, rereads(), 1, "READ 2's train was sent before the re-read")
			for k := range orderPkts {
				if k == tc.answerAfter {
					o.in(o.reread(1, 5, 6, 5))
				}
				o.in(o.resp(3, k))
				if k == 2 && tc.answerAfter < 0 {
					rr := rereads()
					require.Len(t, rr, 2, "5 asked for again")
					require.Equal(t, o.now, rr[1].at, "at READ 3's response 2")
					o.in(o.reread(1, 5, 6, 5))
				}
				o.now = o.now.Add(time.Microsecond)
			}
			require.Less(t, o.now.Sub(rereads()[0].at), o.r.srInterval(o.now), "within the resend interval")
			require.Len(t, rereads(), tc.rereads)
			require.Equal(t, []uint64{1, 2, 3}, o.cq.ids())
			require.Equal(t, uint64(tc.rereads-1), o.r.Counters().SRResendsLost)
		})
	}
}

// TestSRStreamRingFull: extra-stream re-reads beyond the ring's room push
// the oldest out (those fall back to the resend interval); the ring keeps
// the newest srStreamsMax, numbered in order.
func TestSRStreamRingFull(t *testing.T) {
	h := newHarness(t, baseConfig(srPMTU, srSQ))
	r := h.r
	for i := range srStreamsMax + 3 {
		r.srStreamSent(srSQ.Add(i), 1)
		require.NoError(t, r.srCheck())
	}
	s := &r.sr
	require.Equal(t, srStreamsMax, s.nstreams)
	head := s.streams[s.shead]
	require.Equal(t, uint32(4), head.num, "re-reads 1 to 3 left the full ring")
	require.Equal(t, srSQ.Add(3), head.psn)
	require.Equal(t, uint32(srStreamsMax+3), s.streams[(s.shead+s.nstreams-1)%srStreamsMax].num)
}
