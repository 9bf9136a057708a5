package netdev

import "testing"

// FuzzControlMessages: the control-message and address parsers take any
// bytes (truncated headers, lengths past the buffer) without panicking or
// reading outside them.
func FuzzControlMessages(f *testing.F) {
	f.Add([]byte{})
	f.Add(cmsgBytes(17, 104, []byte{1, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRecvCmsgs(b)
		errQueueOrigin(b)
		var sa [sockaddrSize]byte
		copy(sa[:], b)
		sockaddrAddrPort(&sa, len(b))
	})
}
