package perftest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/internal/syncbuf"
)

// TestLatInterrupted: an interrupted latency client over the TCP exchange
// closes the exchange's connection, and a send-lat or write-lat server,
// waiting for the next ping or for the completion of its own last reply,
// sees the close and ends with errPeerDone, as with -R
// (TestLatInterruptedRDMACM), one ACK timeout after it (ownAfterPeerDone)
// instead of running out its reply's retries (RETRY_EXC_ERR after 8 ACK
// timeouts, 8.6 s at the tests' -u 18). A read-lat or atomic-lat server,
// which waits in the closing exchange, finds the connection closed after
// the run started, and says the peer ended (oob.ErrPeerEnded) rather than
// that it may run another test. The
// client is interrupted 300 ms after its table header, in the middle of
// its two million round trips.
func TestLatInterrupted(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"send-lat", "write-lat", "read-lat", "atomic-lat"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			cout, sout, cerr, serr, ended := interruptedEnds(t, cmd, []string{"-n", "2000000"}, func(ctx context.Context, _ *options, cbuf *syncbuf.Buffer, interrupt func()) {
				go func() {
					for ctx.Err() == nil && !strings.Contains(cbuf.String(), " #bytes") {
						time.Sleep(10 * time.Millisecond)
					}
					if ctx.Err() == nil {
						time.Sleep(300 * time.Millisecond)
						interrupt()
					}
				}()
			})
			require.ErrorContains(t, cerr, "interrupted", cout)
			if cmd == "read-lat" || cmd == "atomic-lat" {
				// The server only answers: it waits in the closing
				// exchange, which finds the connection closed.
				require.ErrorIs(t, serr, oob.ErrPeerClosed, sout)
				// The close came after the run started: the peer
				// ended, it does not run another test.
				require.NotContains(t, serr.Error(), "different test or options")
				require.Contains(t, serr.Error(), "failed, was killed or interrupted")
			} else {
				require.ErrorIs(t, serr, errPeerDone, sout)
			}
			require.NotContains(t, serr.Error(), "RETRY_EXC_ERR")
			require.Less(t, ended, promptly)
		})
	}
}
