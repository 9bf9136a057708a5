//go:build linux

// Package guardpage is test support: memory between unmapped pages, so that
// a load or store one byte outside a slice faults instead of passing
// unnoticed (the bounds tests of the assembly copies and ICRC folds).
package guardpage

import (
	"syscall"
	"testing"
)

// Alloc maps n readable and writable bytes (rounded up to pages) between
// two PROT_NONE pages and returns them; they are unmapped when t ends.
func Alloc(t testing.TB, n int) []byte {
	t.Helper()
	ps := syscall.Getpagesize()
	n = (n + ps - 1) / ps * ps
	m, err := syscall.Mmap(-1, 0, n+2*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("guardpage: mmap: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(m) })
	if err := syscall.Mprotect(m[:ps], syscall.PROT_NONE); err != nil {
		t.Fatalf("guardpage: mprotect: %v", err)
	}
	if err := syscall.Mprotect(m[ps+n:], syscall.PROT_NONE); err != nil {
		t.Fatalf("guardpage: mprotect: %v", err)
	}
	return m[ps : ps+n : ps+n]
}
