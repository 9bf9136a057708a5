package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDeadline(t *testing.T) {
	var d Deadline
	require.False(t, d.Armed())
	require.True(t, d.When().IsZero())
	require.False(t, d.Expired(at(time.Hour)), "a stopped deadline never expires")

	d.Arm(at(10 * time.Millisecond))
	require.True(t, d.Armed())
	require.Equal(t, at(10*time.Millisecond), d.When())

	tests := []struct {
		now  time.Duration
		want bool
	}{
		{0, false},
		{10*time.Millisecond - 1, false},
		{10 * time.Millisecond, true}, // due exactly at the deadline
		{time.Hour, true},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, d.Expired(at(tc.now)), "now=%v", tc.now)
	}
	require.True(t, d.Armed(), "Expired does not disarm")

	d.Arm(at(20 * time.Millisecond)) // re-arm replaces
	require.False(t, d.Expired(at(15*time.Millisecond)))
	d.Arm(at(5 * time.Millisecond)) // earlier too
	require.True(t, d.Expired(at(5*time.Millisecond)))

	d.Stop()
	require.False(t, d.Armed())
	require.False(t, d.Expired(at(time.Hour)))

	d.Arm(at(time.Second))
	d.Arm(time.Time{}) // arming at the zero time stops
	require.False(t, d.Armed())
}

func TestDeadlineArmIfStopped(t *testing.T) {
	var d Deadline
	require.True(t, d.ArmIfStopped(at(time.Millisecond)))
	require.False(t, d.ArmIfStopped(at(2*time.Millisecond)), "pending: not pushed back")
	require.Equal(t, at(time.Millisecond), d.When())
	d.Stop()
	require.False(t, d.ArmIfStopped(time.Time{}))
	require.False(t, d.Armed())
	require.True(t, d.ArmIfStopped(at(3*time.Millisecond)))
	require.Equal(t, at(3*time.Millisecond), d.When())
}

func TestEarliest(t *testing.T) {
	var z time.Time
	tests := []struct {
		name string
		in   []time.Time
		want time.Time
	}{
		{"none", nil, z},
		{"all zero", []time.Time{z, z}, z},
		{"one", []time.Time{at(1)}, at(1)},
		{"zero ignored first", []time.Time{z, at(5), at(3)}, at(3)},
		{"zero ignored last", []time.Time{at(5), at(3), z}, at(3)},
		{"equal", []time.Time{at(4), at(4)}, at(4)},
		{"before t0", []time.Time{at(time.Second), at(-time.Second)}, at(-time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, tc.want.Equal(Earliest(tc.in...)), "got %v", Earliest(tc.in...))
		})
	}

	var a, b, c Deadline
	b.Arm(at(7))
	c.Arm(at(2))
	require.Equal(t, at(2), Earliest(a.When(), b.When(), c.When()))
	c.Stop()
	require.Equal(t, at(7), Earliest(a.When(), b.When(), c.When()))
}

func TestDeadlineAllocs(t *testing.T) {
	var a, b Deadline
	now := t0
	allocs := testing.AllocsPerRun(100, func() {
		now = now.Add(time.Microsecond)
		a.Arm(now.Add(time.Millisecond))
		b.ArmIfStopped(now.Add(time.Second))
		_ = Earliest(a.When(), b.When(), time.Time{})
		_ = a.Expired(now)
		b.Stop()
	})
	require.Zero(t, allocs)
}
