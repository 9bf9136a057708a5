package netdev

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestNoBufferReferencesKept: a Conn keeps no reference to the callers'
// buffers after a call returns (Conn: Ownership), so the I/O vectors the
// system calls used point at nothing once WriteBatch, ReadBatch and
// TryReadBatch return (without GRO, where the buffers are the caller's):
// TryReadBatch of datagrams queued, and of an empty socket.
func TestNoBufferReferencesKept(t *testing.T) {
	tx := listen(t, lo4, Options{NoGSO: true})
	rx := listen(t, lo4, Options{NoGRO: true})
	noRefs := func(m *mmsg, what string) {
		t.Helper()
		for i := range m.iovs {
			require.Nil(t, m.iovs[i].Base, "%s: iovec %d", what, i)
		}
	}
	out := make([]Message, 6)
	for i := range out {
		out[i] = Message{Buf: payload(i), N: len(payload(i)), Addr: rx.LocalAddr()}
	}
	n, err := tx.WriteBatch(out)
	require.NoError(t, err)
	require.Equal(t, len(out), n)
	noRefs(tx.tx, "WriteBatch")

	require.Len(t, readN(t, rx, len(out)), len(out))
	noRefs(rx.rx, "ReadBatch")

	testutil.SendQueued(t, rx.LocalAddr(), len(out), func(i int) {
		_, err := tx.WriteBatch(out[i : i+1])
		require.NoError(t, err)
	})
	var g Gate
	require.True(t, g.TryLock())
	msgs := newMsgs(rx.BatchSize(), 2000)
	for _, want := range []int{len(out), 0} { // all that is queued, then an empty socket
		n, err := rx.TryReadBatch(msgs)
		require.NoError(t, err)
		require.Equal(t, want, n)
		noRefs(rx.rx, "TryReadBatch")
	}
	g.Release()
}
