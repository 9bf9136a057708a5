package requester

import (
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// hasMono reports whether t carries a monotonic clock reading: time.Time's
// String ends in "m=±<seconds>" exactly then (package time, "Monotonic
// Clocks").
func hasMono(t time.Time) bool { return strings.Contains(t.String(), " m=") }

// TestSRDeadlinesKeepMonotonicClock drives selective repeat with times that
// carry a monotonic clock reading, as time.Now gives them, through a lost
// packet whose resend is lost too (srRecheck's case), and checks that every
// deadline the requester reports keeps that reading. A deadline without it
// (time.Unix of a stored UnixNano) is compared with now, and turned into a
// timer by time.Until, on the wall clock: a wall-clock step (NTP, a VM
// resumed, date -s) of an hour back makes the resend check fire an hour
// late, a step forward makes it fire at once, and the resend times
// compared as UnixNano (srMark, srLost, srDetect, srWatchAnswered) misjudge
// which resend is older and how long ago it went.
func TestSRDeadlinesKeepMonotonicClock(t *testing.T) {
	const pmtu, size, n = 1024, 64 << 10, 8
	cfg := baseConfig(pmtu, 0x10)
	cfg.SelectiveRepeat = true
	cfg.MaxWR = n
	h := newHarness(t, cfg)
	h.now = time.Now() // with a monotonic reading
	require.True(t, hasMono(h.now))
	h.mem.add(lkeyA, baseA, n*size, verbs.AccessLocalWrite, 1)
	e := newEngineResponder(h, pmtu, 0x10, size, n)
	e.mem.add(rkey, rbase, n*size, verbs.AccessRemoteWrite, 7)
	l := newSRLink(h, e)
	l.delay = 200 * time.Microsecond
	target := packet.PSN(0x10).Add(150)
	l.dropReq = func(p packet.Packet, nth int) bool { return p.PSN() == target && nth <= 2 }
	for i := range n {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			RemoteAddr: rbase + uint64(i*size), RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
	}
	rechecked := false
	for step := 0; h.r.Outstanding() > 0 && step < 200_000; step++ {
		l.run(time.Nanosecond) // one step of the link
		if h.r.sr.recheck.Armed() {
			rechecked = true
			require.True(t, hasMono(h.r.sr.recheck.When()), "resend check deadline %v has no monotonic reading", h.r.sr.recheck.When())
		}
		if d := h.r.Deadline(); !d.IsZero() {
			require.True(t, hasMono(d), "deadline %v has no monotonic reading", d)
		}
		require.True(t, hasMono(h.now), "the link's clock lost its monotonic reading")
	}
	requireClean(t, h, n)
	require.True(t, rechecked, "the resend check ran")
}
