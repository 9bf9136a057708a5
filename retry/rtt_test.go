package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRTTSamples(t *testing.T) {
	tests := []struct {
		name       string
		samples    []time.Duration
		srtt, rvar time.Duration
		rto        time.Duration
	}{
		{"none", nil, 0, 0, 0},
		{"first sets SRTT=R, RTTVAR=R/2", []time.Duration{100 * us}, 100 * us, 50 * us, 300 * us},
		// RTTVAR = 3/4·50 + 1/4·|100−200| = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5.
		{"second", []time.Duration{100 * us, 200 * us}, 112500, 62500, 112500 + 4*62500},
		{"steady", []time.Duration{100 * us, 100 * us, 100 * us, 100 * us}, 100 * us, 50 * us * 27 / 64, 100*us + 4*(50*us*27/64)},
		{"granularity floor on the variance term", []time.Duration{time.Microsecond}, time.Microsecond, 500, time.Microsecond + RTTGranularity},
		{"zero sample", []time.Duration{0}, 0, 0, RTTGranularity},
		{"negative counts as zero", []time.Duration{-time.Second}, 0, 0, RTTGranularity},
		{"clamped at an hour", []time.Duration{100 * time.Hour}, time.Hour, time.Hour / 2, 3 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r RTT
			for _, s := range tc.samples {
				r.Sample(s, false)
			}
			require.Equal(t, len(tc.samples) > 0, r.Valid())
			require.Equal(t, tc.srtt, r.SRTT())
			require.Equal(t, tc.rvar, r.RTTVar())
			require.Equal(t, tc.rto, r.RTO())
			require.Equal(t, uint64(len(tc.samples)), r.Stats().Samples)
		})
	}
}

// TestRTTKarn: samples from retransmitted packets change nothing.
func TestRTTKarn(t *testing.T) {
	var r RTT
	r.Sample(time.Second, true)
	require.False(t, r.Valid())
	r.Sample(50*us, false)
	r.Sample(10*time.Second, true)
	st := r.Stats()
	require.Equal(t, RTTStats{SRTT: 50 * us, RTTVar: 25 * us, Latest: 50 * us, Min: 50 * us, Samples: 1, Discarded: 2}, st)
	r.Reset()
	require.Equal(t, RTTStats{}, r.Stats())
}

func TestRecoveryTimer(t *testing.T) {
	var none RTT
	var r RTT
	r.Sample(100*us, false) // RTO 300 µs, 2·SRTT 200 µs
	var slow RTT
	slow.Sample(10*time.Millisecond, false) // RTO 30 ms

	tests := []struct {
		name    string
		timer   RecoveryTimer
		rtt     *RTT
		expired int
		want    time.Duration
	}{
		{"off without ceiling", RecoveryTimer{}, &r, 0, 0},
		{"ceiling before a sample", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &none, 0, 67 * time.Millisecond},
		{"floor", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &r, 0, DefaultRecoveryFloor},
		{"explicit floor", RecoveryTimer{Floor: 100 * us, Ceiling: 16 * time.Millisecond}, &r, 0, 300 * us},
		{"RTO above floor", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &slow, 0, 30 * time.Millisecond},
		{"never above the IB timeout", RecoveryTimer{Ceiling: 4 * time.Millisecond}, &slow, 0, 4 * time.Millisecond},
		{"floor above ceiling", RecoveryTimer{Floor: time.Second, Ceiling: 4 * time.Millisecond}, &r, 0, 4 * time.Millisecond},
		{"a 64th of a long IB timeout", RecoveryTimer{Ceiling: 4 * time.Second}, &slow, 0, time.Second / 16},
		{"one back-off doubles", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &r, 1, 2 * DefaultRecoveryFloor},
		{"three back-offs", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &r, 3, 8 * DefaultRecoveryFloor},
		{"back-off capped", RecoveryTimer{Ceiling: 67 * time.Millisecond}, &r, 40, 67 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := tc.timer
			for range tc.expired {
				tm.Expired()
			}
			require.Equal(t, tc.want, tm.Timeout(tc.rtt))
			require.Equal(t, uint64(tc.expired), tm.Expiries())
			tm.Progress()
			require.Zero(t, tm.Backoff())
		})
	}
}

