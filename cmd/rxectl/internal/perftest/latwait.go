package perftest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/rxe"
)

// spinners counts the goroutines of this process in busyPoll. At most
// GOMAXPROCS-1 spin at once (with --loopback both ends run in this
// process, and on a two-CPU machine only one of them spins), so that
// spinning never keeps every processor from reading the network for long.
// It reserves no processor: a spinner that yields goes to the global run
// queue, from which the other processor may take it.
var spinners atomic.Int32

// latCheckEvery is how many empty polls pass between two looks at the
// clock and at ctx.
const latCheckEvery = 32

// stall is a latency test's bound on one wait for the peer.
func (s *session) stall() time.Duration {
	if s.latStall > 0 {
		return s.latStall
	}
	return stallTimeout
}

// spinPoll waits for one completion on cq. With --busy-poll D it first
// spins on CQ.Poll for up to D (as perftest spins on ibv_poll_cq), then
// sleeps in CQ.Wait; with -e it sleeps on the completion channel
// (waitCQ). It gives up with an error after the stall bound without a
// completion, or when ctx is done.
//
// Spinning is off by default: the Go runtime polls the network only from
// an idle processor (or every 10 ms from sysmon), and each empty poll
// yields the processor (runtime.Gosched) to the device's goroutines, but
// on a small or loaded machine the spinning thread still takes CPU time
// from the threads that move the packets (docs/performance.md, "Latency:
// busy-polling the CQ", has the figures).
func (s *session) spinPoll(ctx context.Context, cq *rxe.CQ, wc []rxe.WC, what string) error {
	bound := s.stall()
	spin := min(s.o.busyPoll, bound) // the spin counts against the bound
	if s.ch == nil && spin > 0 && busyPoll(ctx, cq, wc[:1], spin) == 1 {
		return s.checkWC(wc[0])
	}
	wctx, cancel := context.WithTimeout(ctx, bound-spin)
	defer cancel()
	n, err := s.waitCQ(wctx, cq, wc[:1])
	if n == 1 {
		return s.checkWC(wc[0])
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted while waiting for %s", what)
	}
	return fmt.Errorf("nothing for %v while waiting for %s: the peer stopped (%v)", bound, what, err)
}

// busyPoll polls cq until it returns completions, spin has passed or ctx
// is done, yielding the processor after each empty poll; it returns how
// many completions it moved into wcs (0: none within spin).
func busyPoll(ctx context.Context, cq *rxe.CQ, wcs []rxe.WC, spin time.Duration) int {
	if n := cq.Poll(wcs); n > 0 {
		return n
	}
	defer spinners.Add(-1)
	if int(spinners.Add(1)) >= runtime.GOMAXPROCS(0) {
		return 0
	}
	end := time.Now().Add(spin)
	for i := 1; ; i++ {
		runtime.Gosched()
		if n := cq.Poll(wcs); n > 0 {
			return n
		}
		if i%latCheckEvery == 0 && (!time.Now().Before(end) || ctx.Err() != nil) {
			return 0
		}
	}
}
