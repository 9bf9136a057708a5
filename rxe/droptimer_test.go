package rxe

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// TestDropTimer: the back-off timer fires once per arming, Reset replaces
// an earlier arming, Stop disarms it, and Close ends it for good; for the
// runtime's timer and, on Linux, the timerfd.
func TestDropTimer(t *testing.T) {
	kinds := map[string]func(time.Duration, func()) dropTimer{
		"runtime": func(d time.Duration, fn func()) dropTimer { return newRuntimeTimer(d, fn) },
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
				case <-time.After(10 * time.Second):
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

// TestDropTimerKind: a device on a UDP socket, bare or under decorators,
// gets the timerfd on Linux; a device on a pipe keeps the runtime's timer
// (and with it testing/synctest's virtual clock).
func TestDropTimerKind(t *testing.T) {
	pa, pb := netdev.NewPipe()
	defer pa.Close()
	defer pb.Close()
	require.False(t, onSocket(pa))
	require.False(t, onSocket(faults.Wrap(pa, faults.Config{})))
	tm := newDropTimer(pa, time.Hour, func() {})
	defer tm.Close()
	require.IsType(t, &runtimeTimer{}, tm)

	udp, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), netdev.Options{})
	require.NoError(t, err)
	defer udp.Close()
	require.True(t, onSocket(udp))
	wrapped := faults.Wrap(udp, faults.Config{})
	require.True(t, onSocket(wrapped))
	tm2 := newDropTimer(wrapped, time.Hour, func() {})
	defer tm2.Close()
	_, isRuntime := tm2.(*runtimeTimer)
	require.Equal(t, runtime.GOOS != "linux", isRuntime, "%T", tm2)
}

// TestDropQueue: a vector's back-offs share one timer; QPs are released in
// deadline order, each once, a voided arming (stopDropTimer, or a newer
// arming) releases nothing, and close stops it all.
func TestDropQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pa, pb := netdev.NewPipe()
		defer pa.Close()
		defer pb.Close()
		v := newVector(&Device{}, 0, pa)
		qps := make([]*QP, 4)
		for i := range qps {
			qps[i] = &QP{vec: v}
		}
		start := time.Now()
		arm := func(qp *QP, d time.Duration) {
			gen := qp.dropGen.Add(1)
			v.drops.arm(time.Now(), time.Now().Add(d), qp, gen)
		}
		arm(qps[0], 300*time.Microsecond)
		arm(qps[1], 100*time.Microsecond)
		arm(qps[2], 200*time.Microsecond)
		arm(qps[3], 150*time.Microsecond)
		qps[2].stopDropTimer()            // voided
		arm(qps[3], 400*time.Microsecond) // re-armed later: the 150 µs entry is void
		var order []int
		var at []time.Duration
		for len(order) < 3 {
			time.Sleep(10 * time.Microsecond)
			synctest.Wait()
			for qp := v.nextRunnable(); qp != nil; qp = v.nextRunnable() {
				qp.queued.Store(false)
				require.True(t, qp.dropDue.Load())
				order = append(order, slices.Index(qps, qp))
				at = append(at, time.Since(start))
			}
			require.Less(t, time.Since(start), time.Second, "released %v so far", order)
		}
		require.Equal(t, []int{1, 0, 3}, order)
		require.Equal(t, []time.Duration{100 * time.Microsecond, 300 * time.Microsecond, 400 * time.Microsecond}, at,
			"released at each deadline (polled every 10 µs of virtual time)")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Nil(t, v.nextRunnable(), "nothing else fires")
		require.False(t, qps[2].dropDue.Load())

		arm(qps[0], 100*time.Microsecond)
		v.drops.close()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Nil(t, v.nextRunnable(), "a closed queue releases nothing")
	})
}
