package perftest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/rxe"
)

// latSpin is how long a latency test busy-polls its CQ for one completion
// before it sleeps in CQ.Wait. perftest spins on ibv_poll_cq for as long as
// it takes; here each empty poll yields the processor (runtime.Gosched),
// so the device's transmit and receive goroutines still run, and the spin
// is bounded because the Go runtime polls the network only from an idle
// processor (or every 10 ms from sysmon): with both ends of --loopback
// spinning on a two-CPU machine no processor is idle, and the packet that
// would complete the wait lies unread until the spin ends.
const latSpin = 20 * time.Microsecond

// spinners counts the goroutines of this process in busyPoll. At most
// GOMAXPROCS-1 spin at once, so that a processor stays free to poll the
// network and run the device's goroutines (with --loopback both ends run
// in this process, and on a two-CPU machine only one of them spins).
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

// spinPoll waits for one completion on cq. Without -e it busy-polls the
// CQ for up to latSpin (as perftest spins on ibv_poll_cq), then sleeps in
// CQ.Wait; with -e it sleeps on the completion channel (waitCQ). Either
// way it gives up with an error after the stall bound without a
// completion, or when ctx is done.
func (s *session) spinPoll(ctx context.Context, cq *rxe.CQ, wc []rxe.WC, what string) error {
	if s.ch == nil && busyPoll(ctx, cq, wc[:1], latSpin) == 1 {
		return s.checkWC(wc[0])
	}
	bound := s.stall()
	wctx, cancel := context.WithTimeout(ctx, bound)
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
