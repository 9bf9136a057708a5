package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// Under selective repeat the window counts packets in flight, not PSNs
// outstanding: what the responder reports received (the end of a hole
// report, a progress report) leaves the flight, so new packets go out
// while the hole at the oldest PSN is repaired, up to what the peer's
// out-of-order buffer holds (Config.PeerOOOLimit) and never further.
func TestSRFlightAccounting(t *testing.T) {
	const window, slots = 8, 20
	for _, tc := range []struct {
		name string
		sr   bool
	}{{"selective-repeat", true}, {"go-back-n", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(srPMTU, srSQ)
			cfg.SelectiveRepeat = tc.sr
			cfg.Window = window
			cfg.PeerOOOLimit = slots * (srPMTU + packet.OOOSlotOverhead)
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
			postSRWrite(h)
			sent := len(h.drain())
			require.Equal(t, window, sent, "a full window")

			// fresh counts the packets of got sent for the first time.
			fresh := func(got [][]byte) int {
				n := 0
				for _, b := range got {
					if !parse(t, b).PSN().Before(srSQ.Add(sent)) {
						n++
					}
				}
				return n
			}
			// The first packet is lost; the responder holds the next one.
			h.recv(srHoleReport(srSQ, srSQ.Add(1)))
			sent += fresh(h.drain())
			if !tc.sr {
				require.Equal(t, window, sent, "go-back-N takes no hole report")
				return
			}
			require.Equal(t, window+2, sent, "PSNs 0 and 1 are not in flight")
			// Progress: the responder holds everything sent but PSN 0.
			h.recv(srHoleReport(srSQ.Add(sent), srSQ.Add(sent)))
			for range 10 {
				n := fresh(h.drain())
				if n == 0 {
					break
				}
				sent += n
				h.recv(srHoleReport(srSQ.Add(sent), srSQ.Add(sent)))
			}
			require.Equal(t, slots, sent, "bounded by the peer's out-of-order buffer")
			c := h.r.Counters()
			require.Equal(t, uint64(1), c.SRHolesReceived)
			require.Positive(t, c.SRProgressReceived)
			require.Zero(t, c.SRHolesIgnored)

			// The hole fills: the cumulative ACK frees the rest of the span.
			h.recv(ack(srSQ.Add(sent - 1)))
			got := h.drain()
			require.NotEmpty(t, got)
			for _, b := range got {
				require.False(t, parse(t, b).PSN().Before(srSQ.Add(sent)), "nothing resent")
			}
		})
	}
}

// A resend that a hole report names missing again after the responder
// reported received packets sent more than srReorder packets after it was
// lost: it goes again at once, without waiting for the once-per-interval
// rule or the recheck timer. Without that evidence it waits.
func TestSRResendLostByProgress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		progress int // packets past the resend the responder reports received
		want     bool
	}{
		{"lost", srReorder + 2, true},
		{"within-reorder", srReorder, false},
		{"no-progress", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(srPMTU, srSQ)
			cfg.SelectiveRepeat = true
			cfg.Window = 8
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
			postSRWrite(h)
			require.Len(t, h.drain(), 8)
			// PSN 0 is lost: it is resent (no RTT sample yet, so no
			// reorder wait), and the report frees room for new packets.
			h.recv(srHoleReport(srSQ, srSQ.Add(1)))
			next := srSQ.Add(8)
			resends := func(got [][]byte) int {
				n := 0
				for _, b := range got {
					p := parse(t, b).PSN()
					if p == srSQ {
						n++
					}
					if p.After(next) || p == next {
						next = p.Next()
					}
				}
				return n
			}
			require.Equal(t, 1, resends(h.drain()))
			afterResend := srSQ.Add(8) // the resend went ahead of the new packets
			// More packets go after the resend as the responder reports
			// the ones before them received.
			h.recv(srHoleReport(srSQ.Add(8), srSQ.Add(8)))
			require.Zero(t, resends(h.drain()))
			require.True(t, next.After(afterResend.Add(srReorder+2)), "sent after the resend: next %#x, after the resend %#x", next, afterResend)
			if tc.progress > 0 {
				h.recv(srHoleReport(afterResend.Add(tc.progress), afterResend.Add(tc.progress)))
				h.drain()
			}
			// The hole at PSN 0 is re-reported, well within an interval.
			h.recv(srHoleReport(srSQ, srSQ.Add(1)))
			got := resends(h.drain())
			if tc.want {
				require.Equal(t, 1, got, "the lost resend goes again")
				require.Equal(t, uint64(1), h.r.Counters().SRResendsLost)
			} else {
				require.Zero(t, got, "no evidence that the resend was lost")
				require.Zero(t, h.r.Counters().SRResendsLost)
			}
		})
	}
}

