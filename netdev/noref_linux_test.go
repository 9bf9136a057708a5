package netdev

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoBufferReferencesKept: a Conn keeps no reference to the callers'
// buffers after a call returns (Conn: Ownership), so the I/O vectors the
// system calls used point at nothing once WriteBatch, ReadBatch and
// TryReadBatch return (without GRO, where the buffers are the caller's).
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

	_, err = tx.WriteBatch(out)
	require.NoError(t, err)
	var g Gate
	require.True(t, g.TryLock())
	msgs := newMsgs(rx.BatchSize(), 2000)
	for range 3 {
		_, err := rx.TryReadBatch(msgs)
		require.NoError(t, err)
		noRefs(rx.rx, "TryReadBatch")
	}
	g.Release()
}
