package perftest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSendBWDurationPeerPauses: send-bw's server in duration mode, which
// watches its client over the TCP exchange (watchPeer), waits for a
// client that pauses during the run longer than the time left in the
// server's duration plus sendBWQuiet, rather than ending in "received
// nothing for ...: the peer stopped sending": the client has not stopped
// (it has written no exchange message), as a sender waiting out an ACK
// timeout or a host's stall has not. The client pauses at its first
// send completion (hooks.sent) for longer than that wait: the server's
// loop started before the client's (startReceiving), so the wait ends
// before the client's first completion plus -D plus sendBWQuiet.
func TestSendBWDurationPeerPauses(t *testing.T) {
	t.Parallel()
	const dur = time.Second // -D 1, no margin: the window is the whole run
	args := loadProof("send-bw", "-D", "1", "-s", "64")
	var client, server *session
	pt, so, co := loopbackEnds(t, args[0], "0", args[1:], &client, &server)
	var once sync.Once
	paused := false // hooks.sent runs on runEnds's goroutine, the test's
	co.hooks.sent = func(int) {
		once.Do(func() {
			time.Sleep(dur + sendBWQuiet + 200*time.Millisecond)
			paused = true
		})
	}
	runEnds(t, pt, &so, &co)
	require.True(t, paused, "the client paused")
	require.Len(t, server.bwResults, 1)
}
