package rxe

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// TestWakeTimer: a vector's timer fires once per arming, Reset replaces
// an earlier arming, Stop disarms it, and Close ends it for good; for the
// runtime's timer and, on Linux, the timerfd.
func TestWakeTimer(t *testing.T) {
	kinds := map[string]func(time.Duration, func()) wakeTimer{
		"runtime": func(d time.Duration, fn func()) wakeTimer { return newRuntimeTimer(d, fn) },
	}
	if runtime.GOOS == "linux" {
		kinds["timerfd"] = newPreciseTimer
	}
	for name, newTimer := range kinds {
		t.Run(name, func(t *testing.T) {
			fired := make(chan time.Time, 4)
			start := time.Now()
			tm := newTimer(time.Millisecond, func() { fired <- time.Now() })
			require.NotNil(t, tm)
			defer tm.Close()
			wait := func(after time.Time, min time.Duration) {
				t.Helper()
				select {
				case at := <-fired:
					require.GreaterOrEqual(t, at.Sub(after), min, "fired early")
				case <-time.After(testutil.Bound()):
					t.Fatal("the timer did not fire")
				}
			}
			quiet := func(d time.Duration, msg string) {
				t.Helper()
				select {
				case <-fired:
					t.Fatal(msg)
				case <-time.After(d):
				}
			}
			wait(start, time.Millisecond)

			tm.Reset(20 * time.Millisecond)
			tm.Stop()
			quiet(60*time.Millisecond, "a stopped timer fired")

			tm.Reset(time.Hour)
			start = time.Now()
			tm.Reset(2 * time.Millisecond)
			wait(start, 2*time.Millisecond)
			quiet(20*time.Millisecond, "fired twice for one arming")

			tm.Close()
			tm.Reset(time.Millisecond)
			quiet(20*time.Millisecond, "a closed timer fired")
			tm.Close() // twice is harmless
		})
	}
}

// TestWakeTimerKind: a device on a UDP socket, bare or under decorators,
// gets the timerfd on Linux through the KernelTimers capability; a device
// on a pipe keeps the runtime's timer (and with it testing/synctest's
// virtual clock).
func TestWakeTimerKind(t *testing.T) {
	pa, pb := netdev.NewPipe()
	defer pa.Close()
	defer pb.Close()
	require.False(t, kernelTimers(pa))
	require.False(t, kernelTimers(faults.Wrap(pa, faults.Config{})))
	tm := newWakeTimer(pa, time.Hour, func() {})
	defer tm.Close()
	require.IsType(t, &runtimeTimer{}, tm)

	udp, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), netdev.Options{})
	require.NoError(t, err)
	defer udp.Close()
	require.Implements(t, (*KernelTimers)(nil), udp)
	require.True(t, kernelTimers(udp))
	wrapped := faults.Wrap(udp, faults.Config{})
	require.True(t, kernelTimers(wrapped))
	tm2 := newWakeTimer(wrapped, time.Hour, func() {})
	defer tm2.Close()
	_, isRuntime := tm2.(*runtimeTimer)
	require.Equal(t, runtime.GOOS != "linux", isRuntime, "%T", tm2)
}

