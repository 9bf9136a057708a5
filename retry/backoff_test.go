package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const us = time.Microsecond

// burst drives one burst into b: drops drops spread over [start, start+length)
// and the send that closes it at start+length. It returns start+length.
func burst(b *Backoff, start time.Time, length time.Duration, drops int) time.Time {
	for i := range drops {
		b.OnDrop(start.Add(length * time.Duration(i) / time.Duration(drops)))
	}
	end := start.Add(length)
	b.OnSent(end)
	return end
}

// goods sends n good packets one microsecond apart from now.
func goods(b *Backoff, now time.Time, n int) time.Time {
	for range n {
		now = now.Add(us)
		b.OnSent(now)
	}
	return now
}

func TestBackoffZeroValue(t *testing.T) {
	var b Backoff
	require.Equal(t, BackoffFloor, b.Delay())
	require.Equal(t, BackoffConfig{Initial: BackoffFloor, Max: DefaultBackoffMax}, b.Config())
	require.Equal(t, BackoffStats{Delay: BackoffFloor}, b.Stats())
}

func TestBackoffConfig(t *testing.T) {
	tests := []struct {
		name string
		in   BackoffConfig
		want BackoffConfig
	}{
		{"defaults", BackoffConfig{}, BackoffConfig{Initial: us, Max: time.Millisecond}},
		{"initial below floor", BackoffConfig{Initial: 500}, BackoffConfig{Initial: us, Max: time.Millisecond}},
		{"negative initial", BackoffConfig{Initial: -us}, BackoffConfig{Initial: us, Max: time.Millisecond}},
		{"initial kept", BackoffConfig{Initial: 50 * us}, BackoffConfig{Initial: 50 * us, Max: time.Millisecond}},
		{"initial above max", BackoffConfig{Initial: time.Second, Max: 200 * us}, BackoffConfig{Initial: 200 * us, Max: 200 * us}},
		{"max below floor", BackoffConfig{Max: 10}, BackoffConfig{Initial: us, Max: us}},
		{"negative max", BackoffConfig{Max: -time.Second}, BackoffConfig{Initial: us, Max: us}},
		{"max above limit", BackoffConfig{Max: time.Hour}, BackoffConfig{Initial: us, Max: time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(tc.in)
			require.Equal(t, tc.want, b.Config())
			require.Equal(t, tc.want.Initial, b.Delay())
		})
	}
}

// TestBackoffMean checks "half the mean burst delay over the bursts in the
// window" for windows that are not yet full.
func TestBackoffMean(t *testing.T) {
	tests := []struct {
		name    string
		lengths []time.Duration
		want    time.Duration
	}{
		{"one burst, the seed's ≈50 µs", []time.Duration{100 * us}, 50 * us},
		{"two", []time.Duration{100 * us, 200 * us}, 75 * us},
		{"three", []time.Duration{10 * us, 20 * us, 30 * us}, 10 * us},
		{"tiny burst hits the floor", []time.Duration{us}, us},
		{"zero-length burst hits the floor", []time.Duration{0}, us},
		{"sub-µs resolution kept", []time.Duration{3 * us}, 1500 * time.Nanosecond},
		{"long then short", []time.Duration{900 * us, 100 * us}, 250 * us},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(BackoffConfig{})
			now := t0
			var sum time.Duration
			for i, l := range tc.lengths {
				now = burst(b, now.Add(time.Millisecond), l, 1+i%3)
				sum += l
			}
			require.Equal(t, tc.want, b.Delay())
			st := b.Stats()
			require.Equal(t, uint64(len(tc.lengths)), st.Bursts)
			require.Equal(t, len(tc.lengths), st.Samples)
			require.Equal(t, sum/time.Duration(len(tc.lengths)), st.Mean)
			require.False(t, st.InBurst)
			require.Zero(t, st.Good)
		})
	}
}

