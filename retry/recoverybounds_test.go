package retry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecoveryTimerHugeCeiling: the back-off doubles the timeout up to
// Ceiling; with a Ceiling above half the largest Duration (math.MaxInt64,
// the natural "no ceiling") the doubling overflowed to a negative timeout,
// which the requester takes for "timer off" and never arms.
func TestRecoveryTimerHugeCeiling(t *testing.T) {
	for _, tc := range []struct {
		name           string
		floor, ceiling time.Duration
		sample         time.Duration
		expiries       int
	}{
		{"MaxInt64 ceiling, 16 expiries", 0, math.MaxInt64, time.Hour, 16},
		{"MaxInt64 ceiling, floor past half", 5e18, math.MaxInt64, time.Millisecond, 1},
		{"ceiling just above half", 0, math.MaxInt64/2 + 1, time.Hour, 16},
		{"timeout 31", 0, AckTimeout(31), time.Hour, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r RTT
			r.Sample(tc.sample, false)
			tm := RecoveryTimer{Floor: tc.floor, Ceiling: tc.ceiling}
			for range tc.expiries {
				tm.Expired()
			}
			for _, d := range []time.Duration{tm.Timeout(&r), tm.RetryTimeout(&r)} {
				require.Positive(t, d)
				require.LessOrEqual(t, d, tc.ceiling)
			}
		})
	}
}

// FuzzRecoveryTimerBounds: for every Ceiling > 0, every Floor, any samples
// and any number of expiries, Timeout and RetryTimeout are in (0, Ceiling],
// and never shrink with one more expiry.
func FuzzRecoveryTimerBounds(f *testing.F) {
	f.Add(int64(0), int64(math.MaxInt64), int64(time.Hour), uint8(16))
	f.Add(int64(5e18), int64(math.MaxInt64), int64(time.Millisecond), uint8(1))
	f.Add(int64(0), int64(AckTimeout(14)), int64(100*time.Microsecond), uint8(3))
	f.Add(int64(time.Hour), int64(time.Millisecond), int64(time.Microsecond), uint8(0)) // a floor above the ceiling
	f.Fuzz(func(t *testing.T, floor, ceiling, sample int64, expiries uint8) {
		if ceiling <= 0 {
			return
		}
		var r RTT
		r.Sample(time.Duration(sample), false)
		tm := RecoveryTimer{Floor: time.Duration(floor), Ceiling: time.Duration(ceiling)}
		var prev, prevRetry time.Duration
		for i := 0; i <= int(expiries%24); i++ {
			if i > 0 {
				tm.Expired()
			}
			to, rto := tm.Timeout(&r), tm.RetryTimeout(&r)
			for _, d := range []time.Duration{to, rto} {
				if d <= 0 || d > tm.Ceiling {
					t.Fatalf("timeout %v outside (0, %v] after %d expiries", d, tm.Ceiling, i)
				}
			}
			if to < prev || rto < prevRetry {
				t.Fatalf("an expiry shortened the timeout: %v → %v, %v → %v", prev, to, prevRetry, rto)
			}
			prev, prevRetry = to, rto
		}
	})
}

// TestRecoveryTimerOnExpiryAfter: lateness is judged against the timeout
// the timer was armed with; OnExpiry is OnExpiryAfter(Timeout).
func TestRecoveryTimerOnExpiryAfter(t *testing.T) {
	var r RTT
	r.Sample(300*us, false) // RTO 900 µs, RetryTimeout 900 µs, Timeout 2 ms
	due := at(10 * time.Millisecond)
	tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	armed := tm.RetryTimeout(&r)
	require.Equal(t, 900*us, armed)
	require.True(t, tm.OnExpiryAfter(armed, due, due.Add(armed/4)), "a quarter late: silence")
	require.False(t, tm.OnExpiryAfter(armed, due, due.Add(armed/4+us)), "more: this end was not running")
	tm = RecoveryTimer{Ceiling: 67 * time.Millisecond}
	require.Equal(t, tm.OnExpiryAfter(tm.Timeout(&r), due, due.Add(400*us)), tm.OnExpiry(&r, due, due.Add(400*us)))
}

// TestRecoveryTimerBackoffReachesCeiling: each expiry without progress
// doubles the timeout (RFC 6298 5.5) until it reaches Ceiling, however
// long Ceiling is, and later expiries keep it there (RFC 6298 2.5 allows
// a maximum, and the IB timeout is ours). With IB timeout 31 (about
// 8796 s) the go-back-N timeout starts from RetryFloor, 250 µs, and needs
// 26 doublings to get there.
func TestRecoveryTimerBackoffReachesCeiling(t *testing.T) {
	var r RTT
	r.Sample(40*us, false) // RTO 120 µs: RetryTimeout is RetryFloor
	tm := RecoveryTimer{Ceiling: AckTimeout(31)}
	require.Equal(t, RetryFloor, tm.RetryTimeout(&r))
	for k := 1; k <= 300; k++ {
		tm.Expired()
		want := tm.Ceiling
		if k < 26 {
			want = RetryFloor << k
		}
		require.Equal(t, want, tm.RetryTimeout(&r), "after %d expiries", k)
		want = tm.Ceiling // Timeout's floor is Ceiling/64: 6 doublings
		if k < 6 {
			want = tm.Ceiling / 64 << k
		}
		require.Equal(t, want, tm.Timeout(&r), "after %d expiries", k)
	}
	require.Equal(t, uint64(300), tm.Expiries())
	require.Equal(t, maxRecoveryBackoff, tm.Backoff(), "the count of doublings stops, it does not wrap")
}
