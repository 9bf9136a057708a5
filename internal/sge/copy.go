package sge

import "unsafe"

// copyPiece is the largest block Copy hands the runtime when dst and src
// are misaligned to each other: under the 2 KiB from which amd64's memmove
// (with ERMS) switches to REP MOVSB for blocks not 8-byte aligned.
const copyPiece = 2040

// Copy copies src into dst as the built-in copy does (no overlap: a packet
// buffer and a memory region) and returns the number of bytes copied.
//
// A RoCE payload follows a 12-byte BTH (or 16 and 28 bytes of headers),
// so in a datagram buffer on an 8-byte boundary it mostly starts 4 bytes
// off one, while memory regions are usually aligned. On amd64 with ERMS,
// Go's memmove copies a block over 2 KiB that is not 8-byte aligned with
// REP MOVSB, which here ran at a third of its speed when the source was
// misaligned, both to an 8-byte boundary and to the destination (a 4 KiB
// copy from a payload after a BTH into an aligned region: 308-415 ns
// against 120-168 in pieces, BenchmarkCopy4K/in), and at about full
// speed otherwise (from an aligned region to a payload: 127-165 ns, no
// faster in pieces). Copy hands the runtime pieces under 2 KiB (vector
// loads and stores) in the first case only (docs/performance.md,
// "Payload copies in pieces under 2 KiB").
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	d, s := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	if n <= copyPiece || s&7 == 0 || (d^s)&7 == 0 {
		return copy(dst, src)
	}
	for off := 0; off < n; off += copyPiece {
		end := min(off+copyPiece, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}
