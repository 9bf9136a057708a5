package testutil

import (
	"context"
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
