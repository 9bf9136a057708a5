// Package testutil is test support: the time budgets that the tests of
// rxe and rxectl share so that they hold on a loaded machine, where a
// process's threads can be runnable and still get no processor for
// seconds (docs/performance.md, "RETRY_EXC_ERR on a loaded machine").
//
// A run whose subject is not the transport's retry budget takes QPTimeout
// as its Local ACK Timeout; a wait that exists only to stop a hung test
// takes Bound (or Context) instead of a guess of how slow the host is.
// Tests about timeouts keep their own budgets.
//
// On Linux, SendQueued sends datagrams to a UDP socket one at a time and
// waits until the kernel has queued each, for tests that read without
// waiting right after a send: on loopback the softirq that queues a
// datagram may run after its send returned.
package testutil

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"
)

// QPTimeout is the Local ACK Timeout exponent (IBA 9.7.6.1.3: 4.096 µs ·
// 2^18 ≈ 1.07 s a try; 8.6 s for the default 7 retries) of a run whose
// subject is not the retry budget. A stall of 2 s on both ends spends
// two of its tries, where the default 14 (67 ms a try, 0.55 s in all)
// ends such a run in RETRY_EXC_ERR.
const QPTimeout = 18

// QPTimeoutArg is QPTimeout as the argument of rxectl's -u.
var QPTimeoutArg = strconv.Itoa(QPTimeout)

// HangBound is how long a wait that only stops a hung test lasts at most:
// far beyond what a run takes on a loaded host (under -race, with a load
// average near 30 on 2 processors, rxectl's interrupted runs took up to
// 46 s from start to end), short enough that a hang fails the test with
// its own message rather than at go test's -timeout.
const HangBound = 2 * time.Minute

// start is when the test binary started, a moment before go test's
// -timeout starts counting.
var start = time.Now()

// Bound returns how long a wait that only stops a hung test may last:
// HangBound, or less when the test binary's deadline (go test -timeout)
// comes sooner, so that the wait fails with its message first: nine
// tenths of the time left. It reads the -test.timeout flag rather than
// t.Deadline, which panics inside a testing/synctest bubble; there
// time.Now is the bubble's, far before the deadline, and the bound is
// HangBound of the bubble's time.
func Bound() time.Duration {
	return bound(binaryDeadline())
}

// binaryDeadline returns when go test's -timeout ends the test binary,
// and whether it does (no -test.timeout flag, or 0: never).
func binaryDeadline() (time.Time, bool) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return time.Time{}, false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return time.Time{}, false
	}
	d, ok := g.Get().(time.Duration)
	if !ok || d <= 0 {
		return time.Time{}, false
	}
	return start.Add(d), true
}

// bound is Bound for a binary whose deadline is end (none: !ok).
func bound(end time.Time, ok bool) time.Duration {
	d := HangBound
	if ok {
		if left := time.Until(end) * 9 / 10; left < d {
			d = left
		}
	}
	return d
}

// Context returns a context that ends after Bound(), or when t ends.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Bound())
	t.Cleanup(cancel)
	return ctx
}
