package perftest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
)

// TestRDMACMClientFewerQPs: an -R server waiting for its client's request
// for test QP 1 when the client runs one test QP (-q 1 against the
// server's -q 2) finds the client's next exchange message on the
// exchange's connection instead: the client has gone on to the exchange
// after its connections. The server ends at once saying so and naming -q
// (errExchangeAhead), not after the silence bound as if the client had
// been killed (errPeerSilent).
func TestRDMACMClientFewerQPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"RC", nil, "rdma_cm connection of test QP 1: no connection request from the client: "},
		{"UD", []string{"-c", "UD"}, "rdma_cm resolution of UD test QP 1: no request from the client: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const silence = 10 * time.Second
			port := sharedUDPPort(t)
			common := append([]string{"-R", "--udp-port", port, "-n", "20"}, tc.args...)
			start := time.Now()
			_, _, serr, cerr := runCMEndsWith(t, "send-bw", "send-bw",
				append([]string{"--bind", "127.0.0.1", "-q", "2"}, common...),
				append([]string{"127.0.0.1", "--bind", "127.0.0.2", "-q", "1"}, common...),
				func(so, co *options) { so.hooks.silence, co.hooks.silence = silence, silence })
			took := time.Since(start)
			t.Logf("after %v: server: %v; client: %v", took, serr, cerr)
			require.Error(t, cerr)
			require.ErrorContains(t, serr, tc.want+errExchangeAhead{}.Error())
			var ahead errExchangeAhead
			require.ErrorAs(t, serr, &ahead)
			require.Contains(t, serr.Error(), "-q")
			// The silence bound would have ended the wait with errPeerSilent
			// instead; no wall-clock bound is asserted (CI shares two
			// processors with other tests).
			require.False(t, errors.As(serr, new(errPeerSilent)), "the silence bound ended the wait: %v", serr)
		})
	}
}

// TestRDMACMServerFewerQPs: an -R client of more test QPs than its server
// (-q 2 against -q 1) asks for a test QP the server takes no request for:
// the server closes its listener once it has accepted its last test QP,
// so the request is refused at once, and the client's error says the
// server took one test QP and takes no more (a smaller -q), not that
// nobody listens or answers on the port, whose exchange's connection came
// from that server; it does not wait for its Dial's 10 s bound. The
// server, which waits for the client's next exchange message, finds the
// connection closed in the setup (oob.ErrPeerClosed).
func TestRDMACMServerFewerQPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"RC", nil, "rdma_cm connection of test QP 1: "},
		{"UD", []string{"-c", "UD"}, "rdma_cm resolution of UD test QP 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := sharedUDPPort(t)
			common := append([]string{"-R", "--udp-port", port, "-n", "20"}, tc.args...)
			start := time.Now()
			_, _, serr, cerr := runCMEnds(t, "send-bw", "send-bw",
				append([]string{"--bind", "127.0.0.1", "-q", "1"}, common...),
				append([]string{"127.0.0.1", "--bind", "127.0.0.2", "-q", "2"}, common...))
			took := time.Since(start)
			t.Logf("after %v: server: %v; client: %v", took, serr, cerr)
			require.ErrorContains(t, cerr, tc.want)
			require.ErrorContains(t, cerr, "the server took 1 test QP and takes no more: it runs fewer (a smaller -q: give both ends the same)")
			require.NotContains(t, cerr.Error(), "is a server running")
			require.NotContains(t, cerr.Error(), "no answer")
			require.ErrorIs(t, serr, oob.ErrPeerClosed)
			require.NotErrorIs(t, serr, oob.ErrPeerEnded)
			// A Dial that waited for its bound would say it got no answer
			// (checked above); no wall-clock bound is asserted.
		})
	}
}
