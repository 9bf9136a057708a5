package sge

import "unsafe"

// copyPiece is the largest block Copy hands the runtime when dst and src
// are not both 8-byte aligned: under the 2 KiB from which amd64's memmove
// (with ERMS) switches to REP MOVSB for such blocks.
const copyPiece = 2040

// Copy copies src into dst as the built-in copy does (no overlap: a packet
// buffer and a memory region) and returns the number of bytes copied.
//
// A RoCE payload follows a 12-byte BTH, or 16 and 28 bytes of headers, so
// in a datagram buffer on an 8-byte boundary it starts 4 bytes off one,
// while memory regions are usually aligned. On amd64 with ERMS, Go's
// memmove copies a misaligned block over 2 KiB with REP MOVSB, and a 4 KiB
// copy from 4 bytes past a boundary to an aligned address took 290-400 ns
// here against 100 ns aligned; in pieces under 2 KiB (vector loads) it
// took 108 (docs/performance.md, "Payload copies under 2 KiB").
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n <= copyPiece || (uintptr(unsafe.Pointer(unsafe.SliceData(dst)))|uintptr(unsafe.Pointer(unsafe.SliceData(src))))&7 == 0 {
		return copy(dst, src)
	}
	for off := 0; off < n; off += copyPiece {
		end := min(off+copyPiece, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}
