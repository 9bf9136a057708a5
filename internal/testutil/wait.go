package testutil

import (
	"fmt"
	"time"
)

// Failer is the part of testing.TB that Until uses.
type Failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Until waits until cond holds, for at most Bound(), and fails t with
// msg and args if it never does. It checks cond at once and then polls
// it, first every few microseconds and backing off to a millisecond,
// so that a condition that holds after a moment costs a moment rather
// than a whole tick (testify's Eventually first checks after one tick).
func Until(t Failer, cond func() bool, msg string, args ...any) {
	t.Helper()
	if !Within(Bound(), cond) {
		t.Fatalf("not within %v: %s", Bound(), fmt.Sprintf(msg, args...))
	}
}

// Within polls cond as Until does until it holds (true) or limit has
// passed (false), for a caller that reports the failure itself.
func Within(limit time.Duration, cond func() bool) bool {
	end := time.Now().Add(limit)
	for wait := 5 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(wait)
	}
}
