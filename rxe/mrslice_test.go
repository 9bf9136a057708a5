package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMRSliceBounds: an access resolves only if all of [addr, addr+length)
// lies inside the region (rxe_mr.c mr_check_range); a zero-length access
// may sit at the region's end but not past it.
func TestMRSliceBounds(t *testing.T) {
	const iova, size = 0x1000, 64
	mr := &MR{buf: make([]byte, size), iova: iova}
	for _, tc := range []struct {
		name   string
		addr   uint64
		length uint32
		ok     bool
	}{
		{"whole region", iova, size, true},
		{"one byte too long", iova, size + 1, false},
		{"last byte", iova + size - 1, 1, true},
		{"past the last byte", iova + size - 1, 2, false},
		{"empty at the end", iova + size, 0, true},
		{"empty past the end", iova + size + 1, 0, false},
		{"one byte past the end", iova + size, 1, false},
		{"before the region", iova - 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := mr.slice(tc.addr, tc.length)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Len(t, b, int(tc.length))
			}
		})
	}
}
