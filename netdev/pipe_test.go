package netdev

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPipeAddresses(t *testing.T) {
	a, b := NewPipe()
	defer a.Close()
	require.Equal(t, DefaultPipeAddrA, a.LocalAddr())
	require.Equal(t, DefaultPipeAddrB, b.LocalAddr())
	require.Equal(t, DefaultBatchSize, a.BatchSize())

	x, y := NewPipeWith(PipeOptions{
		AddrA:     netip.MustParseAddrPort("[fd00::1]:4791"),
		AddrB:     netip.MustParseAddrPort("[::ffff:10.0.0.2]:5000"),
		BatchSize: 3,
	})
	defer x.Close()
	require.Equal(t, netip.MustParseAddrPort("[fd00::1]:4791"), x.LocalAddr())
	require.Equal(t, netip.MustParseAddrPort("10.0.0.2:5000"), y.LocalAddr(), "v4-mapped is unmapped")
	require.Equal(t, 3, y.BatchSize())
}

func TestPipeBothWays(t *testing.T) {
	tests := []struct {
		name  string
		batch int
		count int
	}{
		{"batch 1", 1, 10},
		{"batch 7", 7, 100},
		{"default batch", 0, 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NewPipeWith(PipeOptions{BatchSize: tc.batch})
			defer a.Close()
			for _, dir := range []struct {
				name     string
				from, to *PipeConn
			}{{"a->b", a, b}, {"b->a", b, a}} {
				msgs := make([]Message, tc.count)
				for i := range msgs {
					p := payload(i)
					msgs[i] = Message{Buf: p, N: len(p), Addr: dir.to.LocalAddr()}
				}
				n, err := dir.from.WriteBatch(msgs)
				require.NoError(t, err)
				require.Equal(t, tc.count, n)
				got := readN(t, dir.to, tc.count)
				for i, r := range got {
					require.Equal(t, payload(i), r.data, "%s datagram %d", dir.name, i)
					require.Equal(t, dir.from.LocalAddr(), r.from)
					require.Equal(t, dir.to.LocalAddr().Addr(), r.local)
					require.LessOrEqual(t, r.batchLength, dir.to.BatchSize())
				}
			}
			sa, sb := a.Stats(), b.Stats()
			require.Equal(t, uint64(tc.count), sa.PacketsSent)
			require.Equal(t, uint64(tc.count), sa.PacketsReceived)
			require.Equal(t, sa.BytesSent, sb.BytesReceived)
			require.Equal(t, sb.BytesSent, sa.BytesReceived)
		})
	}
}

func TestPipeCopiesOnWrite(t *testing.T) {
	a, b := NewPipe()
	defer a.Close()
	buf := []byte("first")
	msgs := []Message{{Buf: buf, N: len(buf), Addr: b.LocalAddr()}}
	_, err := a.WriteBatch(msgs)
	require.NoError(t, err)
	copy(buf, "XXXXX") // the sender reuses its buffer at once
	_, err = a.WriteBatch(msgs)
	require.NoError(t, err)
	got := readN(t, b, 2)
	require.Equal(t, "first", string(got[0].data))
	require.Equal(t, "XXXXX", string(got[1].data))
}

func TestPipeFullIsLocalDrop(t *testing.T) {
	a, b := NewPipeWith(PipeOptions{Depth: 4})
	defer a.Close()
	msgs := make([]Message, 6)
	for i := range msgs {
		msgs[i] = Message{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr()}
	}
	n, err := a.WriteBatch(msgs)
	require.Equal(t, 4, n)
	require.ErrorIs(t, err, ErrLocalDrop)
	require.ErrorIs(t, err, syscall.ENOBUFS)
	require.Equal(t, uint64(1), a.Stats().NoBufs)
	require.Equal(t, uint64(1), a.Stats().LocalDrops())

	// The caller retries the rest once the peer has read.
	require.Len(t, readN(t, b, 4), 4)
	n2, err := a.WriteBatch(msgs[n:])
	require.NoError(t, err)
	require.Equal(t, 2, n2)
	got := readN(t, b, 2)
	require.Equal(t, payload(4), got[0].data)
	require.Equal(t, payload(5), got[1].data)
}

func TestPipeUnroutableAndInvalid(t *testing.T) {
	a, b := NewPipe()
	defer a.Close()
	stranger := netip.MustParseAddrPort("127.0.0.9:4791")
	n, err := a.WriteBatch([]Message{
		{Buf: []byte("lost"), N: 4, Addr: stranger},
		{Buf: []byte("kept"), N: 4, Addr: netip.MustParseAddrPort("[::ffff:127.0.0.2]:4791")}, // b, v4-mapped
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, uint64(1), a.Stats().Unroutable)
	require.Equal(t, "kept", string(readN(t, b, 1)[0].data))

	for _, bad := range []Message{
		{Buf: []byte("x"), N: 2, Addr: b.LocalAddr()},
		{Buf: []byte("x"), N: -1, Addr: b.LocalAddr()},
		{Buf: []byte("x"), N: 1},
	} {
		n, err := a.WriteBatch([]Message{{Buf: []byte("ok"), N: 2, Addr: b.LocalAddr()}, bad})
		require.ErrorIs(t, err, ErrInvalidMessage)
		require.Equal(t, 1, n)
	}
}

func TestPipeTruncatedDropped(t *testing.T) {
	a, b := NewPipe()
	defer a.Close()
	_, err := a.WriteBatch([]Message{
		{Buf: make([]byte, 50), N: 50, Addr: b.LocalAddr()},
		{Buf: []byte("fits"), N: 4, Addr: b.LocalAddr()},
	})
	require.NoError(t, err)
	msgs := newMsgs(2, 10)
	n, err := b.ReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "fits", string(msgs[0].Buf[:msgs[0].N]))
	require.Equal(t, uint64(1), b.Stats().Truncated)
}

