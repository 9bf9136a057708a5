package faults_test

import (
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// listen opens a UDPConn on loopback for a test.
func listen(t *testing.T) *netdev.UDPConn {
	t.Helper()
	c, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), netdev.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// A Conn reads in turn (netdev.AsSharedReader) exactly when its inner
// Conn does and its receive rules need no queue.
func TestSharesReads(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		pipe  bool
		want  bool
	}{
		{nil, false, true},
		{[]string{"drop=0.1,dir=send"}, false, true},
		{[]string{"drop=0.1,dir=recv"}, false, true},
		{[]string{"corrupt=0.1,dir=recv", "drop=RC_ACKNOWLEDGE#3,dir=recv"}, false, true},
		{[]string{"delay=0.1,dir=recv"}, false, false},
		{[]string{"dup=0.1,dir=recv"}, false, false},
		{[]string{"drop=0.1,dir=recv"}, true, false},
	} {
		var inner netdev.Conn
		if tc.pipe {
			a, b := netdev.NewPipe()
			t.Cleanup(func() { a.Close() })
			inner = b
		} else {
			inner = listen(t)
		}
		c := faults.Wrap(inner, faults.Config{Rules: mustRules(t, tc.rules...)})
		_, ok := netdev.AsSharedReader(c)
		require.Equal(t, tc.want, ok, "%v pipe=%v", tc.rules, tc.pipe)
		require.Equal(t, tc.want, c.SharesReads())
		if !tc.want {
			_, err := c.TryReadBatch(make([]netdev.Message, 1))
			require.ErrorIs(t, err, errors.ErrUnsupported)
		}
		require.NoError(t, c.Close())
	}
}

// Reading in turn gives the faults that ReadBatch gives: datagrams read
// through TryReadBatch and ReadBatchGated, alternately and in small
// batches, arrive once and in order, the dropped ones are those the same
// seed drops over a pipe read with ReadBatch, and a batch that the rules
// drop entirely is followed by further reads.
func TestSharedReadsSameFaults(t *testing.T) {
	const n = 1200
	pkts := mixed(t, n)
	cfg := faults.Config{Seed: 7, Rules: mustRules(t, "drop=0.1,dir=recv", "corrupt=0.05,dir=recv", "drop=RC_ACKNOWLEDGE#3-5,dir=recv")}
	var want transfer
	synctest.Test(t, func(t *testing.T) {
		want = run(t, netdev.PipeOptions{Depth: 4 * n}, faults.Config{}, cfg, pkts, 64)
	})

	rx := listen(t)
	c := faults.Wrap(rx, cfg)
	defer c.Close()
	tx := listen(t)
	var gate netdev.Gate
	msgs := make([]netdev.Message, 4)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 2048)
	}
	var got []int
	var corrupted [][]byte
	take := func(k int) {
		for _, m := range msgs[:k] {
			got = append(got, psnOf(m.Buf[:m.N]))
			corrupted = append(corrupted, append([]byte(nil), m.Buf[:m.N]...))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	const chunk = 100 // datagrams sent at a time: well within the socket's buffer
	for sent := 0; sent < n; sent += chunk {
		out := make([]netdev.Message, 0, chunk)
		for _, p := range pkts[sent:min(sent+chunk, n)] {
			out = append(out, netdev.Message{Buf: p, N: len(p), Addr: rx.LocalAddr()})
		}
		for len(out) > 0 {
			k, err := tx.WriteBatch(out)
			require.NoError(t, err)
			out = out[k:]
		}
		// Read this chunk: every other call blocks in ReadBatchGated
		// (which returns holding the gate), the rest poll.
		for round := 0; len(got) < len(want.recs) && want.recs[len(got)].psn < sent+chunk; round++ {
			require.True(t, time.Now().Before(deadline), "datagrams missing: got %d", len(got))
			if round%2 == 0 {
				k, err := c.ReadBatchGated(msgs, &gate)
				require.NoError(t, err)
				require.Positive(t, k)
				take(k)
				gate.Release()
				continue
			}
			require.True(t, gate.TryLock())
			k, err := c.TryReadBatch(msgs)
			require.NoError(t, err)
			take(k)
			gate.Release()
		}
	}
	require.Equal(t, psns(want.recs), got, "the same datagrams kept, once, in order")
	for i := range got {
		require.Equal(t, want.recs[i].data, corrupted[i], "datagram %d corrupted alike", i)
	}
	require.Equal(t, want.recvStats, c.Stats())
}
