package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
)

// TestSocketsDrawTheirOwnFaults: with one socket per completion vector
// (-q N spread over the vectors) each socket gets its own injector with
// the same --seed. Their probabilistic decisions must still be their own:
// with the same generator streams the k-th datagram of every socket meets
// the same fate, so the QPs of a -q run lose the same packets together
// (write-bw -q 2 --drop=0.02 drops PSN for PSN the same on both QPs)
// instead of 2% each, independently.
func TestSocketsDrawTheirOwnFaults(t *testing.T) {
	const n = 256
	r, err := faults.ParseRule("drop=0.5,dir=send")
	require.NoError(t, err)
	s := &session{o: &options{seed: 1, rules: []faults.Rule{r}}}
	var ends []netdev.Conn
	var conns []netdev.Conn
	for range 2 {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: n})
		conns = append(conns, a)
		ends = append(ends, b)
	}
	wrapped, err := s.wrapConns(conns)
	require.NoError(t, err)
	defer closeConns(wrapped)
	defer closeConns(ends)

	var kept [2][]int
	for k, c := range wrapped {
		msgs := make([]netdev.Message, n)
		for i := range msgs {
			buf := make([]byte, 64)
			buf[0], buf[1] = byte(i>>8), byte(i)
			msgs[i] = netdev.Message{Buf: buf, N: len(buf), Addr: netdev.DefaultPipeAddrB}
		}
		sent, err := c.WriteBatch(msgs)
		require.NoError(t, err)
		require.Equal(t, n, sent)
		in := make([]netdev.Message, n)
		for i := range in {
			in[i].Buf = make([]byte, 128)
		}
		for got := 0; got < int(conns[k].(*netdev.PipeConn).Stats().PacketsSent); {
			m, err := ends[k].ReadBatch(in)
			require.NoError(t, err)
			for _, msg := range in[:m] {
				kept[k] = append(kept[k], int(msg.Buf[0])<<8|int(msg.Buf[1]))
			}
			got += m
		}
	}
	require.NotEmpty(t, kept[0])
	require.NotEqual(t, kept[0], kept[1], "the two sockets dropped exactly the same datagrams")
}
