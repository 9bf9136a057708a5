package faults

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// TestPumpDeliveryRules: with receive rules that need the pump, ReadBatch
// loses (DirStats.Lost) a queued datagram even one byte longer than the
// caller's buffer instead of returning it cut, and the pump stops reading
// the inner Conn once MaxQueue datagrams wait for ReadBatch.
func TestPumpDeliveryRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 3, BatchSize: 1})
		// A rule that never fires but needs the pump.
		fb := Wrap(b, Config{Seed: 1, MaxQueue: 2, Rules: []Rule{{Action: Delay, Dir: Recv, Nth: 1 << 30}}})
		defer a.Close()
		defer fb.Close()
		write := func(s string) error {
			_, err := a.WriteBatch([]netdev.Message{{Buf: []byte(s), N: len(s), Addr: netdev.DefaultPipeAddrB}})
			synctest.Wait() // the pump has taken what it takes
			return err
		}
		require.NoError(t, write("0123456789A")) // 11 bytes
		require.NoError(t, write("fits"))
		// The pump holds two (MaxQueue) and reads no more: the pipe's
		// three places fill and the next write is a local drop.
		for i := range 3 {
			require.NoError(t, write("queued"), "write %d", i)
		}
		require.ErrorIs(t, write("refused"), netdev.ErrLocalDrop)

		in := []netdev.Message{{Buf: make([]byte, 10)}}
		n, err := fb.ReadBatch(in)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, "fits", string(in[0].Buf[:in[0].N]))
		require.Equal(t, uint64(1), fb.Stats().Recv.Lost)
	})
}
