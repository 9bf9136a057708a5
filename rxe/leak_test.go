package rxe

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
)

// The goroutine-leak check. A device's goroutines (receive, transmit, the
// timerfd's reader) must all end once it is closed; testing/synctest
// checks this for the tests in a bubble, and this file checks it for the
// tests on real sockets and real time: per test for the devices made by
// the shared harness (newDevices, pipeDevices, benchPair: checkGoroutines),
// and for the whole package in TestMain.

// leakWait bounds how long goroutines may take to end after the cleanups
// ran (a closed timerfd's reader, a receive goroutine leaving ReadBatch).
const leakWait = 5 * time.Second

// TestMain runs the package's tests, then fails if goroutines of gorxe
// packages outlive them.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitLeaks(nil, leakWait); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "goroutines of gorxe outlived the tests:\n\n%s\n", strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// checkGoroutines fails t if goroutines of gorxe packages started during
// t outlive it by more than leakWait. Call it before creating devices, so
// that its cleanup runs after theirs.
func checkGoroutines(t testing.TB) {
	t.Helper()
	before := gorxeGoroutines()
	t.Cleanup(func() {
		if leaked := waitLeaks(before, leakWait); len(leaked) > 0 {
			t.Errorf("%d goroutines outlived the test:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

// waitLeaks waits up to wait for the gorxe goroutines not in before to
// end, and returns the stacks of those that did not.
func waitLeaks(before map[string]string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var leaked []string
		for id, stack := range gorxeGoroutines() {
			if _, ok := before[id]; !ok {
				leaked = append(leaked, stack)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			slices.Sort(leaked)
			return leaked
		}
		time.Sleep(time.Millisecond)
	}
}

// gorxeGoroutines returns the goroutines other than the caller's whose
// stack runs code of a gorxe package outside tests, by goroutine ID
// ("goroutine 12"), with their stacks.
func gorxeGoroutines() map[string]string {
	// The dump starts in 64 KiB, doubled until it fits: a pair of devices
	// dumps a few kilobytes, and clearing a megabyte at each call would
	// take a third of FuzzDeviceReceive's time per input.
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 {
			continue // the caller
		}
		if !bytes.Contains(g, []byte("github.com/gorxe/gorxe/")) || isTestGoroutine(g) {
			continue
		}
		head, _, _ := bytes.Cut(g, []byte(" ["))
		out[string(head)] = string(g)
	}
	return out
}

// isTestGoroutine reports whether a stack is a test function's own
// goroutine (testing.tRunner), which the testing package ends.
func isTestGoroutine(g []byte) bool {
	return bytes.Contains(g, []byte("testing.tRunner")) || bytes.Contains(g, []byte("testing.(*M).Run"))
}

// TestLeakCheck: the check sees the goroutines of a device left open on
// real sockets, and none once it is closed.
func TestLeakCheck(t *testing.T) {
	before := gorxeGoroutines()
	ca, cb := connPair(t, "udp")
	d, err := Open(ca, Options{LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	defer cb.Close()
	leaked := waitLeaks(before, 20*time.Millisecond)
	require.NotEmpty(t, leaked, "an open device's goroutines")
	require.Contains(t, strings.Join(leaked, "\n"), "routineReceive")
	require.NoError(t, d.Close())
	require.Empty(t, waitLeaks(before, leakWait), "after Close")
}

// TestDestroyedQPIsCollected: once a QP is destroyed and its user lets go
// of it, nothing in the device keeps it: not the receive reader's QP
// cache, which held the QP its last batch went to, and not the transmit
// batch's owners, which held the QP of each datagram of the last pass;
// both used to keep a destroyed QP (and its receive queue) reachable
// until traffic of another QP overwrote them.
func TestDestroyedQPIsCollected(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{}, qpOpts{})
			_, err := b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 64)}})
			require.NoError(t, err)
			_, err = a.qp.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 64)}})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, b.cq).Status)
			require.Equal(t, WCSuccess, waitWC(t, a.cq).Status) // b's ACK left b's transmit path

			w := weak.Make(b.qp)
			require.NoError(t, b.qp.Destroy())
			b.qp = nil
			require.Eventually(t, func() bool {
				runtime.GC()
				return w.Value() == nil
			}, 2*time.Second, 10*time.Millisecond, "the destroyed QP is still reachable from its device")
		})
	}
}
