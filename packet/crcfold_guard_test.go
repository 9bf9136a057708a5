//go:build linux

package packet

import (
	"hash/crc32"
	"testing"

	"github.com/gorxe/gorxe/internal/guardpage"
	"github.com/stretchr/testify/require"
)

// TestICRCCopyGuarded: ICRCCopy reads no byte outside src and writes none
// outside dst[:len(src)], with either slice starting right after or ending
// right before an unmapped page, for every length to 300, around the fold's
// block multiples and a 4 KiB MTU, at every offset modulo 64.
func TestICRCCopyGuarded(t *testing.T) { eachCopyPath(t, testICRCCopyGuarded) }

func testICRCCopyGuarded(t *testing.T) {
	const size = 8192 + 64
	sreg, dreg := guardpage.Alloc(t, size), guardpage.Alloc(t, size)
	for i := range sreg {
		sreg[i] = byte(i*131 + 7)
	}
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, k := range []int{512, 1024, 4096, 8192} {
		for n := k - 3; n <= k+3; n++ {
			lengths = append(lengths, n)
		}
	}
	for _, n := range lengths {
		for off := range 64 {
			for _, atEnd := range []bool{false, true} {
				so, do := off, (off*7)%64
				if atEnd {
					so, do = len(sreg)-n-off, len(dreg)-n-do
				}
				if so < 0 || do < 0 {
					continue
				}
				src, dst := sreg[so:so+n:so+n], dreg[do:do+n:do+n]
				seed := uint32(n*64 + off)
				got := ICRCCopy(seed, dst, src)
				require.Equal(t, crc32.Update(seed, &genericIEEE, src), got, "len %d src %d dst %d", n, so, do)
				require.Equal(t, src, dst)
				// The same register from ICRCUpdate over the guarded source.
				require.Equal(t, got, ICRCUpdate(seed, src))
			}
		}
	}
}
