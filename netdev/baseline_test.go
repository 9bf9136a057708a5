package netdev

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMeasureRawUDP(t *testing.T) {
	res, err := MeasureRawUDP(context.Background(), RawUDPConfig{Size: 1056, Count: 2000})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	require.Equal(t, 1056, res.Size)
	require.Equal(t, uint64(2000), res.Sent)
	require.Positive(t, res.Received)
	require.LessOrEqual(t, res.Received, res.Sent)
	require.Positive(t, res.Elapsed)
	require.Positive(t, res.BytesPerSecond())
	require.InDelta(t, res.PacketsPerSecond()*1056, res.BytesPerSecond(), 1)
	require.InDelta(t, 1-float64(res.Received)/2000, res.Loss(), 1e-9)
	require.Equal(t, res.Received, res.Receiver.PacketsReceived)
	t.Logf("%.2f Gbit/s, %.3f Mpps, loss %.2f%%", res.BytesPerSecond()*8/1e9, res.PacketsPerSecond()/1e6, 100*res.Loss())

	for _, bad := range []RawUDPConfig{{Size: 0, Count: 1}, {Size: 1, Count: 0}} {
		_, err := MeasureRawUDP(context.Background(), bad)
		require.Error(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = MeasureRawUDP(ctx, RawUDPConfig{Size: 100, Count: 1 << 30, Idle: time.Millisecond})
	require.ErrorIs(t, err, context.Canceled)

	require.Zero(t, RawUDPResult{}.BytesPerSecond())
	require.Zero(t, RawUDPResult{}.PacketsPerSecond())
	require.Zero(t, RawUDPResult{}.Loss())
}

// BenchmarkUDPLoopback measures raw batched UDP over loopback: one goroutine
// sends b.N datagrams with WriteBatch (sendmmsg, batch 64), another receives
// them with ReadBatch (recvmmsg). MB/s counts datagrams sent; Mpps and
// Gbit/s count datagrams received (the baseline for RoCE ratios).
func BenchmarkUDPLoopback(b *testing.B) {
	for _, size := range []int{1056, 4128} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			res, err := MeasureRawUDP(context.Background(), RawUDPConfig{Size: size, Count: b.N})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.PacketsPerSecond()/1e6, "Mpps")
			b.ReportMetric(res.BytesPerSecond()*8/1e9, "Gbit/s")
			b.ReportMetric(100*res.Loss(), "loss%")
		})
	}
}

// BenchmarkUDPBatchAllocs is one WriteBatch of 64 datagrams and the
// ReadBatch calls that receive them, in one goroutine: its allocs/op are the
// allocations per 64-datagram read (writes allocate nothing).
func BenchmarkUDPBatchAllocs(b *testing.B) {
	rx := listen(b, lo4, Options{})
	tx := listen(b, lo4, Options{})
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, 1056), N: 1056, Addr: rx.LocalAddr()}
	}
	rmsgs := newMsgs(64, 2048)
	b.SetBytes(64 * 1056)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tx.WriteBatch(msgs); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 64; {
			n, err := rx.ReadBatch(rmsgs)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
}

// BenchmarkPipe measures the in-memory pipe with 1056 B datagrams, batch 64,
// a writer and a reader goroutine.
func BenchmarkPipe(b *testing.B) {
	const size = 1056
	a, p := NewPipeWith(PipeOptions{BlockWhenFull: true})
	defer a.Close()
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, size), N: size, Addr: p.LocalAddr()}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	done := make(chan error, 1)
	go func() {
		rmsgs := newMsgs(64, 2048)
		for got := 0; got < b.N; {
			n, err := p.ReadBatch(rmsgs)
			if err != nil {
				done <- err
				return
			}
			got += n
		}
		done <- nil
	}()
	start := time.Now()
	for sent := 0; sent < b.N; {
		n, err := a.WriteBatch(msgs[:min(len(msgs), b.N-sent)])
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds()/1e6, "Mpps")
}
