// Package rawudp measures the raw UDP baselines that gorxe's throughput and
// latency are compared with in benchmarks: batched datagrams over loopback
// through netdev.UDPConn, with and without UDP GSO/GRO, and a one-datagram
// ping-pong. It is a measurement helper for tests and benchmarks. Loopback
// may lose a datagram too: a PingPong round that does not complete within
// a second fails the run with ErrNoEcho instead of hanging it.
package rawudp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
)

// Config configures Measure.
type Config struct {
	// Size is the UDP payload of each datagram, in bytes (required).
	Size int
	// Count is the number of datagrams to send (required).
	Count int
	// Addr is the address both sockets bind to. Zero means 127.0.0.1.
	Addr netip.Addr
	// Options configures both sockets. The measurement always uses
	// blocking writes (a raw sender paced by its send buffer), whatever
	// netdev.Options.BlockingWrite says, and sets the offloads from GSO.
	Options netdev.Options
	// GSO sends with UDP GSO (runs of up to 64 KiB per buffer) and
	// receives with UDP GRO: the fastest way this machine moves UDP.
	// Without it every datagram is its own buffer on both sides (sendmmsg
	// and recvmmsg batches only).
	GSO bool
	// Idle is how long the receiver waits for more datagrams once the
	// sender has finished, before counting the rest as lost. Zero means
	// 200 ms. Until the first datagram has been received the wait is at
	// least firstIdle: on a loaded machine the receiving goroutine may not
	// have run yet, and the datagrams wait in its socket.
	Idle time.Duration
}

// Result is the outcome of Measure.
type Result struct {
	Size     int           // payload bytes per datagram
	Sent     uint64        // datagrams sent
	Received uint64        // datagrams received
	Elapsed  time.Duration // from the first send to the last datagram received
	Sender   netdev.Stats  // the sending socket's counters
	Receiver netdev.Stats  // the receiving socket's counters
}

// BytesPerSecond is the received payload rate.
func (r Result) BytesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Received) * float64(r.Size) / r.Elapsed.Seconds()
}

// PacketsPerSecond is the received datagram rate.
func (r Result) PacketsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Received) / r.Elapsed.Seconds()
}

// Loss is the fraction of sent datagrams that were not received.
func (r Result) Loss() float64 {
	if r.Sent == 0 {
		return 0
	}
	return 1 - float64(r.Received)/float64(r.Sent)
}

// Measure measures the raw UDP throughput of this machine: one
// goroutine sends cfg.Count datagrams of cfg.Size bytes in batches through a
// UDPConn to another UDPConn on the same host, where another goroutine
// receives them. It is the baseline that gorxe's RoCE throughput is compared
// with: run both in the same process and report the ratio.
//
// Local drops are sent again (they pace the sender; they are counted in
// Sender). Datagrams lost at the receiver are not: they show in Loss and in
// Receiver.RecvOverflows.
func Measure(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Size <= 0 || cfg.Count <= 0 {
		return Result{}, fmt.Errorf("rawudp: Measure: Size and Count must be positive (got %d, %d)", cfg.Size, cfg.Count)
	}
	if !cfg.Addr.IsValid() {
		cfg.Addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 200 * time.Millisecond
	}
	opts := cfg.Options
	opts.BlockingWrite = true
	opts.NoGSO, opts.NoGRO = !cfg.GSO, !cfg.GSO
	opts.RewriteIPv4ID = nil
	if cfg.GSO {
		opts.RewriteIPv4ID = keepPayload
	}
	rx, err := netdev.ListenUDP(netip.AddrPortFrom(cfg.Addr, 0), opts)
	if err != nil {
		return Result{}, err
	}
	defer rx.Close()
	tx, err := netdev.ListenUDP(netip.AddrPortFrom(cfg.Addr, 0), opts)
	if err != nil {
		return Result{}, err
	}
	defer tx.Close()

	var (
		received atomic.Uint64
		// lastRecv is when the last datagram was received, in
		// nanoseconds after base plus one (0: none yet): an integer
		// that follows the monotonic clock, as UnixNano does not.
		lastRecv atomic.Int64
		base     = time.Now()
		rxErr    error
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() { // receiver
		defer wg.Done()
		msgs := make([]netdev.Message, rx.BatchSize())
		for i := range msgs {
			msgs[i].Buf = make([]byte, cfg.Size)
		}
		for received.Load() < uint64(cfg.Count) {
			n, err := rx.ReadBatch(msgs)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) { // closed: the measurement is over
					rxErr = err
				}
				return
			}
			lastRecv.Store(int64(time.Since(base)) + 1)
			received.Add(uint64(n))
		}
	}()

	// Sender.
	msgs := make([]netdev.Message, tx.BatchSize())
	payload := make([]byte, cfg.Size)
	for i := range msgs {
		msgs[i] = netdev.Message{Buf: payload, N: cfg.Size, Addr: rx.LocalAddr()}
	}
	start := time.Now()
	var txErr error
	for sent := 0; sent < cfg.Count && txErr == nil; {
		if err := ctx.Err(); err != nil {
			txErr = err
			break
		}
		batch := msgs[:min(len(msgs), cfg.Count-sent)]
		n, err := tx.WriteBatch(batch)
		sent += n
		if err != nil && !errors.Is(err, netdev.ErrLocalDrop) {
			txErr = err
		}
	}

	// Wait for the receiver to finish, or to stay idle for cfg.Idle.
	if txErr != nil {
		rx.Close()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(cfg.Idle / 4)
	defer tick.Stop()
	lastCount, lastChange := received.Load(), time.Now()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			rx.Close()
			<-done
			break wait
		case now := <-tick.C:
			idle := cfg.Idle
			if lastCount == 0 {
				idle = max(idle, firstIdle)
			}
			if c := received.Load(); c != lastCount {
				lastCount, lastChange = c, now
			} else if now.Sub(lastChange) >= idle {
				rx.Close()
			}
		}
	}
	res := Result{
		Size:     cfg.Size,
		Sent:     tx.Stats().PacketsSent,
		Received: received.Load(),
		Sender:   tx.Stats(),
		Receiver: rx.Stats(),
	}
	if last := lastRecv.Load(); last != 0 {
		res.Elapsed = base.Add(time.Duration(last - 1)).Sub(start)
	}
	if txErr != nil {
		return res, txErr
	}
	if rxErr != nil {
		return res, rxErr
	}
	return res, ctx.Err()
}

// firstIdle is the shortest wait for the first datagram once the sender
// has finished (Config.Idle). A stress run of the whole test suite beside
// a busy loop once ended the wait after 200 ms with nothing received.
const firstIdle = 10 * time.Second

// keepPayload is the RewriteIPv4ID of the raw measurement: its payload does
// not depend on the IPv4 ID.
func keepPayload([]byte, uint16, uint16) {}
