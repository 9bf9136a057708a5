package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUnreliableSQD: a UC or UD QP drains its send queue as an RC QP does
// (kernel ib_modify_qp_is_ok lists RTS→SQD, SQD→SQD and SQD→RTS for UC and
// UD, and rxe runs them for every QP type): RTS→SQD raises SQ_DRAINED when
// asked, a work request posted in SQD waits, SQD→SQD and SQD→RTS take the
// type's optional attributes and no other, and RTS sends the waiting one.
func TestUnreliableSQD(t *testing.T) {
	for _, c := range []struct {
		typ          QPType
		sqdOpt, back QPAttrMask // SQD→SQD's optional attributes, SQD→RTS's
		refused      QPAttrMask // one neither takes
	}{
		{QPTypeUC, QPAttrAV | QPAttrAccessFlags | QPAttrPKeyIndex, QPAttrCurState | QPAttrAccessFlags, QPAttrQKey},
		{QPTypeUD, QPAttrPKeyIndex | QPAttrQKey, QPAttrCurState | QPAttrQKey, QPAttrAccessFlags},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a, b := newTypedEnd(t, da, c.typ), newTypedEnd(t, db, c.typ)
			const qkey = 0x11111111
			wr := SendWR{ID: 9, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 100)}}
			aimUnreliable(t, c.typ, a, b, qkey, &wr)
			postRecvs(t, b, 1, 4096)

			require.ErrorIs(t, a.qp.Modify(&QPAttr{State: QPSSQD, Timeout: 14}, QPAttrState|QPAttrTimeout), ErrInvalidArgument,
				"RTS to SQD takes only EN_SQD_ASYNC_NOTIFY")
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify))
			require.Equal(t, QPSSQD, a.qp.State())
			waitEvent(t, da, EventSQDrained)

			_, err := a.qp.PostSend(wr)
			require.NoError(t, err)
			noWC(t, a.cq, 30*time.Millisecond)

			at := QPAttr{State: QPSSQD, CurState: QPSSQD, Port: 1, QKey: qkey, AccessFlags: AccessRemoteWrite,
				AH: AH{DGID: db.GID(), UDPPort: db.Addr().Port()}}
			require.ErrorIs(t, a.qp.Modify(&at, QPAttrState|c.refused), ErrInvalidArgument)
			require.NoError(t, a.qp.Modify(&at, QPAttrState|c.sqdOpt))
			at.State = QPSRTS
			require.ErrorIs(t, a.qp.Modify(&at, QPAttrState|c.refused), ErrInvalidArgument)
			require.NoError(t, a.qp.Modify(&at, QPAttrState|c.back))
			require.Equal(t, QPSRTS, a.qp.State())

			wc := waitWC(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status)
			require.Equal(t, uint64(9), wc.ID)
			require.Equal(t, WCSuccess, waitWC(t, b.cq).Status)
		})
	}
}
