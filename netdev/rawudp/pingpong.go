package rawudp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
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
//
// A round whose datagram or echo is lost does not hang it: when no round
// completes for lostAfter (1 s), PingPong fails with ErrNoEcho. An echo
// that fails to send ends the run with its error.
func PingPong(ctx context.Context, size, warmup, rounds int) (PingPongResult, error) {
	return pingPong(ctx, size, warmup, rounds, lostAfter, nil)
}

// ErrNoEcho is PingPong's error when a round trip did not complete within
// a second: a datagram or its echo was lost.
var ErrNoEcho = errors.New("rawudp: PingPong: no echo within the loss timeout (a datagram was lost)")

// lostAfter is how long PingPong waits for a round to complete.
const lostAfter = time.Second

// pingPong is PingPong with the loss timeout and, for tests, a filter on
// the echo: drop(i) true makes the responder skip its i-th echo (from 0).
func pingPong(ctx context.Context, size, warmup, rounds int, lost time.Duration, drop func(int) bool) (PingPongResult, error) {
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
		for i := 0; ; i++ {
			n, from, err := b.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					err = nil
				}
				echoErr <- err
				return
			}
			if drop != nil && drop(i) {
				continue
			}
			if _, err := b.WriteToUDPAddrPort(buf[:n], from); err != nil {
				echoErr <- err
				a.Close() // the initiator's read ends; it reports err
				return
			}
		}
	}()
	// The watchdog closes both sockets when no round completes for lost.
	var done atomic.Uint64
	var noEcho atomic.Bool
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		t := time.NewTicker(lost)
		defer t.Stop()
		last := done.Load()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if now := done.Load(); now != last {
				last = now
				continue
			}
			noEcho.Store(true)
			a.Close()
			b.Close()
			return
		}
	}()
	// failed is the error of a failed round: the echo's, the loss
	// timeout's, or the socket's joined with ctx's.
	failed := func(err error) error {
		select {
		case e := <-echoErr:
			if e != nil {
				return e
			}
		default:
		}
		if noEcho.Load() {
			return ErrNoEcho
		}
		return errors.Join(err, ctx.Err())
	}
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	msg, buf := make([]byte, size), make([]byte, size)
	rtts := make([]time.Duration, 0, min(rounds, maxPrealloc))
	for i := range warmup + rounds {
		if i%ctxCheckEvery == 0 && ctx.Err() != nil {
			return PingPongResult{}, ctx.Err()
		}
		t0 := time.Now()
		if _, err := a.WriteToUDPAddrPort(msg, to); err != nil {
			return PingPongResult{}, failed(err)
		}
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			return PingPongResult{}, failed(err)
		}
		done.Add(1)
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

// HopOneGoroutine measures the processor cost of one UDP hop on this
// machine: one goroutine sends a datagram of size bytes from one loopback
// socket to another (127.0.0.1 to 127.0.0.2), reads it there, sends it
// back and reads it again, rounds times after warmup rounds. A loopback
// send has queued the datagram at the receiving socket when it returns,
// so no read waits and no goroutine is woken: the figure is the kernel's
// send and receive paths and Go's socket calls. It returns the time of
// half a round trip (one hop), the counterpart of rxe's
// BenchmarkHopOneGoroutine.
func HopOneGoroutine(size, warmup, rounds int) (time.Duration, error) {
	if size <= 0 || rounds <= 0 || warmup < 0 {
		return 0, fmt.Errorf("rawudp: HopOneGoroutine: size and rounds must be positive (got %d, %d)", size, rounds)
	}
	var conns [2]*net.UDPConn
	var addrs [2]netip.AddrPort
	for i, s := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s)))
		if err != nil {
			return 0, err
		}
		defer c.Close()
		// A datagram lost on loopback would block the read for good.
		if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			return 0, err
		}
		conns[i], addrs[i] = c, c.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	msg, buf := make([]byte, size), make([]byte, size+1)
	hop := func(from, to int) error {
		if _, err := conns[from].WriteToUDPAddrPort(msg, addrs[to]); err != nil {
			return err
		}
		n, _, err := conns[to].ReadFromUDPAddrPort(buf)
		if err == nil && n != size {
			err = fmt.Errorf("rawudp: HopOneGoroutine: read %d bytes, sent %d", n, size)
		}
		return err
	}
	var start time.Time
	for i := range warmup + rounds {
		if i == warmup {
			start = time.Now()
		}
		if err := hop(0, 1); err != nil {
			return 0, err
		}
		if err := hop(1, 0); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(2*rounds), nil
}
