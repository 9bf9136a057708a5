package faults_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
)

// TestTryReadBatchRefills: when the inner Conn filled the batch and the
// rules dropped some, TryReadBatch reads on into their room, again and
// again, until the batch is full or nothing more is there (decideFill).
// Without GRO the kept datagrams stay in the caller's buffers, so it may.
// All eight datagrams are queued at the socket before it reads.
func TestTryReadBatchRefills(t *testing.T) {
	rx, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), netdev.Options{NoGRO: true})
	require.NoError(t, err)
	c := faults.Wrap(rx, faults.Config{Rules: mustRules(t, "drop=#1-2,dir=recv", "drop=#5,dir=recv")})
	defer c.Close()
	tx := listen(t)
	out := make([]netdev.Message, 8)
	for i := range out {
		out[i] = netdev.Message{Buf: []byte{byte(i)}, N: 1, Addr: rx.LocalAddr()}
	}
	testutil.SendQueued(t, rx.LocalAddr(), len(out), func(i int) {
		_, err := tx.WriteBatch(out[i : i+1])
		require.NoError(t, err)
	})

	var gate netdev.Gate
	require.True(t, gate.TryLock())
	defer gate.Unlock()
	msgs := make([]netdev.Message, 4)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 16)
	}
	// Read 0-3, drop 0 and 1; read 4 and 5 into their room, drop 4;
	// read 6 into the last place.
	n, err := c.TryReadBatch(msgs)
	require.NoError(t, err)
	var got []byte
	for _, m := range msgs[:n] {
		got = append(got, m.Buf[:m.N]...)
	}
	require.Equal(t, []byte{2, 3, 5, 6}, got)
}
