package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestDialREJAfterREPIsRejectError: a passive side that sends its REP and
// at once a REJ (its consumer gave up) refuses the connection: Dial
// returns a *RejectError with the REJ's reason whether the REJ came before
// the REP was confirmed or after (then the connection is up and ends), not
// an error of its own.
func TestDialREJAfterREPIsRejectError(t *testing.T) {
	for i := range 20 {
		d, p := newRawCM(t)
		client := newCMEnd(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res := async(func() (*CMConn, error) {
			return Dial(ctx, d, fmt.Sprintf("%v:36", p.addr()), CMOptions{PD: client.pd, SendCQ: client.cq})
		})
		var req packet.REQ
		tid := p.recv(packet.AttrREQ, &req)
		p.send(tid, &packet.REP{LocalCommID: 0x92, RemoteCommID: req.LocalCommID, LocalQPN: 0x92, StartingPSN: 7,
			ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7, LocalCAGUID: 0xAB})
		p.send(tid, &packet.REJ{LocalCommID: 0x92, RemoteCommID: req.LocalCommID, MessageRejected: packet.MsgOther,
			Reason: packet.RejConsumerReject})
		var r connResult
		select {
		case r = <-res:
		case <-time.After(5 * time.Second):
			t.Fatal("Dial did not return")
		}
		cancel()
		if r.err == nil {
			r.c.Close() // the REJ came after the RTU and ended the connection
			continue
		}
		var rej *RejectError
		require.ErrorAs(t, r.err, &rej, "iteration %d", i)
		require.Equal(t, packet.RejConsumerReject, rej.Reason)
	}
}
