package rxe

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// burstConn hands its reader datagrams in batches of at least min, as a
// socket that recvmmsg reads after a burst has queued: each ReadBatch waits
// until that many have arrived, or for at most burstWait after the first
// (a recovery probe sent on a loaded machine adds a datagram, after which
// a batch of min would wait for datagrams that never come). It records the
// PSNs of the ACKs it sends.
type burstConn struct {
	netdev.Conn
	min int

	start sync.Once
	in    chan netdev.Message // datagrams read from Conn, in buffers of their own
	errc  chan error

	mu    sync.Mutex
	acks  []packet.PSN
	other []string // what else it sent
}

// burstWait bounds how long a burstConn batch waits for its min datagrams.
const burstWait = 200 * time.Millisecond

func (c *burstConn) WriteBatch(msgs []netdev.Message) (int, error) {
	c.mu.Lock()
	for _, m := range msgs {
		p, err := packet.Parse(m.Buf[:m.N])
		switch {
		case err == nil && p.Opcode() == packet.RCAcknowledge && p.AETH().Syndrome().IsACK():
			c.acks = append(c.acks, p.PSN())
		case err == nil:
			c.other = append(c.other, fmt.Sprintf("%v PSN %d", p.Opcode(), p.PSN()))
		default:
			c.other = append(c.other, err.Error())
		}
	}
	c.mu.Unlock()
	return c.Conn.WriteBatch(msgs)
}

// sent returns the ACK PSNs and the other packets sent since the last call.
func (c *burstConn) sent() ([]packet.PSN, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	acks, other := c.acks, c.other
	c.acks, c.other = nil, nil
	return acks, other
}

// pump reads Conn into c.in until Conn fails (it is closed).
func (c *burstConn) pump() {
	msgs := make([]netdev.Message, c.Conn.BatchSize())
	for {
		for i := range msgs {
			msgs[i].Buf = make([]byte, 1<<16)
		}
		n, err := c.Conn.ReadBatch(msgs)
		if err != nil {
			c.errc <- err
			return
		}
		for _, m := range msgs[:n] {
			c.in <- m
		}
	}
}

func (c *burstConn) ReadBatch(msgs []netdev.Message) (int, error) {
	c.start.Do(func() {
		c.in, c.errc = make(chan netdev.Message, 4096), make(chan error, 1)
		go c.pump()
	})
	put := func(n int, m netdev.Message) {
		msgs[n].N = copy(msgs[n].Buf[:cap(msgs[n].Buf)], m.Buf[:m.N])
		msgs[n].Addr, msgs[n].Local = m.Addr, m.Local
	}
	select {
	case m := <-c.in:
		put(0, m)
	case err := <-c.errc:
		c.errc <- err // for the next call
		return 0, err
	}
	n := 1
	limit := min(c.min, len(msgs))
	wait := time.NewTimer(burstWait)
	defer wait.Stop()
	for n < limit {
		select {
		case m := <-c.in:
			put(n, m)
			n++
		case <-wait.C:
			return n, nil
		}
	}
	return n, nil
}

// TestACKWithinBatch: two 64 KiB WRITEs, each asking for an ACK with its
// last packet, reach the responder's device in one batch of 32 datagrams.
// The receive goroutine runs a transmit pass after the first 64 KiB of the
// batch (connReader.dispatch, flushBytes), so the first WRITE's ACK leaves
// before the second WRITE is handled: two ACKs, where one transmit pass
// at the end of the batch would have sent one coalesced ACK and the
// requester would have heard nothing until its whole burst was handled.
func TestACKWithinBatch(t *testing.T) {
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	const pkts = 32
	bc := &burstConn{Conn: cb, min: pkts}
	da, db := openPairWith(t, ca, bc, Options{LinkMTU: 9000, CompVectors: 1}, "burst-a", "burst-b")
	a, b := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
	ia, ib := a.qp.Info(1000), b.qp.Info(2000)
	require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096}))
	require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU4096}))
	fill(a.buf, 5)

	// The receive goroutine's pass can find the transmit path busy (the
	// transmit goroutine in a pass of its own), and the first ACK then
	// waits for that goroutine and may coalesce with the second; on a
	// loaded machine a recovery probe may draw another ACK. So count the
	// rounds, of five, in which the first WRITE's own ACK (the PSN of its
	// last packet) left. Without the pass within the batch there are none.
	const size, rounds = 64 << 10, 5
	own := 0
	for r := range rounds {
		bc.sent()
		first := packet.PSN(ia.PSN).Add(r * pkts)
		for i := range 2 {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGList: []SGE{a.mr.SGE(i*size, size)}, RemoteAddr: b.mr.Addr() + uint64(i*size), RKey: b.mr.RKey()})
			require.NoError(t, err)
		}
		for range 2 {
			wc := waitWC(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status)
		}
		syncMem(a, b)
		require.Equal(t, a.buf[:2*size], b.buf[:2*size], "round %d: the WRITEs landed", r)
		acks, other := bc.sent()
		t.Logf("round %d: ACKs for PSN %v (the WRITEs end at %d and %d); also sent: %v", r, acks, first.Add(pkts/2-1), first.Add(pkts-1), other)
		for _, p := range acks {
			if p == first.Add(pkts/2-1) {
				own++
				break
			}
		}
	}
	require.Positive(t, own, "the first WRITE's ACK never left before the second WRITE was handled")
}

