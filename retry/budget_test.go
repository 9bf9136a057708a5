package retry

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRetryBudget(t *testing.T) {
	tests := []struct {
		name  string
		limit uint8
		want  int // successful Consume calls before the first false
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"three", 3, 3},
		{"seven is seven (IBTA)", 7, 7},
		{"over 3 bits clamps to 7", 200, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewRetryBudget(tc.limit)
			require.Equal(t, uint8(tc.want), b.Limit())
			for round := range 2 { // second round after Reset
				require.Equal(t, uint8(tc.want), b.Remaining(), "round %d", round)
				require.Equal(t, tc.want == 0, b.Exhausted())
				for i := range tc.want {
					require.True(t, b.Consume(), "retry %d", i)
					// Each retry spends one of retry_cnt (IBTA 9.7.6.1.3),
					// and the attribute itself stays as set.
					require.Equal(t, uint8(tc.want-i-1), b.Remaining(), "after retry %d", i)
					require.Equal(t, uint8(tc.want), b.Limit(), "after retry %d", i)
				}
				require.True(t, b.Exhausted())
				require.Zero(t, b.Remaining())
				require.False(t, b.Consume())
				require.False(t, b.Consume())
				require.True(t, b.Exhausted())
				b.Reset()
			}
		})
	}
}

func TestRetryBudgetResetMidway(t *testing.T) {
	b := NewRetryBudget(2)
	require.True(t, b.Consume())
	b.Reset() // a useful response refills it
	require.True(t, b.Consume())
	require.True(t, b.Consume())
	require.False(t, b.Consume())

	var z RetryBudget
	require.True(t, z.Exhausted())
	require.False(t, z.Consume())
}

func TestRNRBudget(t *testing.T) {
	tests := []struct {
		name  string
		limit uint8
		want  int // -1: infinite
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"six", 6, 6},
		{"seven is infinite", RNRRetryInfinite, -1},
		{"over 3 bits clamps to infinite", 9, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewRNRBudget(tc.limit)
			if tc.want < 0 {
				require.True(t, b.Infinite())
				require.Equal(t, uint8(7), b.Limit())
				for i := range 10000 {
					require.True(t, b.Consume(), "retry %d", i)
					require.False(t, b.Exhausted())
				}
				require.Equal(t, uint8(7), b.Remaining())
				b.Reset()
				require.False(t, b.Exhausted())
				return
			}
			require.False(t, b.Infinite())
			for round := range 2 {
				require.Equal(t, uint8(tc.want), b.Remaining(), "round %d", round)
				for i := range tc.want {
					require.False(t, b.Exhausted())
					require.True(t, b.Consume(), "retry %d", i)
					// Each RNR retry spends one of rnr_retry (IBTA
					// 9.7.5.2.8), and the attribute itself stays as set.
					require.Equal(t, uint8(tc.want-i-1), b.Remaining(), "after retry %d", i)
					require.Equal(t, uint8(tc.want), b.Limit(), "after retry %d", i)
				}
				require.True(t, b.Exhausted())
				require.False(t, b.Consume())
				b.Reset()
			}
		})
	}
	var z RNRBudget
	require.True(t, z.Exhausted())
	require.False(t, z.Consume())
}
