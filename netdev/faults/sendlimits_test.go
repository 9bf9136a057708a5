package faults_test

import (
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// refuser is a Conn that takes the first budget datagrams it is given and
// refuses every later one as a full qdisc does.
type refuser struct {
	recorder
	budget int
}

func (r *refuser) WriteBatch(m []netdev.Message) (int, error) {
	n := min(len(m), r.budget)
	r.budget -= n
	r.recorder.WriteBatch(m[:n])
	if n < len(m) {
		return n, netdev.DropError{Errno: syscall.ENOBUFS}
	}
	return n, nil
}

func (r *refuser) psns() []int {
	var out []int
	for _, b := range r.got {
		out = append(out, int(packet.BTH(b).PSN()))
	}
	return out
}

// TestWriteAfterClose: after Close, WriteBatch fails with an error
// wrapping net.ErrClosed (netdev.Conn) and decides nothing, even when its
// rules would have dropped every datagram without asking the inner Conn.
func TestWriteAfterClose(t *testing.T) {
	r := &recorder{}
	c := faults.Wrap(r, faults.Config{Rules: mustRules(t, "drop=1,dir=send")})
	require.NoError(t, c.Close())
	n, err := c.WriteBatch([]netdev.Message{message(roce(t, packet.RCSendOnly, 0))})
	require.True(t, isClosed(err), "%v", err)
	require.Zero(t, n)
	require.Zero(t, c.Stats().Send.Dropped)
}

// TestWriteInvalidMessage: a Message whose N is negative or beyond its
// buffer's capacity fails WriteBatch with netdev.ErrInvalidMessage; the
// datagrams before it went out and n counts them.
func TestWriteInvalidMessage(t *testing.T) {
	for _, badN := range []int{-1, 300} {
		r := &recorder{}
		c := faults.Wrap(r, faults.Config{Rules: mustRules(t, "drop=#100,dir=send")})
		msgs := []netdev.Message{message(roce(t, packet.RCSendFirst, 0)), message(roce(t, packet.RCSendMiddle, 1)),
			message(roce(t, packet.RCSendMiddle, 2)), message(roce(t, packet.RCSendLast, 3))}
		msgs[2].Buf = msgs[2].Buf[:len(msgs[2].Buf):len(msgs[2].Buf)]
		msgs[2].N = badN
		n, err := c.WriteBatch(msgs)
		require.ErrorIs(t, err, netdev.ErrInvalidMessage, "N = %d", badN)
		require.Equal(t, 2, n, "N = %d", badN)
		require.Len(t, r.got, 2, "N = %d", badN)
	}
}

// TestRefusedCopiesLost: a copy that no caller's datagram stands for (a
// duplicate's second copy, a delayed datagram its timer sends, a held one
// that finds the queue full when it is put back after a refusal) is lost
// when the inner Conn refuses it, as a network would lose it, and counted
// in Lost (DirStats); the caller's datagrams all went out, so WriteBatch
// reports no error.
func TestRefusedCopiesLost(t *testing.T) {
	tests := []struct {
		name   string
		cfg    faults.Config
		n      int // datagrams sent, in one WriteBatch
		budget int
		sent   []int // PSNs the inner Conn took
		st     faults.DirStats
	}{
		{"the second copy of a duplicate", faults.Config{Rules: mustRules(t, "dup=#1,dir=send")}, 1, 1,
			[]int{0}, faults.DirStats{Duplicated: 1, Lost: 1}},
		{"a delayed datagram", faults.Config{Rules: mustRules(t, "delay=#1,dir=send")}, 1, 0,
			nil, faults.DirStats{Delayed: 1, Lost: 1}},
		// The first held datagram, released by the second (held in its
		// turn, filling the queue), is refused and finds no room; the
		// second, sent by its timer 10 ms later, is refused too.
		{"a held datagram put back into a full queue", faults.Config{MaxQueue: 1, Rules: mustRules(t, "reorder=#1-2,dir=send")}, 2, 0,
			nil, faults.DirStats{Reordered: 2, Lost: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &refuser{budget: tc.budget}
				c := faults.Wrap(r, tc.cfg)
				defer c.Close()
				var msgs []netdev.Message
				for _, p := range alternating(t, tc.n) {
					msgs = append(msgs, message(p))
				}
				n, err := c.WriteBatch(msgs)
				require.NoError(t, err)
				require.Equal(t, tc.n, n)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, tc.sent, r.psns())
				require.Equal(t, tc.st, c.Stats().Send)
			})
		})
	}
}
