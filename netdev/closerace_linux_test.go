package netdev

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// errNotPollable stands for the error the Go runtime gives every
// RawConn.Read of a socket whose last event was EPOLLERR alone (read).
var errNotPollable = errors.New("not pollable")

// notPollable is a UDPConn's syscall.RawConn whose Read fails with
// errNotPollable until ended, then with net.ErrClosed.
type notPollable struct {
	syscall.RawConn
	ended atomic.Bool
}

func (r *notPollable) Read(func(fd uintptr) bool) error {
	if r.ended.Load() {
		return &net.OpError{Op: "raw-read", Net: "udp", Err: net.ErrClosed}
	}
	return errNotPollable
}

// TestReadClosingNotPollable: a read that Close overtakes while the
// runtime reports the socket not pollable (Close has marked the UDPConn
// closed and not yet closed the socket) ends at once with an error
// wrapping net.ErrClosed, as Conn.Close promises, through ReadBatch and
// ReadBatchGated (which then does not hold the gate).
func TestReadClosingNotPollable(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(c *UDPConn, g *Gate) (int, error)
	}{
		{"ReadBatch", func(c *UDPConn, _ *Gate) (int, error) { return c.ReadBatch(newMsgs(1, 64)) }},
		{"ReadBatchGated", func(c *UDPConn, g *Gate) (int, error) { return c.ReadBatchGated(newMsgs(1, 64), g) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t, lo4, Options{NoGRO: true})
			rc := &notPollable{RawConn: c.rc}
			c.rc = rc
			c.closed.Store(true) // Close has begun
			var g Gate
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := tc.read(c, &g)
				done <- result{n, err}
			}()
			select {
			case r := <-done:
				require.Zero(t, r.n)
				require.ErrorIs(t, r.err, net.ErrClosed)
				require.True(t, g.TryLock(), "the gate is free")
			case <-time.After(testutil.Bound()):
				rc.ended.Store(true)
				<-done
				t.Fatal("the read went on polling a socket being closed")
			}
		})
	}
}
