package rawudp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// PingPongResult is the outcome of PingPong: half round trips, in the
// terms perftest's latency tests use.
type PingPongResult struct {
	Size   int           // payload bytes per datagram
	Rounds int           // round trips measured
	Min    time.Duration // shortest half round trip
	Median time.Duration // t_typical
	Avg    time.Duration // t_avg
	P99    time.Duration // 99th percentile
}

// PingPong measures the UDP latency floor of this machine: two goroutines,
// each with its own loopback socket (net.UDPConn, blocking reads), bounce
// one datagram of size bytes back and forth, one outstanding at a time,
// rounds times after warm-up rounds. Each round trip is timed by the
// initiator; half of it is the one-way figure that perftest's latency tests
// report.
func PingPong(ctx context.Context, size, warmup, rounds int) (PingPongResult, error) {
	if size <= 0 || rounds <= 0 || warmup < 0 {
		return PingPongResult{}, fmt.Errorf("rawudp: PingPong: size and rounds must be positive (got %d, %d)", size, rounds)
	}
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return PingPongResult{}, err
	}
	defer a.Close()
	b, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return PingPongResult{}, err
	}
	defer b.Close()
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()

	echoErr := make(chan error, 1)
	go func() { // the responder: echo every datagram
		buf := make([]byte, size)
		for {
			n, from, err := b.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					err = nil
				}
				echoErr <- err
				return
			}
			if _, err := b.WriteToUDPAddrPort(buf[:n], from); err != nil {
				echoErr <- err
				return
			}
		}
	}()
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	msg, buf := make([]byte, size), make([]byte, size)
	rtts := make([]time.Duration, 0, min(rounds, maxPrealloc))
	for i := range warmup + rounds {
		if i%ctxCheckEvery == 0 && ctx.Err() != nil {
			return PingPongResult{}, ctx.Err()
		}
		t0 := time.Now()
		if _, err := a.WriteToUDPAddrPort(msg, to); err != nil {
			return PingPongResult{}, errors.Join(err, ctx.Err())
		}
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			return PingPongResult{}, errors.Join(err, ctx.Err())
		}
		if i >= warmup {
			rtts = append(rtts, time.Since(t0))
		}
	}
	b.Close()
	if err := <-echoErr; err != nil {
		return PingPongResult{}, err
	}
	slices.Sort(rtts)
	var sum time.Duration
	for _, d := range rtts {
		sum += d
	}
	return PingPongResult{
		Size:   size,
		Rounds: rounds,
		Min:    rtts[0] / 2,
		Median: rtts[len(rtts)/2] / 2,
		Avg:    sum / time.Duration(len(rtts)) / 2,
		P99:    rtts[len(rtts)*99/100] / 2,
	}, nil
}

// maxPrealloc bounds the round-trip times PingPong allocates up front: a
// caller that asks for 2^30 rounds and cancels (as TestPingPong does) must
// not have 8 GiB allocated first, which stalled the test for 40 s under
// the race detector.
const maxPrealloc = 1 << 16

// ctxCheckEvery is how many rounds pass between two looks at ctx; the
// sockets are also closed when ctx ends.
const ctxCheckEvery = 64
