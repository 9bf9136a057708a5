//go:build !amd64 || purego

package packet

import "hash/crc32"

// hasFoldAVX512 is false where crcfold_amd64.s is not built.
const hasFoldAVX512 = false

// foldCopy is false where crcfold_amd64.s is not built (a variable, so
// that tests can set it everywhere alike).
var foldCopy = false

// ICRCUpdate folds p into a running ICRC started by ICRCStart
// (crc32.Update with the IEEE table).
func ICRCUpdate(crc uint32, p []byte) uint32 { return crc32.Update(crc, crc32.IEEETable, p) }

// ICRCCopy copies src into dst, which must be at least as long, and
// returns ICRCUpdate(crc, src).
// dst and src must not overlap unless they are the same bytes.
func ICRCCopy(crc uint32, dst, src []byte) uint32 {
	copy(dst[:len(src)], src)
	return ICRCUpdate(crc, src)
}