// burstPair returns two connected ends on devices of one vector whose
// second receives its first msgs datagrams in one batch (burstConn), with
// msgs 64-byte receives posted there. Call it inside a synctest bubble;
// the devices close at the end of the test.
func burstPair(t *testing.T, msgs int) (a, b *end) {
	t.Helper()
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	da, db := openPairWith(t, ca, &burstConn{Conn: cb, min: msgs}, Options{CompVectors: 1}, "wake-a", "wake-b")
	a, b = newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
	connectVirtual(t, a, b)
	for i := range msgs {
		_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(i*64, 64)}})
		require.NoError(t, err)
	}
	return a, b
}

// TestCQWakeOncePerBatch: eight SENDs reach the responder's device in one
// batch while a goroutine sleeps in CQ.Wait on its receive CQ
// (synctest.Wait makes sure it sleeps before the SENDs go). The wake-up
// that endBatch sends for the batch reaches it, and its first Wait returns
// all eight completions: a wake-up lost between CQ.wakeWaiter and endBatch
// would leave it asleep and fail the test. That the wake-up waits for the
// end of the batch is checked by TestCQWakeAfterBatch; an immediate wake
// passes this test too, since the batch is handled before the woken
// goroutine polls.
func TestCQWakeOncePerBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const msgs = 8
		a, b := burstPair(t, msgs)
		got := make(chan int, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			wcs := make([]WC, 2*msgs)
			n, err := b.cq.Wait(ctx, wcs)
			if err != nil {
				n = -1
			}
			got <- n
		}()
		synctest.Wait() // the waiter sleeps in Wait
		for i := range msgs {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{a.mr.SGE(i*64, 64)}})
			require.NoError(t, err)
		}
		require.Equal(t, msgs, <-got, "the waiter's first Wait returns the whole batch's completions")
	})
}

