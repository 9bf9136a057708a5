package perftest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestBWDurationCountsSampleWindow: a bandwidth client in duration mode
// counts cq-mod requests for every completion it takes inside the sample
// window, and none of those it takes in the warm-up before it or the
// cool-down after it (perftest's run_iter_bw counts only in SAMPLE_STATE);
// its row's time is the window's length. The client's clock is the test's
// (hooks.now): it moves on by step at each of the client's waits on its
// send CQs (hooks.sent), so which completions fall in which phase does
// not depend on how fast the host runs.
func TestBWDurationCountsSampleWindow(t *testing.T) {
	t.Parallel()
	const (
		cqMod = 4
		size  = 64
		step  = 50 * time.Millisecond // 20 waits in each margin, 40 in the window
	)
	// -D 4: a margin of 1 s, the window from 1 s to 3 s.
	args := loadProof("write-bw", "-D", "4", "-Q", "4", "-s", "64")
	var client, server *session
	pt, so, co := loopbackEnds(t, args[0], "0", args[1:], &client, &server)
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	winStart, winEnd := start.Add(time.Second), start.Add(3*time.Second)
	// Only the client's goroutine, the test's, reads and moves the clock.
	now := start
	var warm, counted, cool uint64 // cq-mod requests per completion, by phase
	co.hooks.now = func() time.Time { return now }
	co.hooks.sent = func(n int) {
		now = now.Add(step)
		switch {
		case now.Before(winStart):
			warm += uint64(n * cqMod)
		case now.Before(winEnd):
			counted += uint64(n * cqMod)
		default:
			cool += uint64(n * cqMod)
		}
	}
	runEnds(t, pt, &so, &co)
	require.NotNil(t, client)
	require.Positive(t, warm, "no completion in the warm-up")
	require.Positive(t, counted, "no completion in the window")
	require.Positive(t, cool, "no completion in the cool-down")
	require.Len(t, client.bwResults, 1)
	require.Equal(t, report.NewBW(size, counted, winEnd.Sub(winStart), false), client.bwResults[0])
}

// steppedClock is a bandwidth loop's clock in duration mode (hooks.now)
// that a test moves on by step at each of the loop's waits on its send
// CQs (hooks.sent), from a fixed start: which completions fall in the
// sample window does not depend on how fast the host runs, and a run
// counts some however slow it is. Only the loop's goroutine reads and
// moves it; read counted once the run is over.
type steppedClock struct {
	now              time.Time
	step             time.Duration
	winStart, winEnd time.Time
	counted          uint64 // completions taken inside the window
}

// stepClock puts o's bandwidth loop in duration mode on a steppedClock
// that moves on by step a wait. o's -D and -f (parsed) set the window.
func stepClock(o *options, step time.Duration) *steppedClock {
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	margin := time.Duration(o.margin) * time.Second
	c := &steppedClock{now: start, step: step,
		winStart: start.Add(margin), winEnd: start.Add(time.Duration(o.duration)*time.Second - margin)}
	o.hooks.now = func() time.Time { return c.now }
	o.hooks.sent = func(n int) {
		c.now = c.now.Add(c.step)
		if !c.now.Before(c.winStart) && c.now.Before(c.winEnd) {
			c.counted += uint64(n)
		}
	}
	return c
}
