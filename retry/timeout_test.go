package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAckTimeout(t *testing.T) {
	tests := []struct {
		t    uint8
		want time.Duration
	}{
		{0, 0}, // infinite: no timer
		{1, 8192 * time.Nanosecond},
		{8, 1048576 * time.Nanosecond},         // 1.049 ms
		{14, 67108864 * time.Nanosecond},       // 67.1 ms, perftest's default
		{18, 1073741824 * time.Nanosecond},     // 1.074 s
		{31, 8796093022208 * time.Nanosecond},  // ≈ 8796 s
		{32, 0},                                // only the low 5 bits count
		{32 + 14, 67108864 * time.Nanosecond},  // likewise
		{255, 8796093022208 * time.Nanosecond}, // 0xFF & 0x1F = 31
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, AckTimeout(tc.t), "t=%d", tc.t)
	}
}

func TestAckTimeoutAll(t *testing.T) {
	require.Zero(t, AckTimeout(0))
	for v := uint8(1); v < 32; v++ {
		require.Equal(t, time.Duration(4096)<<v, AckTimeout(v), "t=%d", v)
		require.Positive(t, AckTimeout(v), "t=%d must not overflow", v)
		if v > 1 {
			require.Equal(t, 2*AckTimeout(v-1), AckTimeout(v), "t=%d doubles", v)
		}
	}
}
