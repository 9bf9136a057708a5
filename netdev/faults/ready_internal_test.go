package faults

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// TestReadyDoesNotGrow keeps one datagram queued for ReadBatch at all
// times while 10000 pass through a receive side with a pump: the queue's
// slice must stay as long as what it holds, not grow with every datagram
// that ever went through it.
func TestReadyDoesNotGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 16})
		// A rule that never fires but needs the pump.
		fb := Wrap(b, Config{Seed: 1, Rules: []Rule{{Action: Delay, Dir: Recv, Nth: 1 << 30}}})
		defer a.Close()
		defer fb.Close()
		out := []netdev.Message{{Buf: []byte("datagram"), N: 8, Addr: netdev.DefaultPipeAddrB}}
		in := []netdev.Message{{Buf: make([]byte, 64)}}
		_, err := a.WriteBatch(out)
		require.NoError(t, err)
		for range 10000 {
			_, err := a.WriteBatch(out)
			require.NoError(t, err)
			synctest.Wait() // the pump has queued it
			n, err := fb.ReadBatch(in)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		fb.recv.mu.Lock()
		defer fb.recv.mu.Unlock()
		require.Equal(t, 1, fb.recv.queued())
		require.LessOrEqual(t, len(fb.recv.ready), 2)
	})
}
