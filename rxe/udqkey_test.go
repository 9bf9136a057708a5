package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUDControlledQKeyAfterModify: IBA 10.2.5 — a work request whose
// Q_Key has the high-order bit set is sent with the QP's Q_Key. After
// Modify(RTS→RTS, QKEY) the QP's Q_Key is the new one, and work requests
// posted from then on carry it; they used to carry the key of RTS.
func TestUDControlledQKeyAfterModify(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	readyUD(t, a, 0x80000001)
	readyUD(t, b, 0x80000002)
	// Both QPs now agree on Q_Key 0x80000002.
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS, QKey: 0x80000002}, QPAttrState|QPAttrQKey))
	require.Equal(t, uint32(0x80000002), a.qp.Query().QKey)
	ah, err := a.pd.CreateAH(AH{DGID: db.GID(), UDPPort: db.Addr().Port()})
	require.NoError(t, err)
	postRecvs(t, b, 1, 2048)
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x80000000,
		SGList: []SGE{{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey()}}})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	// The datagram arrives (it used to carry the QP's old Q_Key and be
	// dropped as a mismatch).
	require.Equal(t, uint32(16+GRHSize), waitWC(t, b.cq).ByteLen)
	require.Zero(t, b.qp.Counters().Unreliable.QKeyMismatch)
}
