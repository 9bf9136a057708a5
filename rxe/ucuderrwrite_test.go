package rxe

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestUnreliableErrDuringWriteKeepsNothing: a UC or UD QP that enters ERR
// while a transmit pass writes its datagram, which the local host then
// refuses, keeps nothing to send: a QP in ERR sends no more datagrams
// (flushUnreliable), its work request completes with WR_FLUSH_ERR, as
// rxe's completer flushes a WQE its requester rolled back after -EAGAIN
// once the QP is in ERR, and the peer receives nothing.
func TestUnreliableErrDuringWriteKeepsNothing(t *testing.T) {
	for _, typ := range []QPType{QPTypeUC, QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			ca, cb := connPair(t, "pipe")
			entered, release := make(chan struct{}), make(chan struct{})
			sc := &scriptConn{Conn: ca, rest: writeStep{write: -1},
				steps: []writeStep{{entered: entered, release: release, write: 0}}}
			a, b, wr := unreliablePairOver(t, typ, sc, cb)
			letGo := sync.OnceFunc(func() { close(release) })
			defer letGo()
			_, err := a.qp.PostSend(wr)
			require.NoError(t, err)
			select {
			case <-entered:
			case <-time.After(testutil.Bound()):
				t.Fatal("the datagram was never written")
			}
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
			letGo()              // the write refuses the datagram
			a.qp.vec.txMu.Lock() // the pass has ended
			a.qp.vec.txMu.Unlock()
			require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCSend}}, briefs(pollAll(a.cq)),
				"the SEND whose datagram was refused once its QP was in ERR")
			time.Sleep(3 * time.Millisecond) // a few back-offs
			a.qp.Query()
			require.Empty(t, pollAll(b.cq), "the QP in ERR sent its datagram after all")
			require.Empty(t, pollAll(a.cq), "a second completion")
		})
	}
}
