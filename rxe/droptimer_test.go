package rxe

import (
	"net/netip"
	"runtime"
	"testing"
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