func TestWindow(t *testing.T) {
	require.Equal(t, 1, new(Window).Size(), "zero value")
	w := NewWindow(WindowConfig{Max: 128})
	require.Equal(t, WindowConfig{Max: 128, Min: DefaultWindowMin, Initial: 128}, w.Config())
	require.Equal(t, 128, w.Size())

	require.True(t, w.OnLoss(at(0), 100*us))
	require.Equal(t, 64, w.Size())
	require.False(t, w.OnLoss(at(50*us), 100*us), "a second loss in the same round trip")
	require.Equal(t, 64, w.Size())
	require.True(t, w.OnLoss(at(100*us), 100*us))
	require.Equal(t, 32, w.Size())
	require.Equal(t, 48, w.Stats().Threshold)

	w.OnAck(10) // slow start below the threshold
	require.Equal(t, 42, w.Size())
	w.OnAck(100) // up to the threshold, not past it
	require.Equal(t, 48, w.Size())
	w.OnAck(47) // additive: a whole window before it grows
	require.Equal(t, 48, w.Size())
	w.OnAck(1)
	require.Equal(t, 54, w.Size())
	for range 1000 {
		w.OnAck(128)
	}
	require.Equal(t, 128, w.Size(), "never above Max")

	for i := range 20 {
		w.OnLoss(at(time.Duration(i+1)*time.Second), time.Millisecond)
	}
	require.Equal(t, DefaultWindowMin, w.Size(), "never below Min")
	st := w.Stats()
	require.Equal(t, uint64(22), st.Decreases)
	require.Equal(t, uint64(1), st.Ignored)

	tiny := NewWindow(WindowConfig{Max: 4, Min: 16, Initial: 100})
	require.Equal(t, WindowConfig{Max: 4, Min: 4, Initial: 4}, tiny.Config())
	tiny.OnLoss(at(0), 0)
	require.Equal(t, 4, tiny.Size())
}

func TestRecoveryAllocs(t *testing.T) {
	var r RTT
	tm := RecoveryTimer{Ceiling: time.Second}
	w := NewWindow(WindowConfig{Max: 128})
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(us)
		r.Sample(30*us, false)
		_ = tm.Timeout(&r)
		tm.Expired()
		tm.Progress()
		w.OnLoss(now, r.SRTT())
		w.OnAck(3)
	})
	require.Zero(t, allocs)
}

// FuzzRTT feeds random samples, flags and timer events, and checks the
// estimator's and the timer's invariants after each: SRTT between the
// smallest and largest sample taken, RTTVAR never negative nor above the
// largest sample, the timeout within [min(Floor, Ceiling), Ceiling], and
// Karn-refused samples leaving the estimate unchanged.
func FuzzRTT(f *testing.F) {
	f.Add(int64(0), int64(67_000_000), []byte{1, 2, 3, 0xFF, 0x80})
	f.Add(int64(1000), int64(4_000_000), []byte{0x10, 0x11, 0x90, 0x91, 0x40})
	f.Add(int64(-5), int64(1), []byte{0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, floor, ceiling int64, ops []byte) {
		var r RTT
		tm := RecoveryTimer{Floor: time.Duration(floor), Ceiling: time.Duration(ceiling)}
		var lo, hi time.Duration
		for i, op := range ops {
			d := time.Duration(op&0x3F) << (3 * int(op>>6&1) * (1 + i%4))
			switch {
			case op&0x80 != 0 && op&0x40 != 0:
				tm.Expired()
			case op&0x80 != 0:
				before := r.Stats()
				r.Sample(d, true)
				after := r.Stats()
				if after.SRTT != before.SRTT || after.RTTVar != before.RTTVar || after.Samples != before.Samples {
					t.Fatalf("a retransmitted sample changed the estimate: %+v → %+v", before, after)
				}
			default:
				if !r.Valid() {
					lo, hi = d, d
				}
				lo, hi = min(lo, d), max(hi, d)
				r.Sample(d, false)
				if r.SRTT() < lo || r.SRTT() > hi {
					t.Fatalf("SRTT %v outside the samples' range [%v, %v]", r.SRTT(), lo, hi)
				}
				if r.RTTVar() < 0 || r.RTTVar() > hi {
					t.Fatalf("RTTVAR %v outside [0, %v]", r.RTTVar(), hi)
				}
			}
			if op&7 == 5 {
				tm.Progress()
			}
			to := tm.Timeout(&r)
			switch {
			case tm.Ceiling <= 0:
				if to != 0 {
					t.Fatalf("timer off but timeout %v", to)
				}
			case to > tm.Ceiling:
				t.Fatalf("timeout %v above the ceiling %v", to, tm.Ceiling)
			case r.Valid() && to < min(max(tm.Floor, 1), tm.Ceiling) && tm.Floor > 0:
				t.Fatalf("timeout %v below the floor %v", to, tm.Floor)
			case to <= 0:
				t.Fatalf("timeout %v with ceiling %v", to, tm.Ceiling)
			}
		}
	})
}

