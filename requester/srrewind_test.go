package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRRewindReadAskedAtItsPSN: selective repeat. READ R0 (1 packet, PSN
// p), READ R1 (4 packets, p+1..p+4), SEND S2 (p+5). The responder executes
// R0 and R1 and answers S2 with an RNR NAK. R0's response is lost, R1's
// first two are delayed and its last two lost; the RNR NAK, past R0, is an
// implied NAK and the cursor rewinds (R1's cursors reset). R0 goes again;
// R1's two delayed responses then arrive and are placed in order, raising
// R1's received bytes although R1 was not asked again in this round. A
// READ asked again at a PSN asks from the byte that PSN carries
// (readChunk), so R1 goes at p+1 for its whole length and S2 at p+5. It
// used to go at p+1 for VA+2048, 2 packets, and S2 at p+3: the responder
// took p+3 for a duplicate, ACKed it, and S2 completed with SUCCESS
// although the responder never executed it.
func TestSRRewindReadAskedAtItsPSN(t *testing.T) {
	p := packet.PSN(0x100)
	cfg := baseConfig(1024, p)
	cfg.SelectiveRepeat = true
	h, f, src := withResponder(t, cfg, 64<<10, verbs.AccessRemoteRead, 1)
	f.sr.on = true
	f.rq = 0
	h.post(&verbs.SendWR{ID: 0, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase + 4096, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 4096, Length: 4096, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA + 16384, Length: 100, LKey: lkeyA}}})
	reqs := h.drain()
	require.Len(t, reqs, 3)
	for _, b := range reqs {
		f.handle(b)
	}
	resps := f.take()
	require.Len(t, resps, 6) // R0 ONLY, R1 FIRST, MIDDLE, MIDDLE, LAST, RNR NAK
	require.Equal(t, packet.RCAcknowledge, parse(t, resps[5]).Opcode())
	h.now = h.now.Add(50e3)
	h.recv(resps[5]) // resps[0] lost, resps[1:3] delayed, resps[3:5] lost

	f.rq = -1 // the responder has receive WQEs now
	b := h.next()
	require.NotNil(t, b)
	require.Equal(t, p, parse(t, b).PSN(), "R0 again")
	f.handle(b)
	held := f.take() // R0's replayed response, delivered later
	h.now = h.now.Add(1e3)
	h.recv(resps[1]) // R1's delayed responses
	h.recv(resps[2])
	for i := 0; i < 2; i++ { // the cursor asks for R1 again and sends S2
		b := h.next()
		require.NotNil(t, b)
		q := parse(t, b)
		if q.Opcode() == packet.RCRDMAReadRequest {
			t.Logf("R1 asked again at %#x: VA %#x (R1 VA %#x) len %d", uint32(q.PSN()), q.RETH().VA(), rbase+4096, q.RETH().DMALen())
		} else {
			t.Logf("%v sent at %#x (first sent at %#x)", q.Opcode(), uint32(q.PSN()), uint32(p.Add(5)))
		}
		f.handle(b)
	}
	for _, o := range held {
		h.recv(o)
	}

	for i := 0; i < 1000 && h.r.Outstanding() > 0; i++ {
		if _, failed := h.r.Failed(); failed {
			break
		}
		if b := h.next(); b != nil {
			q := parse(t, b)
			if q.Opcode() == packet.RCRDMAReadRequest && q.PSN() == p.Add(1) {
				t.Logf("R1 asked again at %#x: VA %#x len %d", uint32(q.PSN()), q.RETH().VA(), q.RETH().DMALen())
			}
			if q.Opcode() == packet.RCSendOnly {
				t.Logf("S2 sent at %#x (first sent at %#x)", uint32(q.PSN()), uint32(p.Add(5)))
			}
			f.handle(b)
		}
		out := f.take()
		for _, o := range out {
			h.recv(o)
		}
		if len(out) == 0 && !h.r.Pending() {
			d := h.r.Deadline()
			if d.IsZero() {
				break
			}
			h.now = d
			h.r.OnTimeout(h.now)
		}
	}
	st, failed := h.r.Failed()
	t.Logf("completions %v failed %v %v; responder messages %d", h.cq.ids(), failed, st, len(f.msgs))
	for _, wc := range h.cq.wcs {
		if wc.ID == 2 && wc.Status == verbs.WCSuccess {
			require.Len(t, f.msgs, 1, "S2 completed with SUCCESS but the responder never received it")
		}
	}
	require.False(t, failed, "%v", st)
	require.Equal(t, src.buf[4096:8192], h.mem[lkeyA].buf[4096:8192], "R1 data")
}
