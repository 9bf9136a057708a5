package netdev

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestNewBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 12, 4124, 9216, 65536} {
		b := NewBuffer(n)
		require.Len(t, b, n)
		require.Equal(t, n, cap(b))
		if n > 0 {
			addr := uintptr(unsafe.Pointer(&b[0]))
			require.Equal(t, uintptr(BufferSkew), addr%8, "n=%d", n)
			// A RoCE payload after the 12-byte BTH lands on an 8-byte boundary.
			if n > 12 {
				require.Zero(t, uintptr(unsafe.Pointer(&b[12]))%8)
			}
		}
		for _, c := range b {
			require.Zero(t, c)
		}
	}
}
