package rxe

import (
	"testing"
	"time"

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

// TestCloseSendsCompletedDatagram: a UD SEND completes when its packet is
// built, before the batch holding it is written; a Device.Close that
// comes between the two still writes the batch before it closes the
// socket, so a send that completed with success goes on the wire (kernel
// rxe completes a UC or UD WQE once its skb is handed to the IP layer,
// which a later teardown does not recall).
func TestCloseSendsCompletedDatagram(t *testing.T) {
	ca, cb := connPair(t, "udp")
	gc := &gateConn{Conn: ca, armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{})}
	da, db := openPair(t, gc, cb)
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	readyUD(t, a, 1)
	readyUD(t, b, 1)
	postRecvs(t, b, 1, 4096)
	ah, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
	require.NoError(t, err)

	close(gc.armed)
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 1,
		SGList: []SGE{a.mr.SGE(0, 64)}})
	require.NoError(t, err)
	select {
	case <-gc.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the datagram was never written")
	}
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status, "completed while its batch is being written")
	closed := make(chan struct{})
	go func() {
		da.Close()
		close(closed)
	}()
	require.Eventually(t, da.closed.Load, 5*time.Second, 100*time.Microsecond, "Close did not start")
	close(gc.release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the batch was written")
	}
	wcs := make([]WC, 1)
	for end := time.Now().Add(2 * time.Second); b.cq.Poll(wcs) == 0; {
		require.True(t, time.Now().Before(end), "the completed SEND never arrived")
		time.Sleep(time.Millisecond)
	}
	wc := wcs[0]
	require.Equal(t, WCSuccess, wc.Status)
	require.Equal(t, uint32(GRHSize+64), wc.ByteLen)
}
