package rxe

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			da, db := openPair(t, sc, cb)
			a, b := newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
			wr := SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 64)}}
			if typ == QPTypeUC {
				connectUC(t, a, b)
			} else {
				readyUD(t, a, 3)
				readyUD(t, b, 3)
				ah, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
				require.NoError(t, err)
				wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, b.qp.QPN(), 3
			}
			postRecvs(t, b, 4, 256)
			letGo := sync.OnceFunc(func() { close(release) })
			defer letGo()
			_, err := a.qp.PostSend(wr)
			require.NoError(t, err)
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
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
