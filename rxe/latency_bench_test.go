package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPingPong measures the half round trip of a 2-byte SEND between
// two QPs over the pipe and loopback UDP, as ib_send_lat -e does: each
// side waits on its CQ (CQ.Wait) for the peer's message and answers at
// once; one
// operation is one message one way (ns/op is the half round trip). Send
// completions are unsignaled, so each side's CQ holds only receives.
func BenchmarkPingPong(b *testing.B) {
	for _, kind := range []string{"pipe", "udp"} {
		b.Run(kind, func(b *testing.B) {
			a, z := benchPair(b, kind, false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			post := func(e *end) {
				_, err := e.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{e.mr.SGE(0, 64)}})
				require.NoError(b, err)
			}
			for range 16 {
				post(a)
				post(z)
			}
			send := func(e *end) error {
				_, err := e.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendInline, InlineData: e.buf[:2]})
				return err
			}
			// wait waits on e's CQ for one receive and reposts it.
			wait := func(e *end, wcs []WC) error {
				if _, err := e.cq.Wait(ctx, wcs); err != nil {
					return err
				}
				if wcs[0].Status != WCSuccess {
					return fmt.Errorf("receive completed with %v", wcs[0].Status)
				}
				_, err := e.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{e.mr.SGE(0, 64)}})
				return err
			}
			rounds := max(b.N/2, 1)
			echo := make(chan error, 1)
			go func() {
				wcs := make([]WC, 1)
				for range rounds + 100 {
					if err := wait(z, wcs); err != nil {
						echo <- err
						return
					}
					if err := send(z); err != nil {
						echo <- err
						return
					}
				}
				echo <- nil
			}()
			wcs := make([]WC, 1)
			pingPong := func() {
				require.NoError(b, send(a))
				require.NoError(b, wait(a, wcs))
			}
			for range 100 { // warm up
				pingPong()
			}
			b.ResetTimer()
			for range rounds {
				pingPong()
			}
			b.StopTimer()
			require.NoError(b, <-echo)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*rounds), "ns/half-rtt")
		})
	}
}
