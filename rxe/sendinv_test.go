package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendWithInvalidateTwice: a SEND_WITH_INV naming an R_Key that an
// earlier SEND_WITH_INV has invalidated already succeeds again, as kernel
// rxe's rxe_invalidate_mr moves a fast-registration MR whose key matches
// to the free state whatever state it is in. Only a key that names no
// region, or one that may not be invalidated remotely, is the class J
// error that moves the QP to ERR.
func TestSendWithInvalidateTwice(t *testing.T) {
	da, db, _, _ := pipeDevices(t)
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	link(t, a, b, qpOpts{}, qpOpts{})
	target, err := b.pd.RegMRWith(make([]byte, 4096), MRAttr{Access: AccessLocalWrite | AccessRemoteWrite, RemoteInvalidate: true})
	require.NoError(t, err)

	for i := range 2 {
		_, err := b.qp.PostRecv(RecvWR{ID: uint64(10 + i), SGList: []SGE{b.mr.SGE(i*64, 64)}})
		require.NoError(t, err)
	}
	for i := range 2 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSendWithInv, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(0, 16)}, InvalidateRKey: target.RKey()})
		require.NoError(t, err)
	}
	for i, wc := range waitWCs(t, b.cq, 2) {
		require.Equal(t, WCSuccess, wc.Status, "receive %d", i)
		require.Equal(t, uint64(10+i), wc.ID)
		require.NotZero(t, wc.Flags&WCFlagWithInv)
		require.Equal(t, target.RKey(), wc.Imm)
	}
	for i, wc := range waitWCs(t, a.cq, 2) {
		require.Equal(t, WCSuccess, wc.Status, "send %d", i)
	}
	require.Equal(t, QPSRTS, b.qp.State())
	require.Zero(t, db.Counters().QPErrors)
}
