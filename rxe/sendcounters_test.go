package rxe

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// scriptedPair opens two devices over the in-memory pipe, the first
// writing through a scriptConn (every write whole until steps are set) in
// local-drop mode mode; both close at the test's end.
func scriptedPair(t *testing.T, mode LocalDropMode) (sc *scriptConn, da, db *Device) {
	t.Helper()
	ca, cb := connPair(t, "pipe")
	sc = &scriptConn{Conn: ca, rest: writeStep{write: -1}}
	da, err := Open(sc, Options{Name: "rxe-a", LinkMTU: 9000, OwnConn: true, LocalDropMode: mode})
	require.NoError(t, err)
	db, err = Open(cb, Options{Name: "rxe-b", LinkMTU: 9000, OwnConn: true})
	if err != nil {
		da.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		da.Close()
		db.Close()
	})
	return sc, da, db
}

// TestSendCountersByOutcome: a datagram counts in its QP's and its
// device's sent_pkts only once the host has taken it, as rxe_xmit_packet
// counts RXE_CNT_SENT_PKTS only after a send that did not fail; one the
// netdev refuses for good (not a local drop) counts in send_err, and one
// discarded after a local drop (LocalDropTimeout) in local drops; both
// have left the QP's hands, and their UD work requests complete, as a
// datagram lost on the wire does (vector.send).
func TestSendCountersByOutcome(t *testing.T) {
	errHost := errors.New("no route to the test's host")
	for _, tc := range []struct {
		name                     string
		mode                     LocalDropMode
		first                    writeStep
		sent, sendErr, localDrop uint64
	}{
		{"written", LocalDropAdaptive, writeStep{write: -1}, 3, 0, 0},
		{"written-timeout-mode", LocalDropTimeout, writeStep{write: -1}, 3, 0, 0},
		{"write-error", LocalDropAdaptive, writeStep{write: 0, err: errHost}, 2, 1, 0},
		{"local-drop-discarded", LocalDropTimeout, writeStep{write: 0}, 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, da, db := scriptedPair(t, tc.mode)
			a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
			ah := aimUD(t, a, b, 3)
			postRecvs(t, b, 4, 256)
			sc.mu.Lock()
			sc.steps = []writeStep{tc.first}
			sc.mu.Unlock()
			for id := uint64(1); id <= 3; id++ {
				_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 64)},
					AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 3})
				require.NoError(t, err)
			}
			var wcs []WC
			require.Eventually(t, func() bool {
				wcs = append(wcs, pollAll(a.cq)...)
				return len(wcs) >= 3
			}, testutil.Bound(), 100*time.Microsecond, "the SENDs did not all complete")
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}, {2, WCSuccess, WCSend}, {3, WCSuccess, WCSend}}, briefs(wcs))
			a.qp.vec.txMu.Lock() // the pass that wrote them has ended
			a.qp.vec.txMu.Unlock()
			qc, dc := a.qp.Counters(), da.Counters()
			require.Equal(t, tc.sent, qc.SentPkts, "the QP's sent_pkts")
			require.Equal(t, tc.sent, dc.SentPkts, "the device's sent_pkts")
			require.Equal(t, tc.sendErr, dc.SendErr, "send_err")
			require.Equal(t, tc.localDrop, dc.LocalDrops, "local drops")
			require.Equal(t, tc.localDrop, qc.LocalDrops, "the QP's local drops")
			var passes uint64
			for _, v := range da.Vectors() {
				passes += v.Passes
			}
			require.Positive(t, passes, "transmit passes that wrote something")
		})
	}
}