// A READ response missing at the oldest PSN holds no room in the peer's
// out-of-order buffer: the responses after it prove every request before
// them executed, so new READs go out past the span, within the window of
// responses in flight.
func TestSRReadHoleNeedsNoOOOSpan(t *testing.T) {
	const window = 8
	cfg := baseConfig(srPMTU, srSQ)
	cfg.SelectiveRepeat = true
	cfg.Window = window
	cfg.MaxRdAtomic = 64
	cfg.PeerOOOLimit = window * (srPMTU + packet.OOOSlotOverhead) // span = window
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
	for i := range 20 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*srPMTU), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*srPMTU), Length: srPMTU, LKey: lkeyA}}})
	}
	require.Len(t, h.drain(), window)
	// The response to the first READ is lost; the next seven arrive.
	for i := 1; i < window; i++ {
		h.recv(resp(packet.RCRDMAReadResponseOnly, srSQ.Add(i), packet.SyndromeACKUnlimited, uint32(i+1), make([]byte, srPMTU)))
	}
	news := 0
	for _, b := range h.drain() {
		if p := parse(t, b); !p.PSN().Before(srSQ.Add(window)) {
			news++
		}
	}
	require.Equal(t, window-1, news, "a new READ per response received, the hole at PSN 0 notwithstanding")
	require.Len(t, h.cq.wcs, 0, "completions wait for the oldest READ")
}

// The resends of a hole with packets sent after it wait until the
// responder reports received the packet srHoldPackets PSNs past the
// hole's start (a reordered packet fills its hole before that), not for a
// timer; a hole at the tail waits for the reorder window of time.
func TestSRHoldByPackets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		progress int // the progress report's PSN offset (0: none)
		want     int // PSN 0 resent
	}{
		{"released", srHoldPackets + 1, 1},
		{"too-soon", srHoldPackets, 0},
		{"no-evidence", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := srWriteSent(t)
			h.recv(srHoleReport(srSQ, srSQ.Add(1))) // PSN 0 missing, 1 held
			require.Empty(t, h.drain(), "held back: reordering by one is not loss")
			if tc.progress > 0 {
				h.recv(srHoleReport(srSQ.Add(tc.progress), srSQ.Add(tc.progress)))
			}
			require.Equal(t, tc.want, sentWithPSN(t, h.drain(), srSQ))
		})
	}
}

// Under selective repeat an RTT sample ends when the timed packet itself is
// known answered, not when the cumulative ACK passes it: a progress report
// past it (while a hole before it is repaired) ends the sample, and the
// repair's resend of an earlier PSN does not void it (Karn's rule concerns
// the timed packet only). A timed packet inside a reported hole gives no
// sample until it is answered. Under go-back-N the sample waits for the
// cumulative ACK.
func TestSRRTTSampleEndsOnOwnAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sr     bool
		inHole bool
	}{{"selective-repeat", true, false}, {"timed-in-hole", true, true}, {"go-back-n", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(srPMTU, srSQ)
			cfg.SelectiveRepeat = tc.sr
			cfg.Window = 16 // AckReq on every second packet (ackPerWindow)
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
			p := warm(t, h, srSQ)
			require.Equal(t, uint64(1), h.r.Counters().Recovery.RTTSamples)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 8 * srPMTU, LKey: lkeyA}}})
			var timed packet.PSN
			found := false
			for _, b := range h.drain() {
				if q := parse(t, b); q.BTH().AckReq() && !found {
					timed, found = q.PSN(), true
				}
			}
			require.True(t, found, "a packet asks for an ACK")
			require.True(t, timed.After(p), "the timed packet is not the first one")

			// 2·rttTest later: the first packet (or everything up to the
			// timed one) is reported missing, the rest held.
			h.now = h.now.Add(2 * rttTest)
			end := p.Add(1)
			if tc.inHole {
				end = timed.Next()
			}
			h.recv(srHoleReport(p, end))
			h.recv(srHoleReport(timed.Next(), timed.Next()))
			h.now = h.now.Add(rttTest)
			h.drain() // the hole's resends, after the reorder hold
			rc := h.r.Counters().Recovery
			switch {
			case !tc.sr:
				require.Equal(t, uint64(1), rc.RTTSamples, "go-back-N: no cumulative ACK yet")
				return
			case tc.inHole:
				require.Equal(t, uint64(1), rc.RTTSamples, "the timed packet was not received")
				return
			}
			require.Equal(t, uint64(2), rc.RTTSamples, "the progress report answered the timed packet")
			require.Zero(t, rc.KarnSkipped)
			require.Equal(t, rttTest+(2*rttTest-rttTest)/8, rc.SRTT, "SRTT = 7/8·rttTest + 1/8·2·rttTest")
		})
	}
}

// watchPkts is the size, in packets, of the READs of watchHarness.
const watchPkts = 4

// watchHarness returns a selective-repeat requester with an RTT sample
// (warm), a window of two READs of watchPkts packets, the PSN its next
// request takes, and a function that posts READ id (watchPkts packets of
// remote memory at rbase + (id-1) parts).
func watchHarness(t *testing.T) (*harness, packet.PSN, func(id uint64)) {
	cfg := baseConfig(srPMTU, srSQ)
	cfg.SelectiveRepeat = true
	cfg.Window = 2 * watchPkts
	cfg.MaxRdAtomic = 16
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, srSize, verbs.AccessLocalWrite, 1)
	p := warm(t, h, srSQ)
	read := func(id uint64) {
		off := (id - 1) % 4 * watchPkts * srPMTU
		h.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + off, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + off, Length: watchPkts * srPMTU, LKey: lkeyA}}})
	}
	return h, p, read
}