func TestPipeClose(t *testing.T) {
	for _, closer := range []string{"reader side", "other side"} {
		t.Run(closer, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := NewPipe()
				errc := make(chan error, 1)
				go func() {
					_, err := b.ReadBatch(newMsgs(4, 100))
					errc <- err
				}()
				synctest.Wait() // the reader is blocked
				select {
				case err := <-errc:
					t.Fatalf("ReadBatch returned early: %v", err)
				default:
				}
				if closer == "reader side" {
					require.NoError(t, b.Close())
				} else {
					require.NoError(t, a.Close())
				}
				require.ErrorIs(t, <-errc, net.ErrClosed)
				for _, c := range []*PipeConn{a, b} {
					_, err := c.ReadBatch(newMsgs(1, 10))
					require.ErrorIs(t, err, net.ErrClosed)
					n, err := c.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: DefaultPipeAddrB}})
					require.ErrorIs(t, err, net.ErrClosed)
					require.Zero(t, n)
					require.NoError(t, c.Close(), "closing twice")
				}
			})
		})
	}
}

// TestPipeSynctest runs a paced exchange in virtual time: a writer that
// blocks on a full queue (BlockWhenFull) and a reader that drains it once a
// second.
func TestPipeSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := NewPipeWith(PipeOptions{Depth: 8, BlockWhenFull: true, BatchSize: 8})
		defer a.Close()
		const total = 40
		start := time.Now()

		var wg sync.WaitGroup
		wg.Add(1)
		var wrote int
		var werr error
		go func() {
			defer wg.Done()
			msgs := make([]Message, total)
			for i := range msgs {
				msgs[i] = Message{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr()}
			}
			wrote, werr = a.WriteBatch(msgs)
		}()

		synctest.Wait() // the writer has filled the queue and is blocked
		require.Equal(t, uint64(8), a.Stats().PacketsSent)

		msgs := newMsgs(8, 2000)
		next := 0
		for next < total {
			time.Sleep(time.Second)
			n, err := b.ReadBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, 8, n, "a full queue is read in one batch")
			for _, m := range msgs[:n] {
				require.Equal(t, payload(next), m.Buf[:m.N])
				next++
			}
			synctest.Wait()
		}
		wg.Wait()
		require.NoError(t, werr)
		require.Equal(t, total, wrote)
		require.Equal(t, 5*time.Second, time.Since(start), "five reads a second apart")
		require.Zero(t, a.Stats().LocalDrops())
	})
}

// TestPipeBackPressureSynctest shows the drop-and-retry pattern a RoCE
// sender uses: on ErrLocalDrop, wait a little and send the rest again.
func TestPipeBackPressureSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := NewPipeWith(PipeOptions{Depth: 16})
		const total = 100
		readerDone := make(chan struct{})
		defer func() { a.Close(); <-readerDone }()
		go func() { // a slow reader: 16 datagrams every 10 ms
			defer close(readerDone)
			msgs := newMsgs(16, 2000)
			for {
				if _, err := b.ReadBatch(msgs); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		msgs := make([]Message, total)
		for i := range msgs {
			msgs[i] = Message{Buf: payload(i), N: len(payload(i)), Addr: b.LocalAddr()}
		}
		drops := 0
		for sent := 0; sent < total; {
			n, err := a.WriteBatch(msgs[sent:])
			sent += n
			if err != nil {
				require.ErrorIs(t, err, ErrLocalDrop)
				drops++
				time.Sleep(time.Millisecond)
			}
		}
		require.Equal(t, uint64(drops), a.Stats().NoBufs)
		require.Positive(t, drops)
		require.Equal(t, uint64(total), a.Stats().PacketsSent)
	})
}

func TestPipeConcurrentReadWrite(t *testing.T) {
	a, b := NewPipeWith(PipeOptions{BlockWhenFull: true, Depth: 32})
	defer a.Close()
	const total = 5000
	var wg sync.WaitGroup
	for _, dir := range []struct{ from, to *PipeConn }{{a, b}, {b, a}} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			msgs := make([]Message, 50)
			for sent := 0; sent < total; sent += len(msgs) {
				for i := range msgs {
					p := []byte(fmt.Sprint(sent + i))
					msgs[i] = Message{Buf: p, N: len(p), Addr: dir.to.LocalAddr()}
				}
				if _, err := dir.from.WriteBatch(msgs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			got := readN(t, dir.to, total)
			for i, r := range got {
				if string(r.data) != fmt.Sprint(i) {
					t.Errorf("datagram %d is %q", i, r.data)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPipeSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful with -race")
	}
	a, b := NewPipe()
	defer a.Close()
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, 1056), N: 1056, Addr: b.LocalAddr()}
	}
	rmsgs := newMsgs(64, 2048)
	round := func() {
		if _, err := a.WriteBatch(msgs); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 64; {
			n, err := b.ReadBatch(rmsgs)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	round()
	require.Zero(t, testing.AllocsPerRun(50, round))
}
