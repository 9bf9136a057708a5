package pcapdump

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// TestHeldBytesBound: during a write, reads are held up to maxHeldBytes
// counted as their payload plus heldOverhead each, the bound included;
// the first read past it is not held (ReadBatch records it at once), a
// read of an empty datagram costs heldOverhead, and recording the held
// reads (the write's end) frees the whole bound again. Nothing is held
// with no write in progress, or once the capture has stopped.
func TestHeldBytesBound(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	c, err := Wrap(a, &buf, Options{})
	require.NoError(t, err)
	const n, size = 256, maxHeldBytes/256 - heldOverhead // n reads of size bytes fill the bound exactly
	msg := func(size int) []netdev.Message {
		return []netdev.Message{{Buf: make([]byte, size), N: size, Addr: b.LocalAddr()}}
	}
	at := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.False(t, c.hold(msg(1), at), "no write in progress")
	c.writing = true
	for i := range n {
		require.True(t, c.hold(msg(size), at), "read %d of %d within the bound", i, n)
	}
	require.Equal(t, maxHeldBytes, c.heldBytes)
	require.False(t, c.hold(msg(0), at), "an empty datagram costs heldOverhead: past the bound")
	require.Equal(t, n, c.nheld)

	c.recordHeld()
	require.Zero(t, c.heldBytes)
	require.True(t, c.hold(msg(maxHeldBytes-heldOverhead), at), "one read of the whole bound")
	require.False(t, c.hold(msg(0), at))
	c.recordHeld()
	c.stopped = true
	require.False(t, c.hold(msg(1), at), "the capture has stopped")
}
