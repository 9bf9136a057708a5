package testutil

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBound: HangBound without a deadline or with a far one; nine tenths
// of the time left when the deadline comes sooner; never past this
// binary's own deadline.
func TestBound(t *testing.T) {
	require.Equal(t, HangBound, bound(time.Time{}, false))
	require.Equal(t, HangBound, bound(time.Now().Add(time.Hour), true))
	got := bound(time.Now().Add(10*time.Second), true)
	require.LessOrEqual(t, got, 9*time.Second)
	require.Greater(t, got, 8*time.Second)

	end, ok := binaryDeadline()
	tend, tok := t.Deadline()
	require.Equal(t, tok, ok, "go test -timeout sets both or neither")
	if ok {
		require.False(t, end.After(tend), "the binary's deadline as this package reckons it is no later than the test's")
		require.LessOrEqual(t, Bound(), time.Until(end))
	}
}

// TestBoundInBubble: Bound is callable inside a synctest bubble (where
// t.Deadline panics) and gives HangBound of the bubble's time.
func TestBoundInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.Equal(t, HangBound, Bound())
	})
}

// TestContext: the context ends within Bound() and is cancelled when
// the test ends.
func TestContext(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t)
		end, ok := ctx.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(Bound()), end, time.Second)
		require.NoError(t, ctx.Err())
	})
	require.Error(t, ctx.Err(), "cancelled when its test ended")
}

// TestQPTimeoutOutlastsAStall: QPTimeout's whole budget of the default 7
// retries (8 tries) outlasts a 2 s stall with room, and -u's argument
// says the same exponent.
func TestQPTimeoutOutlastsAStall(t *testing.T) {
	try := time.Duration(4096<<QPTimeout) * time.Nanosecond
	require.Greater(t, try, time.Second)
	require.Greater(t, 8*try, 4*time.Second)
	require.Equal(t, "18", QPTimeoutArg)
}

// fakeT records Until's failure instead of ending a test.
type fakeT struct{ failed string }

func (*fakeT) Helper()                             {}
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// TestUntil: (Within, Until) a condition that holds at once costs no poll; one that holds
// after a few polls is seen within a millisecond of holding; one that
// never holds fails with its message once the limit has passed.
func TestUntil(t *testing.T) {
	calls := 0
	require.True(t, Within(time.Hour, func() bool { calls++; return true }))
	require.Equal(t, 1, calls)

	calls = 0
	start := time.Now()
	require.True(t, Within(time.Hour, func() bool { calls++; return calls == 4 }))
	require.Equal(t, 4, calls)
	require.Less(t, time.Since(start), time.Second, "three short polls")

	start = time.Now()
	require.False(t, Within(20*time.Millisecond, func() bool { return false }))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	var f fakeT
	Until(&f, func() bool { return true }, "never %d", 1)
	require.Empty(t, f.failed)
}