// TestTimerQueue: a vector's wake-ups share one timer; QPs are put on the
// run queue in wake-up order, each once; a later filing keeps the earlier
// entry (the QP wakes early), an earlier one moves it; a cancelled QP is
// not woken, and close stops it all.
func TestTimerQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pa, pb := netdev.NewPipe()
		defer pa.Close()
		defer pb.Close()
		v := newVector(&Device{}, 0, pa)
		qps := make([]*QP, 5)
		for i := range qps {
			qps[i] = &QP{vec: v}
			qps[i].slot.init()
		}
		start := time.Now()
		file := func(i int, d time.Duration) { v.timers.file(qps[i], start.Add(d)) }
		file(0, 300*time.Microsecond)
		file(1, 100*time.Microsecond)
		file(2, 200*time.Microsecond)
		file(3, 150*time.Microsecond)
		file(3, 400*time.Microsecond) // later: the 150 µs entry stays
		file(4, 500*time.Microsecond)
		file(4, 250*time.Microsecond) // earlier: moves
		v.timers.cancel(qps[2])
		var order []int
		var at []time.Duration
		for len(order) < 4 {
			time.Sleep(10 * time.Microsecond)
			synctest.Wait()
			for qp := v.nextRunnable(); qp != nil; qp = v.nextRunnable() {
				qp.queued.Store(false)
				order = append(order, slices.Index(qps, qp))
				at = append(at, time.Since(start))
			}
			require.Less(t, time.Since(start), time.Second, "woken %v so far", order)
		}
		require.Equal(t, []int{1, 3, 4, 0}, order)
		require.Equal(t, []time.Duration{100 * time.Microsecond, 150 * time.Microsecond, 250 * time.Microsecond, 300 * time.Microsecond}, at,
			"woken at each wake-up time (polled every 10 µs of virtual time)")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Nil(t, v.nextRunnable(), "nothing else fires")
		for _, qp := range qps {
			require.Equal(t, -1, qp.slot.index)
		}

		file(0, 2*time.Millisecond)
		v.timers.close()
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		require.Nil(t, v.nextRunnable(), "a closed queue wakes nothing")
	})
}

// TestHeldQPWakesAtBackoffEnd: a QP that holds datagrams after a local
// drop wakes once, at the end of its back-off, even when its requester
// deadline has already passed (the step acts on the deadline only after
// the held datagrams are out, so filing the deadline would wake the QP
// again and again for nothing).
func TestHeldQPWakesAtBackoffEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pa, pb := netdev.NewPipe()
		defer pa.Close()
		defer pb.Close()
		v := newVector(&Device{}, 0, pa)
		qp := &QP{dev: &Device{}, vec: v, state: QPSRTS}
		qp.slot.init()
		start := time.Now()
		qp.mu.Lock()
		qp.localDrop.push(&netdev.Message{Buf: make([]byte, 64), N: 64})
		qp.localDrop.until = start.Add(time.Millisecond)
		qp.timerAt = start.Add(-time.Microsecond)
		qp.armTimers()
		qp.mu.Unlock()
		wakes, sent := 0, 0
		for sent == 0 {
			time.Sleep(10 * time.Microsecond)
			synctest.Wait()
			for q := v.nextRunnable(); q != nil; q = v.nextRunnable() {
				wakes++
				sent, _ = q.step(v.txMsgs, v.txOwners, 0)
			}
			require.Less(t, time.Since(start), time.Second)
		}
		require.Equal(t, 1, wakes, "woken before the back-off ended")
		require.Equal(t, 1, sent)
		require.GreaterOrEqual(t, time.Since(start), time.Millisecond)
	})
}

// TestTimerFireAllocs: a wake-up of the timer queue puts every QP whose
// wake-up time has come on the run queue without allocating, however many
// are due at once (a flood of due deadlines, each waiting for a held
// socket gate and filed again every timeoutReadWait: readBeforeTimeout).
func TestTimerFireAllocs(t *testing.T) {
	if benchRaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, n := range []int{1, 64, 1024} {
		t.Run(fmt.Sprintf("due=%d", n), func(t *testing.T) {
			pa, pb := netdev.NewPipe()
			defer pa.Close()
			defer pb.Close()
			v := newVector(&Device{}, 0, pa)
			defer v.timers.close()
			qps := make([]*QP, n)
			for i := range qps {
				qps[i] = &QP{vec: v}
				qps[i].slot.init()
			}
			woken := 0
			allocs := testing.AllocsPerRun(20, func() {
				past := time.Now().Add(-time.Millisecond)
				for _, qp := range qps {
					v.timers.file(qp, past)
				}
				v.timers.fire()
				for qp := v.nextRunnable(); qp != nil; qp = v.nextRunnable() {
					qp.queued.Store(false)
					woken++
				}
			})
			require.Equal(t, 21*n, woken, "every due QP is put on the run queue")
			require.Zero(t, allocs, "allocations per wake-up")
		})
	}
}
