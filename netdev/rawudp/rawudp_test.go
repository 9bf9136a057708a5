package rawudp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMeasure(t *testing.T) {
	res, err := Measure(context.Background(), Config{Size: 1056, Count: 2000})
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

	for _, bad := range []Config{{Size: 0, Count: 1}, {Size: 1, Count: 0}} {
		_, err := Measure(context.Background(), bad)
		require.Error(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Measure(ctx, Config{Size: 100, Count: 1 << 30, Idle: time.Millisecond})
	require.ErrorIs(t, err, context.Canceled)

	require.Zero(t, Result{}.BytesPerSecond())
	require.Zero(t, Result{}.PacketsPerSecond())
	require.Zero(t, Result{}.Loss())
}

// BenchmarkUDPLoopback measures raw batched UDP over loopback: one goroutine
// sends b.N datagrams with WriteBatch (sendmmsg, batch 64), another receives
// them with ReadBatch (recvmmsg). MB/s counts datagrams sent; Mpps and
// Gbit/s count datagrams received (the baseline for RoCE ratios).
func BenchmarkUDPLoopback(b *testing.B) {
	for _, size := range []int{1056, 4128} {
		for _, gso := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/gso=%v", size, gso), func(b *testing.B) {
				benchLoopback(b, size, gso)
			})
		}
	}
}

// benchLoopback is one BenchmarkUDPLoopback case; gso adds UDP GSO on
// send and GRO on receive.
func benchLoopback(b *testing.B, size int, gso bool) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	res, err := Measure(context.Background(), Config{Size: size, Count: b.N, GSO: gso})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.PacketsPerSecond()/1e6, "Mpps")
	b.ReportMetric(res.BytesPerSecond()*8/1e9, "Gbit/s")
	b.ReportMetric(100*res.Loss(), "loss%")
}

func TestMeasureGSO(t *testing.T) {
	res, err := Measure(context.Background(), Config{Size: 4128, Count: 3000, GSO: true})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	require.Equal(t, uint64(3000), res.Sent)
	require.Positive(t, res.Sender.GSOBuffers, "the sender coalesced")
	require.Less(t, res.Sender.GSOBuffers, uint64(3000))
	t.Logf("GSO+GRO: %.2f Gbit/s, %.3f Mpps, loss %.2f%%, %d GSO buffers, %d GRO buffers",
		res.BytesPerSecond()*8/1e9, res.PacketsPerSecond()/1e6, 100*res.Loss(), res.Sender.GSOBuffers, res.Receiver.GROBuffers)
}

func TestPingPong(t *testing.T) {
	res, err := PingPong(context.Background(), 2, 10, 200)
	require.NoError(t, err)
	require.Equal(t, 200, res.Rounds)
	require.Positive(t, res.Min)
	require.LessOrEqual(t, res.Min, res.Median)
	require.LessOrEqual(t, res.Median, res.P99)
	require.Positive(t, res.Avg)
	t.Logf("half round trip: min %v, typical %v, avg %v, 99%% %v", res.Min, res.Median, res.Avg, res.P99)

	_, err = PingPong(context.Background(), 0, 0, 1)
	require.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = PingPong(ctx, 2, 0, 1<<30)
	require.Error(t, err)
}

// TestHopOneGoroutine: a hop on one goroutine takes some time, and
// arguments that measure nothing are refused.
func TestHopOneGoroutine(t *testing.T) {
	hop, err := HopOneGoroutine(2, 10, 200)
	require.NoError(t, err)
	require.Positive(t, hop)
	t.Logf("hop on one goroutine: %v", hop)
	_, err = HopOneGoroutine(0, 0, 1)
	require.Error(t, err)
	_, err = HopOneGoroutine(2, 0, 0)
	require.Error(t, err)
}

// TestPingPongLostEcho: a round whose echo is lost ends the run with
// ErrNoEcho after the loss timeout instead of blocking for ever.
func TestPingPongLostEcho(t *testing.T) {
	for _, at := range []int{0, 5} {
		start := time.Now()
		_, err := pingPong(context.Background(), 2, 2, 100, 50*time.Millisecond, func(i int) bool { return i == at })
		require.ErrorIs(t, err, ErrNoEcho, "echo %d lost", at)
		require.Less(t, time.Since(start), 5*time.Second)
	}
}

// BenchmarkPingPong reports the raw UDP half round trip of 2-byte
// datagrams (the floor for send-lat and write-lat's t_typical).
func BenchmarkPingPong(b *testing.B) {
	res, err := PingPong(context.Background(), 2, 100, max(b.N, 100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(res.Median.Nanoseconds())/1e3, "t_typical-µs")
	b.ReportMetric(float64(res.Avg.Nanoseconds())/1e3, "t_avg-µs")
}
