package packet

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpdateSmallMatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		seed := r.Uint32()
		require.Equal(t, crc32.Update(seed, crc32.IEEETable, b), updateSmall(seed, b), "len %d", n)
	}
}

func TestCRCOfEightOnes(t *testing.T) {
	ff := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	require.Equal(t, uint32(crcFF8), crc32.ChecksumIEEE(ff))
	// Kernel rxe seeds its register with 0xDEBB20E3: the same state, not finalised.
	require.Equal(t, uint32(0xDEBB20E3), ^crc32.ChecksumIEEE(ff))
}
