package netdev

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// sharedReaders is a blocking reader (ReadBatchGated) and a polling one
// (TryReadBatch) of one UDPConn, recording the sequence numbers of what
// they read under the gate.
type sharedReaders struct {
	c    *UDPConn
	gate Gate
	mu   sync.Mutex // guards seq and by for the test's own looks
	seq  []uint32   // under gate, in the order handled
	by   [2]int     // datagrams read: [0] blocking, [1] polling
}

func (s *sharedReaders) record(msgs []Message, n, who int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs[:n] {
		s.seq = append(s.seq, binary.BigEndian.Uint32(m.Buf[:m.N]))
	}
	s.by[who] += n
}

func (s *sharedReaders) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seq)
}

func (s *sharedReaders) polled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[1]
}

// unlock unlocks the gate; when Unlock takes it back, it reads and records
// until the socket is empty, as Gate.Unlock asks.
func (s *sharedReaders) unlock(msgs []Message, who int) error {
	for s.gate.Unlock() {
		for {
			n, err := s.c.TryReadBatch(msgs)
			if err != nil {
				s.gate.Release()
				return err
			}
			if n == 0 {
				break
			}
			s.record(msgs, n, who)
		}
	}
	return nil
}

// blocking reads with ReadBatchGated until the conn is closed, and sends
// the error that ended it.
func (s *sharedReaders) blocking(done chan<- error) {
	msgs := newMsgs(4, 2048)
	for {
		n, err := s.c.ReadBatchGated(msgs, &s.gate)
		if err != nil {
			done <- err
			return
		}
		s.record(msgs, n, 0)
		if err := s.unlock(msgs, 0); err != nil {
			done <- err
			return
		}
	}
}

// polling reads with TryReadBatch whenever the gate is free, until stop.
func (s *sharedReaders) polling(stop <-chan struct{}, done chan<- error) {
	msgs := newMsgs(3, 2048)
	for {
		select {
		case <-stop:
			done <- nil
			return
		default:
		}
		if !s.gate.TryLock() {
			runtime.Gosched()
			continue
		}
		n, err := s.c.TryReadBatch(msgs)
		if err == nil {
			s.record(msgs, n, 1)
			err = s.unlock(msgs, 1)
		} else {
			s.gate.Release()
		}
		if err != nil {
			done <- err
			return
		}
	}
}

// TestSharedReader checks that a blocking and a polling reader of one
// socket, with and without UDP GRO (small batches, so coalesced buffers are
// split over several reads, by either reader), read every datagram exactly
// once and handle them in the order they were sent, that both read some,
// and that the blocking reader takes everything once the poller stops.
func TestSharedReader(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			// A rewrite hook turns on GSO for IPv4, so bursts arrive
			// coalesced when the receiver has GRO.
			tx := listen(t, lo4, Options{RewriteIPv4ID: func([]byte, uint16, uint16) {}})
			s := &sharedReaders{c: listen(t, lo4, Options{NoGRO: !gro})}
			blockDone, pollDone, stop := make(chan error, 1), make(chan error, 1), make(chan struct{})
			go s.blocking(blockDone)
			go s.polling(stop, pollDone)

			const total, burst = 3000, 20
			ms := newMsgs(burst, 1000)
			stopped := false
			for sent := 0; sent < total; sent += burst {
				if !stopped && sent >= total/2 && s.polled() > 0 {
					close(stop)
					require.NoError(t, <-pollDone)
					stopped = true
				}
				for i := range ms {
					binary.BigEndian.PutUint32(ms[i].Buf, uint32(sent+i))
					ms[i].N, ms[i].Addr = 1000, s.c.LocalAddr()
				}
				n, err := tx.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, burst, n)
				deadline := time.Now().Add(10 * time.Second)
				for s.count() < sent+burst {
					require.True(t, time.Now().Before(deadline), "%d of %d datagrams read", s.count(), sent+burst)
					time.Sleep(20 * time.Microsecond)
				}
			}
			require.True(t, stopped, "the poller read nothing in %d datagrams", total/2)
			s.c.Close()
			require.ErrorIs(t, <-blockDone, net.ErrClosed)

			want := make([]uint32, total)
			for i := range want {
				want[i] = uint32(i)
			}
			require.Equal(t, want, s.seq)
			require.Positive(t, s.by[0], "blocking reader")
			require.Positive(t, s.by[1], "polling reader")
			if gro {
				require.Positive(t, s.c.Stats().GROBuffers)
			}
			require.Zero(t, s.c.Stats().RecvOverflows)
		})
	}
}

// TestTryReadBatchEmptyAndClosed checks that TryReadBatch returns at once
// on an empty socket and fails on a closed one.
func TestTryReadBatchEmptyAndClosed(t *testing.T) {
	c := listen(t, lo4, Options{})
	msgs := newMsgs(2, 2048)
	n, err := c.TryReadBatch(msgs)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = c.TryReadBatch(nil)
	require.NoError(t, err)
	require.Zero(t, n)
	c.Close()
	_, err = c.TryReadBatch(msgs)
	require.ErrorIs(t, err, net.ErrClosed)
	var gate Gate
	_, err = c.ReadBatchGated(msgs, &gate)
	require.ErrorIs(t, err, net.ErrClosed)
	require.True(t, gate.TryLock(), "ReadBatchGated failed holding the gate")
}

// TestGateHandBack checks the gate's rule against lost datagrams: a
// blocking reader that finds the gate held records the miss and leaves,
// and the holder's Unlock takes the gate back (once) so that the holder
// reads what the reader left; without a miss Unlock just unlocks.
func TestGateHandBack(t *testing.T) {
	var g Gate
	require.True(t, g.TryLock())
	require.False(t, g.Unlock(), "no miss: plain unlock")
	require.True(t, g.TryLock())
	require.False(t, g.take(), "held: the blocking reader is turned away")
	require.True(t, g.Unlock(), "the miss is handed back to the holder")
	require.False(t, g.TryLock(), "the holder has the gate again")
	require.False(t, g.Unlock(), "the miss was served")
	require.True(t, g.take(), "free: the blocking reader takes it")
	g.Release()
	require.True(t, g.TryLock())
	require.False(t, g.take(), "held: a miss is recorded")
	g.Release()
	require.True(t, g.TryLock(), "Release serves the miss (retaken) and unlocks again: the gate is free")
	require.False(t, g.Unlock(), "the miss was served")
}

// TestTryReadBatchPastTruncated: TryReadBatch returns 0 only when no
// datagram is there, so a datagram behind a truncated one (dropped) is
// returned by the same call, not left for a next arrival. Both are queued
// before it reads.
func TestTryReadBatchPastTruncated(t *testing.T) {
	rx := listen(t, lo4, Options{NoGRO: true}) // with GRO the Conn's own 64 KiB buffers receive
	tx := listen(t, lo4, Options{})
	out := []Message{
		{Buf: make([]byte, 200), N: 200, Addr: rx.LocalAddr()},
		{Buf: []byte("fits"), N: 4, Addr: rx.LocalAddr()},
	}
	testutil.SendQueued(t, rx.LocalAddr(), len(out), func(i int) {
		_, err := tx.WriteBatch(out[i : i+1])
		require.NoError(t, err)
	})
	msgs := newMsgs(1, 10)
	n, err := rx.TryReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "fits", string(msgs[0].Buf[:msgs[0].N]))
	require.Equal(t, uint64(1), rx.Stats().Truncated)
	n, err = rx.TryReadBatch(msgs)
	require.NoError(t, err)
	require.Zero(t, n)
}
