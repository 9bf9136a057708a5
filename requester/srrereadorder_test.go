package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// rereadsAt returns when the requester asked for READ response PSN psn
// with a READ request of its own (a re-read from it; the first request of
// a READ has its first PSN).
func (o *orderHarness) rereadsAt(psn packet.PSN) []time.Time {
	var at []time.Time
	for _, s := range o.sent {
		if s.p.Opcode() == packet.RCRDMAReadRequest && s.p.PSN() == psn {
			at = append(at, s.at)
		}
	}
	return at
}

// TestSRRereadLateAnswerCredit: READ 1 loses responses 3 and 9, each
// re-read alone; then the responder stalls, and the recovery timer's probe
// asks for 3, the oldest missing PSN, again. When the stall ends, the
// answers to the two re-reads come, 3's first, sooner than a round trip
// after the probe: 3's answers the first re-read, not the probe (RFC 8985
// 6.2, step 2), and proves nothing about 9's re-read, sent after the
// first re-read of 3, whose answer is right behind it. So 9 is asked for
// once. No RTT sample comes from either answer (Karn's rule: they answer
// PSNs sent more than once).
func TestSRRereadLateAnswerCredit(t *testing.T) {
	o := newOrderHarness(t, 2, rttTest)
	o.read(1)
	o.collect()
	o.now = o.now.Add(rttTest)
	a, c := o.first(1).Add(3), o.first(1).Add(9)
	o.answer(1, 3, 9)
	require.Len(t, o.rereadsAt(a), 1, "3 re-read")
	require.Len(t, o.rereadsAt(c), 1, "9 re-read")
	samples := o.r.rec.rtt.Stats().Samples
	srtt := o.r.rec.rtt.SRTT()

	// The stall: nothing comes until the probe has left.
	for len(o.rereadsAt(a)) < 2 {
		dl := o.r.Deadline()
		require.False(t, dl.IsZero(), "a timer runs")
		o.until(dl)
	}
	require.Equal(t, uint64(1), o.r.Counters().Recovery.TailProbes, "the probe asked for 3 again")
	probe := o.rereadsAt(a)[1]
	require.GreaterOrEqual(t, probe.Sub(o.rereadsAt(c)[0]), o.r.srInterval(o.now), "9's re-read is an interval old")
	o.now = o.now.Add(time.Microsecond)
	o.in(o.reread(1, 3, 4, 3))
	o.now = o.now.Add(time.Microsecond)
	o.in(o.reread(1, 9, 10, 9))
	require.Less(t, o.now.Sub(probe), o.r.rec.rtt.Stats().Min, "the answers came sooner than a round trip after the probe")
	require.Len(t, o.rereadsAt(c), 1, "9 asked for once")
	require.Equal(t, []uint64{1}, o.cq.ids())
	require.Equal(t, samples, o.r.rec.rtt.Stats().Samples, "no RTT sample from the answers of PSNs sent again")
	require.Equal(t, srtt, o.r.rec.rtt.SRTT())
}

// TestSRRereadAnswerNoRTTSample: READ 1 is the packet timed for the RTT;
// none of its responses comes, the lost-READ-request watch re-reads it
// whole, which voids the measurement (Karn's rule), and then its train
// comes, sooner than a round trip after the re-read (the original's
// answer: credited to no request) or later (credited to the re-read).
// Either way no RTT sample is taken from it: the sample ends only on a
// response as first sent.
func TestSRRereadAnswerNoRTTSample(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // from the re-read to the train
	}{
		{name: "sooner-than-a-round-trip", after: time.Microsecond},
		{name: "a-round-trip-later", after: 2 * rttTest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrderHarness(t, 2, rttTest)
			o.read(1)
			o.collect()
			require.True(t, o.r.rec.timing, "READ 1 timed")
			require.Equal(t, o.first(1), o.r.rec.timed)
			before := o.r.rec.rtt.Stats()
			for len(o.rereadsOf(1)) == 0 {
				dl := o.r.Deadline()
				require.False(t, dl.IsZero(), "a timer runs")
				o.until(dl)
			}
			require.False(t, o.r.rec.timing, "the re-read voided the measurement")
			o.now = o.now.Add(tc.after)
			o.answer(1)
			require.Equal(t, []uint64{1}, o.cq.ids())
			after := o.r.rec.rtt.Stats()
			require.Equal(t, before.Samples, after.Samples, "no RTT sample")
			require.Equal(t, before.Discarded+1, after.Discarded, "Karn's rule")
			require.Equal(t, before.SRTT, after.SRTT)
		})
	}
}
