package rxe

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// gateConn holds a WriteBatch, once armed, until it is released.
type gateConn struct {
	netdev.Conn
	armed   chan struct{} // closed by the test to arm the gate
	entered chan struct{} // closed when a held WriteBatch starts
	release chan struct{} // closed by the test to let it go on
}

func (c *gateConn) WriteBatch(msgs []netdev.Message) (int, error) {
	select {
	case <-c.armed:
		select {
		case <-c.entered:
		default:
			close(c.entered)
			<-c.release
		}
	default:
	}
	return c.Conn.WriteBatch(msgs)
}

// gatedUDSend opens two devices over a netdev of kind, the first behind a
// gateConn, with a UD QP on each and a receive posted on the second, and
// posts one signaled 64-byte UD SEND from the first: its batch's write
// waits in the gate (gc.entered closes when it does) until release, which
// may be called more than once.
func gatedUDSend(t *testing.T, kind string) (gc *gateConn, da *Device, a, b *end, release func()) {
	t.Helper()
	ca, cb := connPair(t, kind)
	gc = &gateConn{Conn: ca, armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{})}
	da, db := openPair(t, gc, cb)
	a, b = newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	ah := aimUD(t, a, b, 1)
	postRecvs(t, b, 1, 4096)
	release = sync.OnceFunc(func() { close(gc.release) })
	close(gc.armed)
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 1,
		SGList: []SGE{a.mr.SGE(0, 64)}})
	if err != nil {
		release()
	}
	require.NoError(t, err)
	return gc, da, a, b, release
}

// TestCloseSendsCompletedDatagram: a Device.Close that comes while the
// batch holding a UD SEND is being written still writes the batch before
// it closes the socket, and the SEND completes with success once it is
// written, before Close returns (kernel rxe completes a UC or UD WQE once
// its skb is handed to the IP layer, which a later teardown does not
// recall).
func TestCloseSendsCompletedDatagram(t *testing.T) {
	gc, da, a, b, release := gatedUDSend(t, "udp")
	// A failed require below lets the write go, or the cleanup's Close
	// would wait for it until the binary's timeout.
	defer release()
	select {
	case <-gc.entered:
	case <-time.After(testutil.Bound()):
		t.Fatal("the datagram was never written")
	}
	require.Empty(t, briefs(pollAll(a.cq)), "completed before its batch was written")
	closed := make(chan struct{})
	go func() {
		da.Close()
		close(closed)
	}()
	require.Eventually(t, da.closed.Load, testutil.Bound(), 100*time.Microsecond, "Close did not start")
	release()
	select {
	case <-closed:
	case <-time.After(testutil.Bound()):
		t.Fatal("Close did not return after the batch was written")
	}
	require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(pollAll(a.cq)), "the SEND's completion once Close returned")
	wcs := make([]WC, 1)
	for end := time.Now().Add(2 * time.Second); b.cq.Poll(wcs) == 0; {
		require.True(t, time.Now().Before(end), "the completed SEND never arrived")
		time.Sleep(time.Millisecond)
	}
	wc := wcs[0]
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, uint32(GRHSize+64), wc.ByteLen)
}

// TestCloseSettlesSendCutShort: when the write of a UD SEND's batch
// outlasts the second Device.Close waits for it, the close cuts the write
// short: the SEND never leaves, and its work request still completes,
// once, with WR_FLUSH_ERR, before Close returns (the outstanding work of a
// QP that Close moves to ERR, as rxe flushes a WQE never handed to IP),
// not with success and not after Close returned.
func TestCloseSettlesSendCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gc, da, a, b, release := gatedUDSend(t, "pipe")
		defer release()
		<-gc.entered
		closed := make(chan struct{})
		go func() {
			da.Close()
			close(closed)
		}()
		// On the bubble's clock: Close waits its second for the write,
		// closes the socket and stops the QPs; it then waits for the
		// transmit goroutine still in the write.
		time.Sleep(closeWriteWait + time.Millisecond)
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while its transmit goroutine was writing")
		default:
		}
		require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCSend}}, briefs(pollAll(a.cq)), "the SEND's completion before Close returns")
		release()
		<-closed
		synctest.Wait()
		require.Empty(t, briefs(pollAll(a.cq)), "a completion after Close returned")
		require.Empty(t, pollAll(b.cq), "the SEND left after the close")
	})
}
