package pcapdump_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
)

// TestShare checks two Conns recording into one file (Conn.Share): one
// file header, every datagram of both in the order written, shared
// counters, and the capture going on after the first of them closes until
// the second does.
func TestShare(t *testing.T) {
	a1, b1 := netdev.NewPipe()
	a2, b2 := netdev.NewPipe()
	defer b1.Close()
	defer b2.Close()
	var buf bytes.Buffer
	p1, err := pcapdump.Wrap(a1, &buf, pcapdump.Options{})
	require.NoError(t, err)
	p2 := p1.Share(a2)
	send := func(c netdev.Conn, to netdev.Conn, psn int) {
		p := build(t, c.LocalAddr(), to.LocalAddr(), psn, gorxeKind)
		n, err := c.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: to.LocalAddr()}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	send(p1, b1, 0)
	send(p2, b2, 1)
	send(p1, b1, 2)
	require.NoError(t, p1.Close())
	send(p2, b2, 3)
	require.NoError(t, p2.Close())
	late := build(t, p2.LocalAddr(), b2.LocalAddr(), 4, gorxeKind)
	_, err = p2.WriteBatch([]netdev.Message{{Buf: late, N: len(late), Addr: b2.LocalAddr()}})
	require.Error(t, err, "closed")
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, 4)
	for i, r := range recs {
		require.Equal(t, i, r.psn)
		require.True(t, r.sent)
	}
	require.Equal(t, uint64(4), p1.Stats().Sent)
	require.Equal(t, p1.Stats(), p2.Stats())
	require.NoError(t, p2.Err())
}