// TestBackoffBurst checks what opens, continues and closes a burst, and that
// the burst length runs from the first drop to the closing send.
func TestBackoffBurst(t *testing.T) {
	b := NewBackoff(BackoffConfig{Initial: 20 * us})

	require.Equal(t, 20*us, b.OnDrop(at(0)), "OnDrop returns the delay to wait")
	require.True(t, b.Stats().InBurst)
	require.Equal(t, 20*us, b.OnDrop(at(20*us)), "delay is constant within a burst")
	require.Equal(t, 20*us, b.OnDrop(at(40*us)))
	require.Equal(t, 20*us, b.Delay())
	require.Zero(t, b.Stats().Bursts)

	b.OnSent(at(60 * us)) // closes: length 60 µs from the first drop
	st := b.Stats()
	require.Equal(t, BackoffStats{Drops: 3, Bursts: 1, Samples: 1, Mean: 60 * us, Delay: 30 * us}, st)

	b.OnSent(at(61 * us)) // a good packet, no burst open
	st = b.Stats()
	require.Equal(t, uint64(1), st.Good)
	require.Equal(t, 1, st.GoodRun)
	require.Equal(t, uint64(1), st.Bursts)
	require.Equal(t, 30*us, st.Delay)

	// The next drop opens a new burst at its own time.
	b.OnDrop(at(time.Second))
	require.Zero(t, b.Stats().GoodRun, "a drop ends the good run")
	b.OnSent(at(time.Second + 90*us))
	require.Equal(t, (60*us+90*us)/4, b.Delay())
}

// TestBackoffWindowSlides fills the 128-sample window and slides it.
func TestBackoffWindowSlides(t *testing.T) {
	b := NewBackoff(BackoffConfig{})
	now := t0
	for range BackoffWindow {
		now = burst(b, now.Add(time.Millisecond), 100*us, 2)
	}
	require.Equal(t, 50*us, b.Delay())
	require.Equal(t, BackoffWindow, b.Stats().Samples)

	tests := []struct {
		n    int
		want time.Duration
	}{
		{1, (127*100*us + 300*us) / 256},
		{63, 100 * us},  // 64 old + 64 new: mean 200 µs
		{64, 150 * us},  // all 128 are 300 µs
		{500, 150 * us}, // stays
	}
	for _, tc := range tests {
		for range tc.n {
			now = burst(b, now.Add(time.Millisecond), 300*us, 1)
		}
		require.Equal(t, tc.want, b.Delay(), "after %d more", tc.n)
		require.Equal(t, BackoffWindow, b.Stats().Samples)
	}
	// And back down as short bursts push the long ones out.
	for range BackoffWindow {
		now = burst(b, now.Add(time.Millisecond), 10*us, 1)
	}
	require.Equal(t, 5*us, b.Delay())
	require.Equal(t, 10*us, b.Stats().Mean)
}

// TestBackoffStepDown checks the step down after 512 consecutive good packets.
func TestBackoffStepDown(t *testing.T) {
	b := NewBackoff(BackoffConfig{})
	now := burst(b, t0, 100*us, 3)
	require.Equal(t, 50*us, b.Delay())

	now = goods(b, now, BackoffGoodRun-1)
	require.Equal(t, 50*us, b.Delay(), "511 good packets: no step yet")
	now = goods(b, now, 1)
	require.Equal(t, 49*us, b.Delay(), "the 512th steps down by 1 µs")
	require.Zero(t, b.Stats().GoodRun, "the run restarts")
	now = goods(b, now, 3*BackoffGoodRun)
	require.Equal(t, 46*us, b.Delay())
	require.Equal(t, uint64(4), b.Stats().StepDowns)
	require.Equal(t, uint64(4*BackoffGoodRun), b.Stats().Good)

	// A drop ends the run: 511 + drop + 511 does not step.
	now = goods(b, now, BackoffGoodRun-1)
	b.OnDrop(now)
	require.Equal(t, 46*us, b.Delay(), "the first retry after a quiet period uses the decayed delay")
	now = now.Add(100 * us)
	b.OnSent(now) // closes the burst: recomputed from the window, step undone
	require.Equal(t, 50*us, b.Delay())
	require.Zero(t, b.Stats().GoodRun, "the closing send is not a good packet")
	now = goods(b, now, BackoffGoodRun-1)
	require.Equal(t, 50*us, b.Delay())
	goods(b, now, 1)
	require.Equal(t, 49*us, b.Delay())
}

