//go:build !purego

package sge

import "golang.org/x/sys/cpu"

// canCopyAVX2 reports whether copyAVX2 runs here (AVX2, with the OS
// saving the YMM state).
var canCopyAVX2 = cpu.X86.HasAVX2

// hasCopyAVX2 reports whether Copy uses copyAVX2: where it runs, and not
// under the race detector, which does not see its loads and stores.
var hasCopyAVX2 = canCopyAVX2 && !raceEnabled

// copyAVX2 copies src, a non-zero multiple of 128 bytes, into dst,
// prefetching the 4 KiB after each destination line (copy_amd64.s).
//
//go:noescape
func copyAVX2(dst, src []byte)
