package rxe

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestWithdrawnREQLeavesBacklog: a request its peer withdraws while it
// waits in the listener's backlog (a REJ with reason timeout naming it by
// the peer's comm ID and CA GUID: the peer's Dial gave up, or its REQ's
// retries ran out; kernel cm_rej_handler ends a REQ received so) leaves
// the backlog at once: its slot is free for the next request, it is
// counted as withdrawn, and Accept neither returns it nor sets up a QP
// for it. A full backlog of withdrawn requests used to refuse the next
// one with "no resources", and Accept made a QP for each only to find
// it gone.
func TestWithdrawnREQLeavesBacklog(t *testing.T) {
	for _, msg := range []uint8{packet.MsgOther, packet.MsgREQ} { // Dial's Abort, a REQ's last retry
		t.Run(map[uint8]string{packet.MsgOther: "peer aborts", packet.MsgREQ: "peer's REQ times out"}[msg], func(t *testing.T) {
			const port = 35
			p, l := rawListener(t, port)
			var qps atomic.Int32
			l.newQP = func(o *CMOptions) (*QP, error) {
				qps.Add(1)
				return newCMQP(o)
			}
			const backlog = 64
			for i := range uint32(backlog) {
				p.send(uint64(i), p.req(port, 0x100+i))
			}
			require.Eventually(t, func() bool { return len(l.reqs) == backlog }, 2*time.Second, time.Millisecond, "the backlog is full")
			for i := range uint32(backlog) {
				rej := packet.REJ{LocalCommID: 0x100 + i, MessageRejected: msg, RejectedInfoLen: 8, Reason: packet.RejTimeout}
				binary.BigEndian.PutUint64(rej.ARI[:], 0xAB) // the raw peer's CA GUID
				p.send(uint64(i), &rej)
			}
			require.Eventually(t, func() bool { return len(l.reqs) == 0 }, 2*time.Second, time.Millisecond,
				"the withdrawn requests leave the backlog")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
			next := p.req(port, 0x200)
			p.send(1000, next)
			var rep packet.REP
			p.recv(packet.AttrREP, &rep) // not a REJ with "no resources"
			require.Equal(t, next.LocalCommID, rep.RemoteCommID)
			p.send(1001, rtuFor(&rep))
			var r connResult
			select {
			case r = <-acc:
			case <-ctx.Done():
				t.Fatal("Accept did not return")
			}
			require.NoError(t, r.err)
			require.Equal(t, next.LocalQPN, r.c.Remote.QPN, "Accept returns the live request")
			require.Equal(t, int32(1), qps.Load(), "no QP for a withdrawn request")
			require.Equal(t, CMListenerCounters{Accepted: 1, Withdrawn: backlog}, l.Counters())
		})
	}
}

// TestAcceptDuringDeviceClose: an Accept whose request's QP setup meets
// the device's Close (CreateQP or the moves to RTS then fail with
// ErrClosed) returns ErrClosed itself, as Dial does and as Accept does
// when the close comes before or after the setup, and counts no failure:
// it used to return an *AcceptError, which says that the listener still
// serves and that the accept loop should call Accept again.
func TestAcceptDuringDeviceClose(t *testing.T) {
	for name, closeAt := range map[string]func(t *testing.T, d *Device, o *CMOptions) (*QP, error){
		"before CreateQP": func(t *testing.T, d *Device, o *CMOptions) (*QP, error) {
			require.NoError(t, d.Close())
			return newCMQP(o)
		},
		"before RTR": func(t *testing.T, d *Device, o *CMOptions) (*QP, error) {
			qp, err := newCMQP(o)
			require.NoError(t, d.Close())
			return qp, err
		},
	} {
		t.Run(name, func(t *testing.T) {
			const port = 36
			p, l := rawListener(t, port)
			l.newQP = func(o *CMOptions) (*QP, error) { return closeAt(t, p.dev, o) }
			p.send(1, p.req(port, 0x301))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := l.Accept(ctx)
			require.True(t, err == ErrClosed, "Accept returned %v, not ErrClosed itself", err)
			require.Zero(t, l.Counters().Failed)
		})
	}
}