// FuzzWindow drives losses and acknowledgements and checks that the window
// stays within [Min, Max], that a decrease never happens twice within one
// round trip, and that acknowledgements never shrink it.
func FuzzWindow(f *testing.F) {
	f.Add(128, 0, 0, []byte{0x81, 3, 0x82, 200, 0x80, 1})
	f.Add(1, 1, 1, []byte{0x80, 0x80, 0xFF})
	f.Add(-3, 500, 7, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, maxW, minW, initial int, ops []byte) {
		maxW, minW, initial = maxW%4096, minW%4096, initial%4096
		w := NewWindow(WindowConfig{Max: maxW, Min: minW, Initial: initial})
		cfg := w.Config()
		now := t0
		var lastDecrease time.Time
		const rtt = 100 * us
		for _, op := range ops {
			now = now.Add(time.Duration(op&0x3F) * 10 * us)
			before := w.Size()
			if op&0x80 != 0 {
				if w.OnLoss(now, rtt) {
					if !lastDecrease.IsZero() && now.Sub(lastDecrease) < rtt {
						t.Fatalf("two decreases %v apart, within one round trip", now.Sub(lastDecrease))
					}
					lastDecrease = now
				} else if w.Size() != before {
					t.Fatalf("an ignored loss changed the window %d → %d", before, w.Size())
				}
			} else {
				w.OnAck(int(op))
				if w.Size() < before {
					t.Fatalf("an acknowledgement shrank the window %d → %d", before, w.Size())
				}
			}
			if s := w.Size(); s < cfg.Min || s > cfg.Max {
				t.Fatalf("window %d outside [%d, %d]", s, cfg.Min, cfg.Max)
			}
		}
	})
}

// TestRTTLatestAndMin: Stats reports the last sample taken and the
// smallest, whatever order the samples come in; a Karn-refused sample is
// neither.
func TestRTTLatestAndMin(t *testing.T) {
	tests := []struct {
		name        string
		samples     []time.Duration
		latest, min time.Duration
	}{
		{"falling", []time.Duration{300 * us, 200 * us, 100 * us}, 100 * us, 100 * us},
		{"rising", []time.Duration{100 * us, 200 * us, 300 * us}, 300 * us, 100 * us},
		{"dip in the middle", []time.Duration{300 * us, 50 * us, 400 * us}, 400 * us, 50 * us},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r RTT
			for _, s := range tc.samples {
				r.Sample(s, false)
			}
			r.Sample(us, true) // retransmitted: not a sample
			st := r.Stats()
			require.Equal(t, tc.latest, st.Latest)
			require.Equal(t, tc.min, st.Min)
		})
	}
}

