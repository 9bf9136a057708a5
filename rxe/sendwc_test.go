package rxe

import (
	"testing"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSendWCWithImmFlag: a send completion of SEND_WITH_IMM or
// RDMA_WRITE_WITH_IMM carries IBV_WC_WITH_IMM and the message length in
// byte_len, whatever the QP type: kernel rxe make_send_cqe sets them for
// every send WQE it completes, and its UC and UD WQEs are completed by the
// same completer as RC's.
func TestSendWCWithImmFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  QPType
		op   WROpcode
		imm  bool
	}{
		{"UC SEND", QPTypeUC, WRSend, false},
		{"UC SEND_WITH_IMM", QPTypeUC, WRSendWithImm, true},
		{"UC RDMA_WRITE", QPTypeUC, WRRDMAWrite, false},
		{"UC RDMA_WRITE_WITH_IMM", QPTypeUC, WRRDMAWriteWithImm, true},
		{"UD SEND", QPTypeUD, WRSend, false},
		{"UD SEND_WITH_IMM", QPTypeUD, WRSendWithImm, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a, b := newTypedEnd(t, da, tc.typ), newTypedEnd(t, db, tc.typ)
			wr := SendWR{ID: 9, Opcode: tc.op, Imm: 0x01020304, Flags: SendSignaled,
				SGList: []SGE{{Addr: a.mr.Addr(), Length: 100, LKey: a.mr.LKey()}}}
			aimUnreliable(t, tc.typ, a, b, 0x1234, &wr)
			if tc.typ == QPTypeUC {
				wr.RemoteAddr, wr.RKey = b.mr.Addr()+4096, b.mr.RKey()
			}
			postRecvs(t, b, 1, 4096)
			_, err := a.qp.PostSend(wr)
			require.NoError(t, err)
			wc := waitWC(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status)
			require.Equal(t, uint64(9), wc.ID)
			require.Equal(t, verbs.WCOpcodeOf(tc.op), wc.Opcode)
			require.Equal(t, uint32(100), wc.ByteLen)
			require.Equal(t, a.qp.QPN(), wc.QPNum)
			require.Equal(t, tc.imm, wc.Flags&WCFlagWithImm != 0, "wc_flags %v", wc.Flags)
		})
	}
}
