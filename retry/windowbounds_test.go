package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWindowSetBounds: a window at its largest follows a new largest size
// up or down; one a loss shrank keeps its size within the new bounds, and
// its threshold too; Min is clamped as Init clamps it.
func TestWindowSetBounds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name          string
		loss          bool // one loss before the change: 128 → 64, threshold 96
		max, min      int
		size, thresh  int
		cfgMax, cfgMn int
	}{
		{"at its largest, grows", false, 256, 128, 256, 256, 256, 128},
		{"at its largest, shrinks", false, 16, 0, 16, 16, 16, 16},
		{"after a loss, grows", true, 256, 32, 64, 96, 256, 32},
		{"after a loss, shrinks below the size", true, 40, 8, 40, 40, 40, 8},
		{"after a loss, shrinks between size and threshold", true, 80, 32, 64, 80, 80, 32},
		{"a minimum above the size lifts it", true, 256, 100, 100, 100, 256, 100},
		{"max below 1 counts as 1", false, 0, 0, 1, 1, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow(WindowConfig{Max: 128, Min: 32})
			if tc.loss {
				require.True(t, w.OnLoss(t0, time.Millisecond))
				require.Equal(t, 64, w.Size())
			}
			w.SetBounds(tc.max, tc.min)
			st := w.Stats()
			require.Equal(t, tc.size, st.Size)
			require.Equal(t, tc.thresh, st.Threshold)
			require.Equal(t, tc.cfgMax, w.Config().Max)
			require.Equal(t, tc.cfgMn, w.Config().Min)
		})
	}
}

// TestWindowSetBoundsThenGrow: after SetBounds raised the largest size,
// clean acknowledgements grow a shrunk window up to the new largest.
func TestWindowSetBoundsThenGrow(t *testing.T) {
	w := NewWindow(WindowConfig{Max: 64, Min: 8})
	require.True(t, w.OnLoss(time.Unix(0, 0), 0)) // 32, threshold 48
	w.SetBounds(200, 8)
	for range 1000 {
		w.OnAck(w.Size())
	}
	require.Equal(t, 200, w.Size())
}
