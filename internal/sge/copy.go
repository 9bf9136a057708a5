package sge

import "unsafe"

// copyPiece is the largest block Copy hands the runtime at a time when it
// splits a copy: under the 2048 bytes from which amd64's memmove may use
// REP MOVSQ.
const copyPiece = 2040

// copyVecMin is the shortest copy Copy makes with copyAVX2: below it the
// runtime's memmove takes a few straight-line moves.
const copyVecMin = 256

// Copy copies src into dst as the built-in copy does (no overlap: a packet
// buffer and a memory region) and returns the number of bytes copied.
//
// A RoCE payload follows a 12-byte BTH (or 16 and 28 bytes of headers), so
// in a datagram buffer on an 8-byte boundary it mostly starts 4 bytes off
// one, while memory regions are usually aligned. Go's memmove on amd64
// (runtime/memmove_amd64.s, Go 1.26) copies a forward block of 2048 bytes
// or more whose destination is 16-byte aligned with REP MOVSQ on
// processors that prefer it (ERMS and FSRM), and anything else with an
// AVX loop. REP MOVSQ from a source that is not 8-byte aligned ran at a
// third of its speed here: a 4 KiB copy from a payload after a BTH into
// an aligned region took 308-415 ns, 120-168 ns in pieces
// (BenchmarkCopy4K/in), while copies into a payload took 127-165 ns
// either way. Copy hands the runtime pieces under 2 KiB in exactly that
// case (docs/performance.md, "Payload copies in pieces under 2 KiB").
//
// On amd64 with AVX2, Copy moves 256 bytes or more into a 32-byte aligned
// destination (a memory region) itself, in 32-byte loads and stores, and
// asks the processor for the 4 KiB after each destination line: a payload is at most one 4 KiB
// MTU, the next packet of a message lands in the next 4 KiB of the
// region, and the hardware's stream prefetch does not cross into that
// page. Into a payload after a BTH (not aligned) its stores would straddle
// cache lines, which the runtime's memmove avoids by aligning them: 4 KiB
// took 130-160 ns there against 115-118 ns (BenchmarkCopy4K/sge.Copy/out),
// while into an aligned region 77-98 ns against 97-108 (in) (docs/performance.md,
// "One pass over a payload, and the next page asked for").
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	d, s := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	if hasCopyAVX2 && n >= copyVecMin && d&31 == 0 {
		k := n &^ 127
		copyAVX2(dst[:k], src[:k])
		copy(dst[k:n], src[k:n])
		return n
	}
	if n < 2048 || d&15 != 0 || s&7 == 0 {
		return copy(dst, src)
	}
	for off := 0; off < n; off += copyPiece {
		end := min(off+copyPiece, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}