// TestBackoffFloor checks that stepping down never goes below 1 µs.
func TestBackoffFloor(t *testing.T) {
	b := NewBackoff(BackoffConfig{})
	now := burst(b, t0, 6*us+500, 1) // delay 3.25 µs
	require.Equal(t, 3*us+250, b.Delay())
	now = goods(b, now, 2*BackoffGoodRun)
	require.Equal(t, us+250, b.Delay())
	now = goods(b, now, BackoffGoodRun)
	require.Equal(t, us, b.Delay(), "a partial last step stops at the floor")
	goods(b, now, 10*BackoffGoodRun)
	require.Equal(t, us, b.Delay())
	require.Equal(t, uint64(3), b.Stats().StepDowns, "no steps counted at the floor")

	var z Backoff
	goods(&z, t0, 10*BackoffGoodRun)
	require.Equal(t, us, z.Delay())
}

// TestBackoffCap checks the cap and the 2×Max clamp on single samples.
func TestBackoffCap(t *testing.T) {
	b := NewBackoff(BackoffConfig{Max: 200 * us})
	now := burst(b, t0, 10*time.Second, 5) // a pathological burst
	require.Equal(t, 200*us, b.Delay())
	require.Equal(t, 400*us, b.Stats().Mean, "the sample is clamped to 2×Max")
	now = burst(b, now, 100*us, 1)
	require.Equal(t, (400*us+100*us)/4, b.Delay(), "one bad burst does not pin the delay at the cap")

	// Sustained long bursts sit at the cap, never above.
	for range 3 * BackoffWindow {
		now = burst(b, now.Add(time.Second), time.Second, 2)
		require.LessOrEqual(t, b.Delay(), 200*us)
	}
	require.Equal(t, 200*us, b.Delay())

	// Default cap.
	var z Backoff
	burst(&z, t0, time.Hour, 1)
	require.Equal(t, DefaultBackoffMax, z.Delay())
}

func TestBackoffTimeBackwards(t *testing.T) {
	b := NewBackoff(BackoffConfig{Initial: 40 * us})
	b.OnDrop(at(time.Second))
	b.OnSent(at(0)) // the clock went backwards: a zero-length burst
	require.Equal(t, us, b.Delay())
	require.Zero(t, b.Stats().Mean)
}

func TestBackoffReset(t *testing.T) {
	cfg := BackoffConfig{Initial: 7 * us, Max: 300 * us}
	b := NewBackoff(cfg)
	now := burst(b, t0, 200*us, 2)
	goods(b, now, 10)
	b.OnDrop(now.Add(time.Millisecond))
	require.NotEqual(t, 7*us, b.Delay())

	b.Reset()
	require.Equal(t, cfg, b.Config())
	require.Equal(t, BackoffStats{Delay: 7 * us}, b.Stats())

	// Init on an embedded value.
	var s struct{ bo Backoff }
	s.bo.Init(cfg)
	require.Equal(t, cfg, s.bo.Config())
	require.Equal(t, 7*us, s.bo.Delay())
}

func TestBackoffAllocs(t *testing.T) {
	b := NewBackoff(BackoffConfig{})
	now := t0
	var d Deadline
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(us)
		d.Arm(now.Add(b.OnDrop(now)))
		now = now.Add(b.Delay())
		b.OnSent(now)
		b.OnSent(now.Add(us))
		_ = b.Delay()
	})
	require.Zero(t, allocs)

	var z Backoff // the zero value sets itself up without allocating
	allocs = testing.AllocsPerRun(100, func() {
		z.OnDrop(now)
		z.OnSent(now)
		_ = z.Delay()
		_ = z.Stats()
	})
	require.Zero(t, allocs)
}

// checkBackoff verifies the estimator's invariants. It runs after every op
// of the fuzz target, so it avoids testify in the per-sample loop, and
// t.Helper, whose stack walk cost as much as the checks: its messages say
// what failed without the caller's line.
func checkBackoff(t *testing.T, b *Backoff) {
	cfg := b.Config()
	if d := b.Delay(); d < BackoffFloor || d > cfg.Max {
		t.Fatalf("delay %v outside [%v, %v]", d, BackoffFloor, cfg.Max)
	}
	if b.n < 0 || b.n > BackoffWindow || b.goodRun < 0 || b.goodRun >= BackoffGoodRun {
		t.Fatalf("n=%d goodRun=%d", b.n, b.goodRun)
	}
	var sum time.Duration
	for i := range b.n {
		// The n samples held end just before next, in ring order.
		s := b.samples[(b.next-1-i+2*BackoffWindow)%BackoffWindow]
		if s < 0 || s > 2*cfg.Max {
			t.Fatalf("sample %v outside [0, 2×%v]", s, cfg.Max)
		}
		sum += s
	}
	if sum != b.sum {
		t.Fatalf("running sum %v, samples add up to %v", b.sum, sum)
	}
}

