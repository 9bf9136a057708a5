package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rnrWantUS is IBTA 9.7.5.2.8 table 45 (also protocol.md §3.3), in µs. Kernel
// rxe's rnrnak_usec agrees except for code 25, which it gives as 61410.
var rnrWantUS = [32]int64{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

func TestRNRDelayTable(t *testing.T) {
	for code := range 32 {
		t.Run("", func(t *testing.T) {
			want := time.Duration(rnrWantUS[code]) * time.Microsecond
			require.Equal(t, want, RNRDelay(uint8(code)), "code %d", code)
			// The whole RNR NAK syndrome 0x20|code may be passed.
			require.Equal(t, want, RNRDelay(0x20|uint8(code)), "syndrome %#x", 0x20|code)
			// Round trip: the code for exactly its own delay is itself.
			require.Equal(t, uint8(code), RNRCode(want), "code %d", code)
		})
	}
}

func TestRNRDelayNamedValues(t *testing.T) {
	require.Equal(t, 655360*time.Microsecond, RNRDelay(0))  // 655.36 ms, the longest
	require.Equal(t, 10*time.Microsecond, RNRDelay(1))      // 0.01 ms, the shortest
	require.Equal(t, 640*time.Microsecond, RNRDelay(12))    // perftest's min_rnr_timer
	require.Equal(t, 61440*time.Microsecond, RNRDelay(25))  // not rxe's 61410 typo
	require.Equal(t, 491520*time.Microsecond, RNRDelay(31)) // 491.52 ms
}

func TestRNRCode(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		d    time.Duration
		want uint8
	}{
		{-time.Second, 1},
		{0, 1},
		{1, 1},
		{10 * us, 1},
		{10*us + 1, 2},
		{55 * us, 5}, // 60 µs
		{640 * us, 12},
		{641 * us, 13},
		{61410 * us, 25},
		{61440 * us, 25},
		{61441 * us, 26},
		{491520 * us, 31},
		{491520*us + 1, 0},
		{655360 * us, 0},
		{655360*us + 1, 0}, // saturates at the longest wait
		{time.Hour, 0},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, RNRCode(tc.d), "d=%v", tc.d)
	}
}

// TestRNRCodeBruteForce checks RNRCode against a linear scan at and around
// every table entry: the result is the code with the shortest delay ≥ d.
func TestRNRCodeBruteForce(t *testing.T) {
	scan := func(d time.Duration) uint8 {
		best, found := uint8(0), false
		for c := range 32 {
			v := RNRDelay(uint8(c))
			if v >= d && (!found || v < RNRDelay(best)) {
				best, found = uint8(c), true
			}
		}
		if !found {
			return 0
		}
		return best
	}
	for code := range 32 {
		v := RNRDelay(uint8(code))
		for _, d := range []time.Duration{v - 1, v, v + 1, v / 2, v * 3 / 2} {
			require.Equal(t, scan(d), RNRCode(d), "d=%v", d)
			require.GreaterOrEqual(t, RNRDelay(RNRCode(d)), min(d, RNRDelay(0)), "d=%v", d)
		}
	}
}
