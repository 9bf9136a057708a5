package packet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOOOPackets: an out-of-order buffer holds limit / (PMTU +
// OOOSlotOverhead) requests, whole slots only (docs/recovery.md,
// "Selective repeat"); a limit of 0 or less is DefaultOOOLimit, and a
// negative PMTU counts as 0, so that no PMTU divides by zero.
func TestOOOPackets(t *testing.T) {
	tests := []struct {
		limit, pmtu, want int
	}{
		{0, 4096, 512},
		{-1, 4096, 512},
		{DefaultOOOLimit, 4096, 512},
		{4096 + OOOSlotOverhead, 4096, 1},
		{4096 + OOOSlotOverhead - 1, 4096, 0},
		{1 << 20, 1024, (1 << 20) / (1024 + OOOSlotOverhead)},
		{10 * OOOSlotOverhead, 0, 10},
		{10 * OOOSlotOverhead, -1, 10},
		{10 * OOOSlotOverhead, -OOOSlotOverhead, 10},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, OOOPackets(tc.limit, tc.pmtu), "limit %d, PMTU %d", tc.limit, tc.pmtu)
	}
}
