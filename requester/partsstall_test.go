package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestPartsRewindNoStall: a READ asked in parts larger than the window
// (MaxReadPkts 8, Window 4) loses a response inside its first part; the
// responses after it are placed ahead (placePart), the re-read of the
// hole and every probe are lost, and the IB timer rewinds. With nothing
// outstanding readFits lets the oldest READ's rest go, and the QP
// completes or fails. It used to refuse it (responses placed ahead and the
// rest above min(Window, ...)): the head stayed unsent, the next expiry
// armed nothing, and the QP neither progressed nor failed.
func TestPartsRewindNoStall(t *testing.T) {
	const pmtu, size = 1024, 16 << 10
	p0 := packet.PSN(0x100)
	cfg := baseConfig(pmtu, p0)
	cfg.Window, cfg.MaxReadPkts = 4, 8
	h, f, src := withResponder(t, cfg, size, verbs.AccessRemoteRead, 3)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})

	out := h.drain()
	require.Len(t, out, 1, "the first part only: 8 packets fill more than the window")
	f.handle(out[0])
	resps := f.take()
	require.Len(t, resps, 8)
	for i, b := range resps {
		if i != 2 { // response p0+2 lost
			h.recv(b)
		}
	}
	require.Positive(t, h.r.sr.ngot, "responses placed past the hole")
	// The link now loses every request: the hole's re-read, the probes.
	for i := 0; i < 200 && h.r.Outstanding() > 0; i++ {
		if _, failed := h.r.Failed(); failed {
			break
		}
		for h.r.Pending() {
			h.next() // lost
		}
		d := h.r.Deadline()
		if d.IsZero() {
			break
		}
		h.now = d
		h.r.OnTimeout(h.now)
		if h.r.c.Timeouts > 0 {
			// From the first IB timeout on the link delivers again.
			for h.r.Pending() {
				b := h.next()
				f.handle(b)
				for _, o := range f.take() {
					h.recv(o)
				}
			}
		}
	}
	st, failed := h.r.Failed()
	t.Logf("outstanding %d failed %v %v timeouts %d deadline %v pending %v psn %x comp %x ngot %d",
		h.r.Outstanding(), failed, st, h.r.c.Timeouts, h.r.Deadline(), h.r.Pending(), uint32(h.r.psn), uint32(h.r.compPSN), h.r.sr.ngot)
	require.True(t, h.r.Outstanding() == 0 || failed, "the QP neither completes nor fails: no timer armed, nothing to send")
	if !failed {
		require.Equal(t, src.buf, h.mem[lkeyA].buf)
	}
	_ = time.Second
}
