package requester

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// timedPkt is a packet on the simulated link and when it arrives.
type timedPkt struct {
	at time.Time
	b  []byte
}

// rxe61Link simulates READs against a responder that behaves like kernel
// rxe 6.1 on re-reads: it sends its responses as one serial stream at a
// fixed packet rate, so a re-read is served only after every response
// already queued (the current READ's stream and the ones behind it), and
// it answers a re-read with everything from the requested PSN to the end
// of that READ. Both directions lose packets at random.
type rxe61Link struct {
	h        *harness
	f        *fakeResponder
	rng      *rand.Rand
	loss     float64
	delay    time.Duration // one-way delay
	perPkt   time.Duration // the responder's serialization time per response
	toResp   []timedPkt
	toReq    []timedPkt
	stream   [][]byte // the responder's queued responses, in order
	nextEmit time.Time
	emitted  int // responses the responder sent
	lost     int // packets the link dropped, both ways
}

func (l *rxe61Link) drop() bool {
	if l.rng.Float64() < l.loss {
		l.lost++
		return true
	}
	return false
}

// run drives the link until the requester has no WQE outstanding or the
// virtual time limit passes.
func (l *rxe61Link) run(t *testing.T, limit time.Duration) {
	h := l.h
	end := h.now.Add(limit)
	for h.r.Outstanding() > 0 && h.now.Before(end) {
		if _, failed := h.r.Failed(); failed {
			return
		}
		for h.r.Pending() {
			b := h.next()
			if !l.drop() {
				l.toResp = append(l.toResp, timedPkt{h.now.Add(l.delay), b})
			}
		}
		next := h.r.Deadline()
		earlier := func(t time.Time) {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if len(l.toResp) > 0 {
			earlier(l.toResp[0].at)
		}
		if len(l.toReq) > 0 {
			earlier(l.toReq[0].at)
		}
		if len(l.stream) > 0 {
			earlier(l.nextEmit)
		}
		require.False(t, next.IsZero(), "the simulation stalled")
		if next.After(h.now) {
			h.now = next
		}
		for len(l.toResp) > 0 && !l.toResp[0].at.After(h.now) {
			l.f.handle(l.toResp[0].b)
			l.toResp = l.toResp[1:]
			l.stream = append(l.stream, l.f.take()...)
		}
		if len(l.stream) > 0 && !l.nextEmit.After(h.now) {
			l.emitted++
			if !l.drop() {
				l.toReq = append(l.toReq, timedPkt{h.now.Add(l.delay), l.stream[0]})
			}
			l.stream = l.stream[1:]
			l.nextEmit = h.now.Add(l.perPkt)
		}
		for len(l.toReq) > 0 && !l.toReq[0].at.After(h.now) {
			h.recv(l.toReq[0].b)
			l.toReq = l.toReq[1:]
		}
		if d := h.r.Deadline(); !d.IsZero() && !h.now.Before(d) {
			h.r.OnTimeout(h.now)
		}
	}
}

// TestReadAgainstRxe61Lossy: 32 READs of 64 KiB against the rxe 6.1
// model over a lossy link complete, byte-exact, without RETRY_EXC_ERR and
// with a bounded number of responses sent again: the requester does not
// re-request what is already on its way, so the responder sends at most
// a small multiple of what was lost on top of what was needed.
func TestReadAgainstRxe61Lossy(t *testing.T) {
	const pmtu, n, size = 1024, 32, 64 << 10
	for _, tc := range []struct {
		loss  float64
		parts int // Config.MaxReadPkts
		seeds []uint64
	}{{0.01, 0, []uint64{1, 2, 3}}, {0.05, 0, []uint64{1, 2}}, {0.01, 24, []uint64{1, 2}}, {0.05, 24, []uint64{1}}} {
		for _, seed := range tc.seeds {
			t.Run(fmt.Sprintf("loss%v/parts%d/seed%d", tc.loss, tc.parts, seed), func(t *testing.T) {
				cfg := baseConfig(pmtu, 0x300)
				cfg.Timeout, cfg.RetryCnt = 14, 7
				cfg.MaxReadPkts = tc.parts
				h := newHarness(t, cfg)
				h.mem.add(lkeyA, baseA, n*size, verbs.AccessLocalWrite, 0)
				f := newResponder(t, pmtu, 0x300)
				src := f.mem.add(rkey, rbase, n*size, verbs.AccessRemoteRead, 9)
				for i := range n {
					h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
						RemoteAddr: rbase + uint64(i*size), RKey: rkey,
						SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
				}
				l := &rxe61Link{h: h, f: f, rng: rand.New(rand.NewPCG(seed, 61)), loss: tc.loss,
					delay: 20 * time.Microsecond, perPkt: 2 * time.Microsecond}
				start := h.now
				l.run(t, 10*time.Second)
				_, failed := h.r.Failed()
				require.False(t, failed, "RETRY_EXC_ERR against a peer that kept answering")
				require.Len(t, h.cq.ids(), n)
				for _, wc := range h.cq.wcs {
					require.Equal(t, verbs.WCSuccess, wc.Status)
				}
				require.Equal(t, src.buf, h.mem[lkeyA].buf, "data differs")
				needed := n * size / pmtu
				c := h.r.Counters()
				t.Logf("%v virtual, %d responses for %d needed, %d lost; timeouts %d, rto %d, probes %d, retries %d",
					h.now.Sub(start), l.emitted, needed, l.lost, c.Timeouts, c.Recovery.RTOExpiries,
					c.Recovery.TailProbes, c.CompleterRetryErr)
				require.LessOrEqual(t, l.emitted-needed, readPerHole*l.lost, "responses sent again")
			})
		}
	}
}

// readPerHole bounds the responses sent again per lost packet: at most
// one READ's stream (64 packets of a 64 KiB READ at PMTU 1024).
const readPerHole = 64
