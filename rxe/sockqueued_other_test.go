//go:build !linux

package rxe

import "testing"

// socketHoldsDatagram needs Linux's SIOCINQ; the tests that call it read
// a socket in turn with its receive goroutine (netdev.SharedReader),
// which only Linux has, and fail before they get here elsewhere.
func socketHoldsDatagram(t *testing.T, conn any) bool {
	t.Helper()
	t.Fatal("socketHoldsDatagram: Linux only")
	return false
}
