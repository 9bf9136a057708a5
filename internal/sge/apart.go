package sge

import (
	"unsafe"

	"github.com/gorxe/gorxe/rxe/verbs"
)

// Apart reports whether no byte that the SGE list a names is a byte that
// b names, the L_Keys resolved through mem with local write access (two
// regions may map the same memory, so addresses alone do not tell); false
// if an SGE does not resolve.
func Apart(mem Memory, a, b []verbs.SGE) bool {
	for i := range a {
		ma, ok := mem.Local(a[i].LKey, a[i].Addr, a[i].Length, verbs.AccessLocalWrite)
		if !ok {
			return false
		}
		for k := range b {
			mb, ok := mem.Local(b[k].LKey, b[k].Addr, b[k].Length, verbs.AccessLocalWrite)
			if !ok || overlap(ma, mb) {
				return false
			}
		}
	}
	return true
}

// overlap reports whether p and q share a byte of memory.
func overlap(p, q []byte) bool {
	if len(p) == 0 || len(q) == 0 {
		return false
	}
	ps, qs := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(q)))
	return ps < qs+uintptr(len(q)) && qs < ps+uintptr(len(p))
}
