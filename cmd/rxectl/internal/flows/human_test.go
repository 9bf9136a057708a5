package flows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHuman: one decimal below 10 µs and between 1 and 10 ms, whole
// microseconds and milliseconds (rounded) up to 1 ms and 1 s, two
// decimals of seconds beyond; a value that rounds up to the next unit's
// threshold is written in that unit (999.6 µs is 1.0 ms, not 1000 µs).
func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0 µs"},
		{5040 * time.Nanosecond, "5.0 µs"},
		{10 * time.Microsecond, "10 µs"},
		{140*time.Microsecond + 499, "140 µs"},
		{140*time.Microsecond + 500, "141 µs"},
		{time.Millisecond, "1.0 ms"},
		{1300 * time.Microsecond, "1.3 ms"},
		{10 * time.Millisecond, "10 ms"},
		{67*time.Millisecond + 499*time.Microsecond, "67 ms"},
		{67*time.Millisecond + 500*time.Microsecond, "68 ms"},
		{time.Second, "1.00 s"},
		{2500 * time.Millisecond, "2.50 s"},
		{4296 * time.Millisecond, "4.30 s"},
		{9949 * time.Nanosecond, "9.9 µs"},
		{9960 * time.Nanosecond, "10 µs"},
		{999499 * time.Nanosecond, "999 µs"},
		{999600 * time.Nanosecond, "1.0 ms"},
		{9949 * time.Microsecond, "9.9 ms"},
		{9960 * time.Microsecond, "10 ms"},
		{999499 * time.Microsecond, "999 ms"},
		{999600 * time.Microsecond, "1.00 s"},
	} {
		require.Equal(t, tc.want, Human(tc.d), "%v", tc.d)
	}
}
