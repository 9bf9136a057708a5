package netdev

import (
	"net"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// TestPipeReadBatchRules checks the Conn rules of PipeConn.ReadBatch that
// need no waiting: at most BatchSize datagrams, an empty msgs returns at
// once, a datagram exactly as long as its buffer fits, and TTL (which a
// pipe does not report) is 0 whatever the Message held before. It runs in
// a bubble, so a ReadBatch that waits where it must not is a deadlock.
func TestPipeReadBatchRules(t *testing.T) {
	synctest.Test(t, pipeReadBatchRules)
}

func pipeReadBatchRules(t *testing.T) {
	a, b := NewPipeWith(PipeOptions{BatchSize: 2})
	defer a.Close()

	n, err := b.ReadBatch(nil)
	require.NoError(t, err)
	require.Zero(t, n, "len(msgs) 0 returns at once")

	out := make([]Message, 5)
	for i := range out {
		out[i] = Message{Buf: []byte{byte(i), 1, 2, 3}, N: 4, Addr: b.LocalAddr()}
	}
	_, err = a.WriteBatch(out)
	require.NoError(t, err)
	msgs := newMsgs(5, 4) // exactly the datagrams' length
	for i := range msgs {
		msgs[i].TTL = 99
	}
	n, err = b.ReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 2, n, "at most BatchSize")
	for i, m := range msgs[:n] {
		require.Equal(t, []byte{byte(i), 1, 2, 3}, m.Buf[:m.N])
		require.Zero(t, m.TTL, "a pipe reports no TTL")
	}
	require.Zero(t, b.Stats().Truncated)
}

// TestPipeReadWaitsPastTruncated: a ReadBatch whose only datagram did
// not fit its buffer keeps waiting (it returns n >= 1 or an error).
func TestPipeReadWaitsPastTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := NewPipe()
		defer a.Close()
		_, err := a.WriteBatch([]Message{{Buf: make([]byte, 50), N: 50, Addr: b.LocalAddr()}})
		require.NoError(t, err)
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		msgs := newMsgs(4, 10)
		go func() {
			n, err := b.ReadBatch(msgs)
			done <- result{n, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("ReadBatch returned %d, %v with no datagram that fits", r.n, r.err)
		default:
		}
		_, err = a.WriteBatch([]Message{{Buf: []byte("fits"), N: 4, Addr: b.LocalAddr()}})
		require.NoError(t, err)
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n)
		require.Equal(t, "fits", string(msgs[0].Buf[:msgs[0].N]))
		require.Equal(t, uint64(1), b.Stats().Truncated)
	})
}

// TestPipeCloseDiscardsQueued: after Close, datagrams still queued are
// discarded; ReadBatch returns net.ErrClosed, never one of them.
func TestPipeCloseDiscardsQueued(t *testing.T) {
	for range 64 { // the queue and the close are both ready: no random pick
		a, b := NewPipe()
		_, err := a.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: b.LocalAddr()}})
		require.NoError(t, err)
		require.NoError(t, a.Close())
		n, err := b.ReadBatch(newMsgs(1, 10))
		require.ErrorIs(t, err, net.ErrClosed)
		require.Zero(t, n)
	}
}

// TestPipeUnroutableCountsAsSent: a datagram to an address that is not
// the peer's went out (as to a network that discards it) and is counted
// in PacketsSent and BytesSent as well as Unroutable.
func TestPipeUnroutableCountsAsSent(t *testing.T) {
	a, b := NewPipeWith(PipeOptions{AddrA: netip.MustParseAddrPort("[::ffff:10.0.0.1]:4791")})
	defer a.Close()
	require.Equal(t, netip.MustParseAddrPort("10.0.0.1:4791"), a.LocalAddr(), "v4-mapped is unmapped")
	n, err := a.WriteBatch([]Message{
		{Buf: []byte("lost"), N: 4, Addr: netip.MustParseAddrPort("127.0.0.9:4791")},
		{Buf: []byte("kept!"), N: 5, Addr: b.LocalAddr()},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	s := a.Stats()
	require.Equal(t, uint64(1), s.Unroutable)
	require.Equal(t, uint64(2), s.PacketsSent)
	require.Equal(t, uint64(9), s.BytesSent)
	got := readN(t, b, 1)
	require.Equal(t, netip.MustParseAddrPort("10.0.0.1:4791"), got[0].from)
}