// fuzzBackoffOps bounds the ops FuzzBackoff runs of one input: 16 times
// the ops that fill the window with bursts and complete a good run, enough
// to reach every fill of the window and of the good-run count, where an
// input the fuzzer grew to a megabyte took over half a second.
const fuzzBackoffOps = 16 * (2*BackoffWindow + BackoffGoodRun)

// FuzzBackoff drives random sequences of drops and sends with increasing
// time. Each op byte: bit 0 drop (1) or send (0); bits 1..7 pick the time
// step, (v%16) << (4*(v/16)) ns, from 0 up to about 4 s. Ops past
// fuzzBackoffOps are ignored.
func FuzzBackoff(f *testing.F) {
	f.Add(int64(0), int64(0), []byte{1, 0, 0, 0})
	f.Add(int64(50_000), int64(200_000), []byte{1, 1, 1, 0xF0, 0, 0xFE, 0xFF, 0xFE})
	f.Add(int64(-1), int64(1), []byte{0xFF, 0xFE, 0x81, 0x80})
	f.Add(int64(1<<62), int64(1<<62), []byte{0x01, 0xFE, 0x00})
	long := make([]byte, 4096)
	for i := range long {
		long[i] = byte(i*37) &^ 1
		if i%700 == 0 {
			long[i] |= 1
		}
	}
	f.Add(int64(0), int64(0), long)

	f.Fuzz(func(t *testing.T, initial, maxDelay int64, ops []byte) {
		ops = ops[:min(len(ops), fuzzBackoffOps)]
		b := NewBackoff(BackoffConfig{Initial: time.Duration(initial), Max: time.Duration(maxDelay)})
		checkBackoff(t, b)
		now := t0
		var drops, bursts, good uint64
		inBurst := false
		for _, op := range ops {
			v := op >> 1
			now = now.Add(time.Duration(v%16) << (4 * (v / 16)))
			if op&1 == 1 {
				if d := b.OnDrop(now); d != b.Delay() {
					t.Fatalf("OnDrop returned %v, Delay %v", d, b.Delay())
				}
				drops++
				inBurst = true
			} else {
				b.OnSent(now)
				if inBurst {
					bursts++
				} else {
					good++
				}
				inBurst = false
			}
			checkBackoff(t, b)
		}
		st := b.Stats()
		require.Equal(t, drops, st.Drops)
		require.Equal(t, bursts, st.Bursts)
		require.Equal(t, good, st.Good)
		require.Equal(t, inBurst, st.InBurst)
		require.Equal(t, min(int(bursts), BackoffWindow), st.Samples)
	})
}

func BenchmarkBackoff(b *testing.B) {
	bo := NewBackoff(BackoffConfig{})
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(us)
		if i%64 == 0 {
			bo.OnDrop(now)
		} else {
			bo.OnSent(now)
		}
	}
}

// TestBackoffReadRetryDelayNumbers: the estimator's numbers are
// read_retry_delay()'s, written out here rather than through the
// constants: a step of 1 µs after 512 good packets, the mean over the
// last 128 bursts.
func TestBackoffReadRetryDelayNumbers(t *testing.T) {
	b := NewBackoff(BackoffConfig{})
	now := burst(b, t0, 100*us, 1)
	require.Equal(t, 50*us, b.Delay())
	now = goods(b, now, 511)
	require.Equal(t, 50*us, b.Delay(), "511 good packets")
	now = goods(b, now, 1)
	require.Equal(t, 49*us, b.Delay(), "the 512th")

	// 128 bursts of 300 µs push the 100 µs one out of the window.
	for range 127 {
		now = burst(b, now.Add(time.Millisecond), 300*us, 1)
	}
	require.Equal(t, (100*us+127*300*us)/256, b.Delay(), "128 bursts in the window")
	burst(b, now.Add(time.Millisecond), 300*us, 1)
	require.Equal(t, 150*us, b.Delay(), "the first burst has left the window")
}
