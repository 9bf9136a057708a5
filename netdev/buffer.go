package netdev

import "unsafe"

// BufferSkew is where NewBuffer puts a buffer's first byte: 4 bytes past
// an 8-byte boundary. A RoCE packet's payload follows its 12-byte BTH
// (SEND, WRITE and READ response MIDDLE and LAST packets) or the BTH and
// a 16-byte RETH (WRITE FIRST and ONLY), so a datagram received or built
// at such an address has its payload on an 8-byte boundary. The payload's
// copy into or out of a memory region, usually 8-byte aligned, then takes
// the runtime's fast path: on amd64 with ERMS, Go's memmove copies
// blocks over 2 KiB with REP MOVSB when either end is not 8-byte aligned,
// and a 4 KiB copy from an address 4 past an 8-byte boundary to an
// aligned one took 3.6 times as long as an aligned one here
// (docs/performance.md, "Payloads on 8-byte boundaries").
const BufferSkew = 4

// NewBuffer returns a zeroed buffer of n bytes (len and cap n) whose first
// byte is BufferSkew bytes past an 8-byte boundary. Go's heap does not move
// objects, so the address holds for the buffer's life.
func NewBuffer(n int) []byte {
	b := make([]byte, n+8)
	off := (BufferSkew - int(uintptr(unsafe.Pointer(unsafe.SliceData(b))))) & 7
	return b[off : off+n : off+n]
}