// TestWindowRules checks Window's rules one by one: Initial is kept
// within [Min, Max]; before any loss the window grows by slow start up to
// Max (RFC 5681 3.1: the initial threshold is as high as it goes); a loss
// forgets the PSNs acknowledged towards the next additive increase; a
// window smaller than 8 still grows by one per clean window; no or a
// negative count of PSNs changes nothing; Increases counts every growth
// and none at Max.
func TestWindowRules(t *testing.T) {
	t.Run("initial below min", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 128, Min: 32, Initial: 8})
		require.Equal(t, 32, w.Size())
		require.Equal(t, 32, w.Config().Initial)
	})
	t.Run("slow start to Max before any loss", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 128, Min: 8, Initial: 16})
		require.Equal(t, 128, w.Stats().Threshold)
		w.OnAck(16)
		require.Equal(t, 32, w.Size())
		w.OnAck(100)
		require.Equal(t, 128, w.Size())
		require.Equal(t, uint64(2), w.Stats().Increases)
	})
	t.Run("a loss forgets PSNs acknowledged towards an increase", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 128, Min: 8})
		require.True(t, w.OnLoss(at(0), us)) // 64, threshold 96
		w.OnAck(32)                          // slow start to 96
		require.Equal(t, 96, w.Size())
		w.OnAck(90) // 90 of 96 towards the next increase
		require.Equal(t, 96, w.Size())
		require.True(t, w.OnLoss(at(time.Second), us)) // 48, threshold 72
		w.OnAck(24)                                    // slow start to 72
		require.Equal(t, 72, w.Size())
		w.OnAck(71)
		require.Equal(t, 72, w.Size(), "71 of 72 acknowledged since the loss")
		w.OnAck(1)
		require.Equal(t, 81, w.Size())
	})
	t.Run("each additive increase takes a whole window", func(t *testing.T) {
		// Congestion avoidance grows the window once per window of
		// PSNs acknowledged (RFC 5681 3.1): the PSNs counted towards
		// one increase do not count towards the next.
		w := NewWindow(WindowConfig{Max: 128, Min: 8})
		require.True(t, w.OnLoss(at(0), us)) // 64, threshold 96
		w.OnAck(32)                          // slow start to 96
		w.OnAck(96)
		require.Equal(t, 108, w.Size())
		w.OnAck(107)
		require.Equal(t, 108, w.Size(), "107 of 108 acknowledged since the increase")
		w.OnAck(1)
		require.Equal(t, 121, w.Size())
	})
	t.Run("default Min", func(t *testing.T) {
		// 32 PSNs: a window halved below it idles the path between
		// random losses (docs/performance.md, DefaultWindowMin).
		w := NewWindow(WindowConfig{Max: 128})
		require.Equal(t, 32, w.Config().Min)
		for i := range 3 {
			w.OnLoss(at(time.Duration(i)*time.Second), 0)
		}
		require.Equal(t, 32, w.Size(), "128, 64, 32, then no lower")
	})
	t.Run("small windows grow by one", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 8, Min: 1})
		require.True(t, w.OnLoss(at(0), 0)) // 4, threshold 6
		w.OnAck(2)
		require.Equal(t, 6, w.Size())
		w.OnAck(6)
		require.Equal(t, 7, w.Size(), "an eighth of 6 rounds to 0, but the window grows by one")
	})
	t.Run("no PSNs", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 128})
		require.True(t, w.OnLoss(at(0), 0))
		before := w.Stats()
		w.OnAck(0)
		w.OnAck(-5)
		require.Equal(t, before, w.Stats())
	})
	t.Run("increases counted, none at Max", func(t *testing.T) {
		w := NewWindow(WindowConfig{Max: 128})
		w.OnAck(1000)
		require.Zero(t, w.Stats().Increases, "already at Max")
		require.True(t, w.OnLoss(at(0), 0)) // 64, threshold 96
		w.OnAck(10)
		w.OnAck(10)
		require.Equal(t, uint64(2), w.Stats().Increases, "slow start")
		w.OnAck(100) // to 96
		w.OnAck(96)  // 108
		require.Equal(t, 108, w.Size())
		require.Equal(t, uint64(4), w.Stats().Increases, "additive")
	})
}
