package perftest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/rxe"
)

// TestRDMACMPeerClosedByStage is TestPeerClosedByStage (package oob) over
// -R's rdma_cm exchange: the server's error when its client ends the
// exchange's connection names a different test or options only before
// the run started. In the setup exchanges (here the client disconnects as
// soon as the exchange's connection is up) the step says the peer closed
// the connection (oob.ErrPeerClosed); in the wait for the test QPs'
// connections (a client of another -c, whose requests nobody answers,
// fails and disconnects) it says the client disconnected the exchange's
// connection (errExchangeEnded), both with a different test or options
// among the causes. Once the run started (oob.Conn.RunStarted: an
// interrupted read-lat client, its server waiting in the closing
// exchange) the peer went through the setup and the error says it ended
// (oob.ErrPeerEnded) instead.
func TestRDMACMPeerClosedByStage(t *testing.T) {
	for _, tc := range []struct {
		stage   string
		run     func(t *testing.T) (serr, cerr error)
		started bool
		want    string
	}{
		{"setup exchanges", func(t *testing.T) (error, error) {
			port := sharedUDPPort(t)
			common := []string{"-R", "--udp-port", port, "-n", "20"}
			_, _, serr, cerr := runCMEndsWith(t, "send-bw", "send-bw",
				append([]string{"--bind", "127.0.0.1"}, common...),
				append([]string{"127.0.0.1", "--bind", "127.0.0.2"}, common...),
				func(_, co *options) {
					co.hooks.cmExchangeUp = func(c *rxe.CMConn) {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						require.NoError(t, c.Disconnect(ctx))
					}
				})
			return serr, cerr
		}, false, "exchanging versions: the peer closed the connection (it probably failed or runs a different test or options: see its output)"},
		{"test QP connections", func(t *testing.T) (error, error) {
			port := sharedUDPPort(t)
			common := []string{"-R", "--udp-port", port, "-n", "20"}
			_, _, serr, cerr := runCMEnds(t, "send-bw", "send-bw",
				append([]string{"--bind", "127.0.0.1"}, common...),
				append([]string{"127.0.0.1", "--bind", "127.0.0.2", "-c", "UD"}, common...))
			return serr, cerr
		}, false, "rdma_cm connection of test QP 0: no connection request from the client: the client disconnected the exchange's rdma_cm connection (it failed, was interrupted, or runs a different test or options: see its output)"},
		{"run started", func(t *testing.T) (error, error) {
			_, _, serr, cerr, _ := cmEndsInterrupted(t, "read-lat", "-n", "2000000")
			return serr, cerr
		}, true, "closing the connection: the peer closed the connection after the run started (it ended: it failed, was killed or interrupted: see its output)"},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			serr, cerr := tc.run(t)
			require.Error(t, cerr)
			require.Error(t, serr)
			require.Contains(t, serr.Error(), tc.want)
			if !tc.started {
				require.Contains(t, serr.Error(), "different test or options")
				var ended errExchangeEnded
				require.Equal(t, tc.stage == "test QP connections", errors.As(serr, &ended), "errExchangeEnded in %v", serr)
				require.NotErrorIs(t, serr, oob.ErrPeerEnded)
				return
			}
			require.ErrorIs(t, serr, oob.ErrPeerEnded)
			require.ErrorIs(t, serr, oob.ErrPeerClosed)
			require.NotContains(t, serr.Error(), "different test or options")
		})
	}
}
