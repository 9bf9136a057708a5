//go:build linux

package sge

import (
	"fmt"
	"testing"

	"github.com/gorxe/gorxe/internal/guardpage"
	"github.com/stretchr/testify/require"
)

// TestCopyGuarded: Copy, on each of its paths, reads nothing outside src
// and writes nothing outside dst, with the slices against unmapped pages,
// for every length to 300 and around 2048 and 4096, every offset modulo
// 64, and dst shorter, equal or longer.
func TestCopyGuarded(t *testing.T) {
	vec := hasCopyAVX2
	t.Cleanup(func() { hasCopyAVX2 = vec })
	modes := []bool{false}
	if canCopyAVX2 {
		modes = append(modes, true)
	}
	const size = 8192 + 128
	sreg, dreg := guardpage.Alloc(t, size), guardpage.Alloc(t, size)
	for i := range sreg {
		sreg[i] = byte(i*131 + 7)
	}
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, k := range []int{384, 2040, 2048, 4096, 8192} {
		for n := k - 3; n <= k+3; n++ {
			lengths = append(lengths, n)
		}
	}
	for _, v := range modes {
		hasCopyAVX2 = v
		t.Run(fmt.Sprint("vector=", v), func(t *testing.T) {
			for _, n := range lengths {
				for off := range 64 {
					for _, dd := range []int{-1, 0, 1} {
						nd := max(n+dd, 0)
						for _, atEnd := range []bool{false, true} {
							so, do := off, (off*5)%64
							if atEnd {
								so, do = len(sreg)-n-off, len(dreg)-nd-do
							}
							if so < 0 || do < 0 {
								continue
							}
							src, dst := sreg[so:so+n:so+n], dreg[do:do+nd:do+nd]
							want := min(n, nd)
							require.Equal(t, want, Copy(dst, src))
							require.Equal(t, src[:want], dst[:want], "len %d into %d, src %d dst %d", n, nd, so, do)
						}
					}
				}
			}
		})
	}
}