// pipeCQ opens a device with one completion vector on one end of an
// in-memory pipe, closed at the end of the test, and creates a CQ of cqe
// entries on it.
func pipeCQ(t *testing.T, name string, cqe int) (*Device, *CQ) {
	t.Helper()
	ca, _ := netdev.NewPipe()
	d, err := Open(ca, Options{Name: name, OwnConn: true, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	cq, err := d.CreateCQ(cqe, -1)
	require.NoError(t, err)
	return d, cq
}

// TestCQWakeAfterBatch: while a batch is being handled (Device.batches, as
// connReader.dispatch counts it) completions queue without waking a CQ
// waiter, the CQ waits once in Device.wakes, and endBatch wakes it; outside
// a batch a completion wakes it at once.
func TestCQWakeAfterBatch(t *testing.T) {
	d, cq := pipeCQ(t, "wake", 16)

	d.batches.Add(1)
	for i := range 3 {
		require.True(t, cq.push(&WC{ID: uint64(i)}, false))
	}
	require.Empty(t, cq.wake, "no wake-up while the batch is handled")
	d.wakeMu.Lock()
	require.Equal(t, []*CQ{cq}, d.wakes, "the CQ waits once for the end of the batch")
	d.wakeMu.Unlock()
	var scratch []*CQ
	d.endBatch(&scratch, true)
	require.Len(t, cq.wake, 1, "woken at the end of the batch")
	require.False(t, cq.wakePending.Load())
	require.Equal(t, 3, cq.Poll(make([]WC, 8)))

	<-cq.wake
	require.True(t, cq.push(&WC{ID: 9}, false))
	require.Len(t, cq.wake, 1, "outside a batch a completion wakes at once")
}

// startWaiter starts a goroutine that waits in cq.Wait for one completion
// and returns once it has blocked there (with one processor): ran is set
// when its Wait returned a completion, done is closed when it ends.
func startWaiter(cq *CQ) (ran *atomic.Bool, done chan struct{}) {
	ran, done = new(atomic.Bool), make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(done)
		ready <- struct{}{}
		if _, err := cq.Wait(context.Background(), make([]WC, 1)); err == nil {
			ran.Store(true)
		}
	}()
	<-ready
	runtime.Gosched() // the waiter blocks in Wait
	return ran, done
}

// endWaiter reports whether startWaiter's goroutine had run (ran), then
// lets it end and empties cq and its wake-up for the next trial.
func endWaiter(cq *CQ, ran *atomic.Bool, done chan struct{}) bool {
	got := ran.Load()
	<-done
	for cq.Poll(make([]WC, 8)) > 0 {
	}
	select {
	case <-cq.wake:
	default:
	}
	return got
}

// TestCQBehindYields checks endBatch's yield: when a batch's completions
// leave a CQ more than half full, the goroutine ending the batch lets the
// waiter it woke run before it goes on (with one processor, the waiter
// runs before endBatch returns); a CQ at half or less does not yield. A
// trial in which the scheduler takes the global queue first (1 schedule
// in 61) may miss, hence the majority.
func TestCQBehindYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d, cq := pipeCQ(t, "behind", 8)
	half := cq.wcs.Max() / 2

	// trial queues n completions in a batch while a goroutine waits in
	// Wait, ends the batch and reports whether the waiter had run.
	trial := func(n int) bool {
		ran, done := startWaiter(cq)
		d.batches.Add(1)
		for i := range n {
			require.True(t, cq.push(&WC{ID: uint64(i)}, false))
		}
		var scratch []*CQ
		d.endBatch(&scratch, true)
		got := endWaiter(cq, ran, done)
		require.False(t, d.behind.Load())
		return got
	}
	const trials = 20
	yielded, quiet := 0, 0
	for range trials {
		if trial(half + 1) {
			yielded++
		}
		if trial(half) {
			quiet++
		}
	}
	require.Greater(t, yielded, trials/2, "a CQ more than half full: the waiter runs before endBatch returns")
	require.Less(t, quiet, trials/2, "a CQ half full: endBatch does not yield")
}

// TestCQStarvedYields checks endBatch's other yield: a waiter woken at the
// end of one batch that has not taken its send completions by the end of
// the next runs before that endBatch returns if the batch was a stream's
// ("starved"; with one processor it cannot run while the batches go on).
// If its completions were taken in between ("polled"), the batch was not
// a stream's ("small batch"), or the completions are receive completions
// ("receives"), the second endBatch does not yield. A trial in which the
// scheduler takes the global queue first (1 schedule in 61) may miss,
// hence the majority.
func TestCQStarvedYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	d, cq := pipeCQ(t, "starved", 64)

	// trial ends two batches of one completion each while a goroutine
	// waits in Wait, taking the first batch's completion in between if
	// poll is set, and reports whether the waiter had run when the second
	// endBatch returned.
	trial := func(poll, stream bool, op WCOpcode) bool {
		ran, done := startWaiter(cq)
		var scratch []*CQ
		for b := range 2 {
			d.batches.Add(1)
			require.True(t, cq.push(&WC{ID: uint64(b), Opcode: op}, false))
			d.endBatch(&scratch, stream)
			if b == 0 {
				require.True(t, cq.woken.Load(), "woken by the first batch")
				if poll {
					require.Equal(t, 1, cq.Poll(make([]WC, 8)))
					require.False(t, cq.woken.Load(), "taking completions clears it")
				}
			}
		}
		got := endWaiter(cq, ran, done)
		require.False(t, cq.sendWC.Load())
		cq.woken.Store(false)
		return got
	}
	const trials = 20
	for _, tc := range []struct {
		name         string
		poll, stream bool
		op           WCOpcode
		yield        bool
	}{
		{"starved", false, true, WCRDMARead, true},
		{"polled", true, true, WCRDMARead, false},
		{"small batch", false, false, WCRDMARead, false},
		{"receives", false, true, WCRecv, false},
	} {
		ran := 0
		for range trials {
			if trial(tc.poll, tc.stream, tc.op) {
				ran++
			}
		}
		if tc.yield {
			require.Greater(t, ran, trials/2, "%s: the waiter runs before the second endBatch returns", tc.name)
		} else {
			require.Less(t, ran, trials/2, "%s: endBatch does not yield", tc.name)
		}
	}
}
