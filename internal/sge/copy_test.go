package sge

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 3*copyPiece+64)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct{ n, srcOff, dstOff, dstLen int }{
		{0, 0, 0, 0}, {1, 4, 0, 1}, {copyPiece, 4, 0, copyPiece},
		{copyPiece + 1, 4, 0, copyPiece + 1}, {4096, 12, 0, 4096},
		{4096, 0, 12, 4096}, {4096, 8, 0, 4096}, {2 * copyPiece, 28, 3, 2 * copyPiece},
		{3 * copyPiece, 4, 0, 5000}, // dst shorter: copies len(dst)
		{100, 4, 0, 4000},           // src shorter
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			s := src[tc.srcOff : tc.srcOff+tc.n]
			buf := make([]byte, tc.dstOff+tc.dstLen+8)
			dst := buf[tc.dstOff : tc.dstOff+tc.dstLen]
			want := min(len(s), len(dst))
			require.Equal(t, want, Copy(dst, s))
			require.True(t, bytes.Equal(s[:want], dst[:want]))
			require.True(t, bytes.Equal(make([]byte, len(buf)-tc.dstOff-want), buf[tc.dstOff+want:]), "wrote past the copied bytes")
		})
	}
}

// BenchmarkCopy4K copies a 4 KiB payload from 4 bytes past an 8-byte
// boundary (after a BTH) into an aligned region, with Copy and with the
// built-in copy.
func BenchmarkCopy4K(b *testing.B) {
	src := make([]byte, 16<<10)
	dst := make([]byte, 16<<10)
	for _, c := range []struct {
		name string
		f    func(d, s []byte) int
	}{{"sge.Copy", Copy}, {"builtin", func(d, s []byte) int { return copy(d, s) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4096)
			for i := 0; b.Loop(); i++ {
				j := i % 3
				c.f(dst[j*4096:j*4096+4096], src[j*4096+12:])
			}
		})
	}
}
