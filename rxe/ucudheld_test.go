package rxe

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// refusingConn refuses every write as the local host does when its queue
// is full (netdev.ErrLocalDrop) while refuse is set.
type refusingConn struct {
	netdev.Conn
	refuse atomic.Bool
}

func (c *refusingConn) WriteBatch(msgs []netdev.Message) (int, error) {
	if c.refuse.Load() {
		return 0, netdev.DropError{Errno: syscall.ENOBUFS}
	}
	return c.Conn.WriteBatch(msgs)
}

// heldUnreliablePair returns two ends of type typ, ready to send from a to
// b (b has receives posted), where a's writes are refused while its
// refusingConn says so.
func heldUnreliablePair(t *testing.T, typ QPType) (a, b *end, rc *refusingConn, wr SendWR) {
	t.Helper()
	ca, cb := connPair(t, "pipe")
	rc = &refusingConn{Conn: ca}
	a, b, wr = unreliablePairOver(t, typ, rc, cb)
	return a, b, rc, wr
}

// unreliablePairOver opens two devices over ca and cb with an end of type
// typ on each, ready to send from a to b (a UC pair connected, or UD QPs
// with a's work request addressed to b), with four receives posted on b;
// wr is a signaled 64-byte SEND from a to b.
func unreliablePairOver(t *testing.T, typ QPType, ca, cb netdev.Conn) (a, b *end, wr SendWR) {
	t.Helper()
	da, db := openPair(t, ca, cb)
	a, b = newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
	wr = SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 64)}}
	aimUnreliable(t, typ, a, b, 3, &wr)
	postRecvs(t, b, 4, 256)
	return a, b, wr
}

// pollAll returns the completions cq holds now, without waiting.
func pollAll(cq *CQ) []WC {
	var out []WC
	wcs := make([]WC, 8)
	for {
		n := cq.Poll(wcs)
		if n == 0 {
			return out
		}
		out = append(out, wcs[:n]...)
	}
}

// TestUnreliableHeldSendTeardown: a UC or UD datagram the local host
// refused is held by its QP (LocalDropAdaptive) and has not left; its work
// request has not completed. If the QP never sends it, the work request
// does not complete with success: when the QP enters ERR (Modify, or
// Device.Close) it completes once with WR_FLUSH_ERR (before Close returns; after
// Modify, once a retry under way has ended), as rxe's completer
// flushes a WQE its requester rolled back after -EAGAIN once the QP is in
// ERR (rxe_completer, flush_send_queue with notify), and the datagram is
// never sent; when the QP is destroyed it completes not at all, as rxe
// flushes a destroyed QP's send queue without notifying (qp->valid is 0)
// and as QP.Destroy documents.
func TestUnreliableHeldSendTeardown(t *testing.T) {
	for _, typ := range []QPType{QPTypeUC, QPTypeUD} {
		for _, tc := range []struct {
			name     string
			teardown func(t *testing.T, a *end)
			want     []wcBrief
		}{
			{"modify-err", func(t *testing.T, a *end) {
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
			}, []wcBrief{{1, WCWRFlushErr, WCSend}}},
			{"close", func(t *testing.T, a *end) {
				require.NoError(t, a.dev.Close())
			}, []wcBrief{{1, WCWRFlushErr, WCSend}}},
			{"destroy", func(t *testing.T, a *end) {
				require.NoError(t, a.qp.Destroy())
			}, []wcBrief{}},
		} {
			t.Run(typ.String()+"/"+tc.name, func(t *testing.T) {
				a, b, rc, wr := heldUnreliablePair(t, typ)
				rc.refuse.Store(true)
				_, err := a.qp.PostSend(wr)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					a.qp.mu.Lock()
					defer a.qp.mu.Unlock()
					return a.qp.localDrop.holding()
				}, testutil.Bound(), 100*time.Microsecond, "the refused datagram was never held")
				require.Empty(t, briefs(pollAll(a.cq)), "a refused datagram has not left: its work request has not completed")
				tc.teardown(t, a)
				got := pollAll(a.cq)
				if tc.name == "modify-err" && len(got) == 0 {
					// A back-off's retry of the held datagram may be
					// under way as the QP enters ERR: that pass, refused
					// again, keeps nothing and completes the work request
					// once it ends, after Modify has returned (rxe's
					// flush, in its completer task, is asynchronous too).
					got = waitWCs(t, a.cq, len(tc.want))
				}
				require.Equal(t, tc.want, briefs(got), "completions of the teardown")
				rc.refuse.Store(false)
				a.qp.Query() // the QP's lock: a step under way has ended
				if tc.name == "modify-err" {
					// The QP in ERR sends nothing more: give a held
					// datagram the time of a few back-offs.
					time.Sleep(5 * time.Millisecond)
					a.qp.Query()
				}
				require.Empty(t, pollAll(b.cq), "the refused datagram was sent after all")
				require.Empty(t, briefs(pollAll(a.cq)), "a second completion")
			})
		}
	}
}
