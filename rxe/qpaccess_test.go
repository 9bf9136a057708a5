package rxe

import (
	"fmt"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModifyFlushAccess: the QP access flags may grant the FLUSH rights
// (IBV_ACCESS_FLUSH_GLOBAL, IBV_ACCESS_FLUSH_PERSISTENT). The responder
// executes a FLUSH only if the QP has the placement type's right (rxe
// check_qp_attr_access; responder.checkOpValid), so a Modify that refused
// them left every FLUSH from a peer failing as an invalid request.
func TestModifyFlushAccess(t *testing.T) {
	for _, acc := range []AccessFlags{
		AccessFlushGlobal,
		AccessFlushPersistent,
		AccessRemoteWrite | AccessRemoteRead | AccessFlushGlobal | AccessFlushPersistent,
	} {
		t.Run(fmt.Sprintf("%#x", uint32(acc)), func(t *testing.T) {
			r := newModifyRig(t)
			qp := r.qpIn(QPSReset)
			a := r.attr(QPSReset)
			a.State, a.AccessFlags = QPSInit, acc
			require.NoError(t, qp.Modify(&a, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
			require.Equal(t, acc, qp.Query().AccessFlags)
		})
	}
}

// TestFlushWithQPRight: a FLUSH (global visibility) from the peer to a QP
// given AccessFlushGlobal, into an MR with that right, is executed: the
// responder moves past it and the QP stays in RTS (rxe_resp.c
// check_qp_attr_access, process_flush).
func TestFlushWithQPRight(t *testing.T) {
	da, db, ca, cb := pipeDevices(t)
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	ob := qpOpts{access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessFlushGlobal}
	link(t, a, b, qpOpts{}, ob)
	mr, err := b.pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteWrite|AccessFlushGlobal)
	require.NoError(t, err)

	psn := b.qp.Query().RQPSN
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCFlush, PKey: packet.DefaultPKey, DestQP: b.qp.QPN(), PSN: packet.PSN(psn), AckReq: true},
		RETH: packet.RETHFields{VA: mr.Addr(), RKey: mr.RKey(), DMALen: 8}, FETH: 1}
	injectPacket(t, ca, cb, &h, nil)
	want := (psn + 1) & packet.PSNMask
	require.Eventually(t, func() bool { return b.qp.Query().RQPSN == want }, testutil.Bound(), time.Millisecond)
	require.Equal(t, QPSRTS, b.qp.State())
	require.Zero(t, b.dev.Counters().QPErrors)
}
