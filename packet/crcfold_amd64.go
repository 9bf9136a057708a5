//go:build !purego

package packet

import "hash/crc32"

// foldAVX512 feeds p (a non-zero multiple of 256 bytes) to CRC register
// reg and returns the register after it (crcfold_amd64.s). A non-empty
// dst, at least as long as p, receives a copy of p, made in the same pass.
//
//go:noescape
func foldAVX512(reg uint32, dst, p []byte) uint32

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax, edx uint32)

// hasFoldAVX512 reports whether this CPU and OS run foldAVX512: AVX-512
// Foundation and VPCLMULQDQ, with the OS saving the ZMM state (XCR0 bits
// 1, 2, 5, 6, 7).
var hasFoldAVX512 = func() bool {
	if max, _, _, _ := cpuid(0, 0); max < 7 {
		return false
	}
	if _, _, ecx, _ := cpuid(1, 0); ecx&(1<<27) == 0 { // OSXSAVE
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&0xE6 != 0xE6 {
		return false
	}
	_, ebx, ecx, _ := cpuid(7, 0)
	return ebx&(1<<16) != 0 && ecx&(1<<10) != 0 // AVX512F, VPCLMULQDQ
}()

// foldCopy reports whether ICRCCopy copies in foldAVX512's pass. Not
// under the race detector, which does not see the assembly's loads and
// stores: there ICRCCopy copies with the built-in copy, which it
// instruments (a variable, so that tests can set it).
var foldCopy = hasFoldAVX512 && !raceEnabled

// foldMin is the shortest input ICRCUpdate folds with foldAVX512: one
// 256-byte block, one step of the four accumulators. Folded, 256 bytes
// already take less time than in crc32.Update (BenchmarkICRCUpdate/256).
const foldMin = 256

// ICRCUpdate folds p into a running ICRC started by ICRCStart. It is
// crc32.Update with the IEEE table; on CPUs with AVX-512 VPCLMULQDQ it
// runs four carry-less multiply chains at once over the 256-byte blocks
// of p, where the standard library runs one (1.85 times as fast over a
// 4 KiB payload, BenchmarkICRCUpdate/4096).
func ICRCUpdate(crc uint32, p []byte) uint32 {
	if n := len(p) &^ 255; hasFoldAVX512 && n >= foldMin {
		crc = ^foldAVX512(^crc, nil, p[:n])
		p = p[n:]
	}
	return updateTail(crc, p)
}

// ICRCCopy copies src into dst, which must be at least as long, and
// returns ICRCUpdate(crc, src). Where ICRCUpdate folds, each block is
// stored to dst as it is folded, so src is read once: a sender that copies
// a payload from a memory region into a packet and then computes the
// packet's ICRC reads the payload a second time, from the cache.
// dst and src must not overlap unless they are the same bytes.
func ICRCCopy(crc uint32, dst, src []byte) uint32 {
	dst = dst[:len(src)]
	if n := len(src) &^ 255; foldCopy && n >= foldMin {
		crc = ^foldAVX512(^crc, dst[:n], src[:n])
		dst, src = dst[n:], src[n:]
	}
	copy(dst, src)
	return updateTail(crc, src)
}

// updateTail is crc32.Update(crc, crc32.IEEETable, p) for what ICRCUpdate
// does not fold: the standard library's carry-less multiply for the
// 16-byte blocks from 64 bytes on, the slicing table of updateSmall for
// the rest. Below 16 bytes the standard library walks a byte at a time,
// and every call reaches it through a sync.Once and an indirect call:
// 12 bytes take 39 ns there and 19 here (BenchmarkICRCUpdate/12).
func updateTail(crc uint32, p []byte) uint32 {
	if k := len(p) &^ 15; k >= 64 {
		crc = crc32.Update(crc, crc32.IEEETable, p[:k])
		p = p[k:]
	}
	return updateSmall(crc, p)
}