// A READ request lost on its way leaves the requester with nothing to hear
// when its responses fill the window: once the responses of the request
// before it have all come and an interval (srInterval) passes without one
// of its own, the part is re-read whole; a response in time, or an expiry
// handled late (this end was not running), re-reads nothing yet.
func TestSRLostReadRequest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered bool // READ 2's first response arrives within the interval
		late     bool // the expiry is handled late
		want     int  // re-reads of READ 2
	}{{"lost", false, false, 1}, {"answered", true, false, 0}, {"late-then-lost", false, true, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			const pkts = watchPkts
			h, p, read := watchHarness(t)
			read(1)
			read(2)
			require.Len(t, h.drain(), 2, "both READ requests")
			read2 := p.Add(pkts)
			h.now = h.now.Add(rttTest)
			for _, b := range readResp(srPMTU, p, make([]byte, pkts*srPMTU), 0, false) {
				h.recv(b)
			}
			require.Len(t, h.cq.wcs, 1, "READ 1 completed")
			require.Empty(t, h.drain())
			dl := h.r.Deadline()
			require.False(t, dl.IsZero())
			require.LessOrEqual(t, dl.Sub(h.now), h.r.srInterval(h.now), "watched for an interval, not the recovery floor")
			if tc.answered {
				h.recv(readResp(srPMTU, read2, make([]byte, pkts*srPMTU), 0, false)[0])
			}
			if tc.late {
				h.now = dl.Add(h.r.srInterval(h.now))
				h.r.OnTimeout(h.now)
				require.Empty(t, h.drain(), "a late expiry is timed again")
				dl = h.now.Add(h.r.srInterval(h.now))
			}
			h.now = dl
			h.r.OnTimeout(h.now)
			rereads := 0
			for _, b := range h.drain() {
				q := parse(t, b)
				require.Equal(t, packet.RCRDMAReadRequest, q.Opcode())
				require.Equal(t, read2, q.PSN())
				require.Equal(t, uint32(pkts*srPMTU), q.RETH().DMALen(), "the whole part")
				rereads++
			}
			require.Equal(t, tc.want, rereads)
			require.Equal(t, uint64(tc.want), h.r.Counters().SRReadRequestsLost)
			if tc.want == 0 {
				return
			}
			// The re-read is lost too: it is watched, and re-read again
			// after twice the interval.
			var got [][]byte
			for range 4 {
				h.now = h.r.Deadline()
				h.r.OnTimeout(h.now)
				if got = h.drain(); len(got) > 0 {
					break
				}
			}
			require.Len(t, got, 1)
			require.Equal(t, read2, parse(t, got[0]).PSN())
			require.Equal(t, uint64(2), h.r.Counters().SRReadRequestsLost)
			if !tc.late {
				require.Zero(t, h.r.Counters().Recovery.RTOExpiries, "found before the recovery timer")
			}
		})
	}
}

// A watch re-read answered sooner than a round trip answered the original
// request, which was only slow: the silence before it is learned, so the
// next watch waits at least that long, and the mistake is counted. A
// response that comes before the re-read left takes the re-read off the
// list. A READ sent after the last response is watched from when it
// leaves.
func TestSRLostReadRequestSlow(t *testing.T) {
	const pkts = watchPkts
	for _, tc := range []struct {
		name     string
		sentOut  bool // the re-read left before the response came
		wantSlow uint64
	}{{"answered-too-soon", true, 1}, {"before-the-reread-left", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h, p, read := watchHarness(t)
			read(1)
			read(2)
			require.Len(t, h.drain(), 2)
			h.now = h.now.Add(rttTest)
			for _, b := range readResp(srPMTU, p, make([]byte, pkts*srPMTU), 0, false) {
				h.recv(b)
			}
			quiet := h.now
			h.now = h.r.Deadline()
			h.r.OnTimeout(h.now)
			if tc.sentOut {
				require.Len(t, h.drain(), 1, "the watch re-reads READ 2")
			}
			h.now = h.now.Add(rttTest / 10)
			for _, b := range readResp(srPMTU, p.Add(pkts), make([]byte, pkts*srPMTU), 0, false) {
				h.recv(b)
			}
			require.Empty(t, h.drain(), "the re-read is not needed any more")
			c := h.r.Counters()
			require.Equal(t, uint64(1), c.SRReadRequestsLost)
			require.Equal(t, tc.wantSlow, c.SRReadRequestsSlow)
			require.Equal(t, []uint64{1, 2}, h.cq.ids())

			// READ 3 leaves after the last response: it is watched, for at
			// least the learned silence.
			read(3)
			require.Len(t, h.drain(), 1)
			want := h.r.srInterval(h.now)
			if tc.wantSlow > 0 {
				silence := h.now.Sub(quiet)
				require.Equal(t, silence, h.r.rec.timer.Learned(), "the silence is learned")
				want = max(want, silence)
			}
			require.Equal(t, h.now.Add(want), h.r.sr.watch.When())
		})
	}
}
