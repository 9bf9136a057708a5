package rxe

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// postWatch is a netdev.Conn that counts the datagrams it writes by where
// the write ran: within a call of QP.PostSend (on the poster's goroutine)
// or elsewhere (the transmit goroutine, a receive goroutine's pass).
type postWatch struct {
	netdev.Conn
	mu      sync.Mutex
	inPost  int // datagrams written within QP.PostSend
	outside int // datagrams written anywhere else
}

// WriteBatch counts msgs before writing them, so that the count is
// complete by the time the peer can answer them; what the inner Conn does
// not take is taken off again.
func (c *postWatch) WriteBatch(msgs []netdev.Message) (int, error) {
	count := &c.outside
	if withinPostSend() {
		count = &c.inPost
	}
	c.mu.Lock()
	*count += len(msgs)
	c.mu.Unlock()
	n, err := c.Conn.WriteBatch(msgs)
	c.mu.Lock()
	*count -= len(msgs) - n
	c.mu.Unlock()
	return n, err
}

// counts returns the datagrams written within PostSend and elsewhere.
func (c *postWatch) counts() (inPost, outside int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inPost, c.outside
}

// withinPostSend reports whether QP.PostSend is on the calling goroutine's
// stack.
func withinPostSend() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*QP).PostSend") {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestPostSendInline checks where PostSend's packets are written. On a QP
// whose CQ has been busy-polled, a PostSend that finds its vector's
// transmit path free builds and writes the request itself
// (QP.schedulePosted, vector.sendNow): every packet of the WRITE has been
// handed to the netdev, on the caller's goroutine, when PostSend returns.
// With Options.NoInlineSend, or on a CQ nobody busy-polls, the transmit
// goroutine writes them and PostSend writes none. Everything runs on
// synctest's virtual clock: before each post, synctest.Wait leaves every
// device goroutine blocked, so no transmit pass is under way when the
// post tries the transmit path, and the result does not depend on timing.
func TestPostSendInline(t *testing.T) {
	const posts, size = 8, 3000 // three packets each at MTU 1024
	for _, tc := range []struct {
		name       string
		noInline   bool
		busy       bool // BusyPoll the CQ once before posting
		wantInline bool
	}{
		{"busy-polled", false, true, true},
		{"busy-polled/NoInlineSend", true, true, false},
		{"not-busy-polled", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
				watch := &postWatch{Conn: pa}
				da, db := openPairWith(t, watch, pb, Options{LinkMTU: 9000, NoInlineSend: tc.noInline}, "inline-a", "inline-b")
				a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
				connect(t, a, b, MTU1024)
				if tc.busy {
					// The CQ is empty: BusyPoll returns nothing, and from now
					// on PostSend on a QP using it may send inline.
					require.Zero(t, a.cq.BusyPoll(make([]WC, 1)))
				}
				for i := range posts {
					synctest.Wait()
					in0, out0 := watch.counts()
					_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
						SGList: []SGE{a.mr.SGE(0, size)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
					require.NoError(t, err)
					in, _ := watch.counts()
					if tc.wantInline {
						require.Equal(t, 3, in-in0, "post %d: the WRITE's packets written by PostSend", i)
					} else {
						require.Zero(t, in-in0, "post %d: PostSend wrote packets itself", i)
					}
					wc := waitVirtual(t, a.cq)
					require.Equal(t, WCSuccess, wc.Status)
					require.Equal(t, uint64(i), wc.ID)
					in1, out1 := watch.counts()
					require.GreaterOrEqual(t, in1-in0+out1-out0, 3, "post %d: the WRITE's packets were written", i)
				}
				require.Zero(t, a.qp.Counters().Requester.Retransmits)
			})
		})
	}
}
