package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUnreliableSendCQOverflow: a UC or UD send completion that finds the
// send CQ full does what an RC one does (TestCQOverflow/send-cq;
// docs/api.md: overflow raises CQ_ERR and moves the QP to ERR): the CQ
// raises CQ_ERR once, the QP enters ERR and its later work requests are
// flushed, rather than the completion being dropped while the QP goes on.
func TestUnreliableSendCQOverflow(t *testing.T) {
	for _, typ := range []QPType{QPTypeUC, QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a, b := newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
			tiny, err := da.CreateCQ(2, -1)
			require.NoError(t, err)
			qp, err := a.pd.CreateQP(QPInitAttr{Type: typ, SendCQ: tiny, RecvCQ: a.cq,
				Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			require.NoError(t, a.qp.Destroy())
			a.qp = qp
			wr := SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}}}
			aimUnreliable(t, typ, a, b, 5, &wr)
			postRecvs(t, b, 8, 64)
			for i := range 3 {
				wr.ID = uint64(i)
				_, err := a.qp.PostSend(wr)
				require.NoError(t, err)
			}
			requireSendCQOverflowed(t, da, tiny, a.qp, WCSend)
			// Later work requests are flushed.
			wr.ID = 9
			_, err = a.qp.PostSend(wr)
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{9, WCWRFlushErr, WCSend}}, briefs(waitWCs(t, tiny, 1)))
			require.Empty(t, drainEvents(da, 10*time.Millisecond), "CQ_ERR once")
		})
	}
}
