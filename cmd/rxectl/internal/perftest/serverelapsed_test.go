package perftest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// TestSendBWServerElapsed: send-bw's server in iterations mode reports
// its receives over the time from its first batch of receives to its
// last, to the nanosecond (--json carries the figures in full). Its clock
// is the test's (hooks.now): it reads start at the clock's creation and
// at the first batch, and start plus a second at every later reading.
func TestSendBWServerElapsed(t *testing.T) {
	t.Parallel()
	const iters, size = 1000, 64
	args := loadProof("send-bw", "-n", "1000", "-s", "64")
	var client, server *session
	pt, so, co := loopbackEnds(t, args[0], "0", args[1:], &client, &server)
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	var reads atomic.Int64
	so.hooks.now = func() time.Time {
		if reads.Add(1) <= 2 {
			return start
		}
		return start.Add(time.Second)
	}
	runEnds(t, pt, &so, &co)
	require.NotNil(t, server)
	require.Greater(t, reads.Load(), int64(2), "the server read its clock after its first batch")
	require.Len(t, server.bwResults, 1)
	require.Equal(t, report.NewBW(size, iters, time.Second, false), server.bwResults[0])
}
