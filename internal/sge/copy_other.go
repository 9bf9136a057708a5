//go:build !amd64 || purego

package sge

// hasCopyAVX2 is false where copy_amd64.s is not built (a variable, so
// that tests can set it everywhere alike).
var hasCopyAVX2 = false

// canCopyAVX2 is false where copy_amd64.s is not built.
const canCopyAVX2 = false

// copyAVX2 is the built-in copy where copy_amd64.s is not built (Copy
// does not call it there).
func copyAVX2(dst, src []byte) { copy(dst, src) }
