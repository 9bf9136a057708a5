package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// misuse is what the cases of TestVerbsMisuse act on: RC, UC and UD QPs
// in RTS on device a (the RC one connected to device b's), a second PD of
// a, and objects of device b.
type misuse struct {
	rc, uc, ud *end
	pd2        *PD
	peer       *end // device b's RC end
	srqB       *SRQ // an SRQ of device b
}

func newMisuse(t *testing.T) *misuse {
	t.Helper()
	da, db, _, _ := pipeDevices(t)
	m := &misuse{}
	m.rc, m.peer = smallEnd(t, da, nil, qpOpts{}), smallEnd(t, db, nil, qpOpts{})
	link(t, m.rc, m.peer, qpOpts{}, qpOpts{})
	m.uc, m.ud = newTypedEnd(t, da, QPTypeUC), newTypedEnd(t, da, QPTypeUD)
	connectUC(t, m.uc, newTypedEnd(t, db, QPTypeUC))
	readyUD(t, m.ud, 0x1234)
	var err error
	m.pd2, err = da.AllocPD()
	require.NoError(t, err)
	m.srqB, err = m.peer.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	return m
}

// TestVerbsMisuse: verbs calls with arguments the device cannot take
// return an error wrapping the sentinel docs/api.md names for it, with a
// message naming what was wrong, and change nothing: a refused PostSend
// posts nothing and leaves the QP in RTS, a refused CreateQP leaves its
// PD and CQs free (the checks of rxe_create_qp and ibv_create_qp's
// EINVAL; each QP type's work requests as rxe_wr_opcode_info allows them
// for it: IBA 9.8.3 for UC, 9.8.4 for UD). Misuse covered elsewhere
// (TestBadVerbsArguments, TestPostSendRejectsBadWR,
// TestPostRecvRejectsBadWR, TestLocalErrors, TestPostInWrongState,
// TestQPCallsAfterDestroyFailClosed, TestVerbsAfterClose, TestSRQAttach,
// the Connect tests) is not repeated here.
func TestVerbsMisuse(t *testing.T) {
	post := func(e func(*misuse) *end, wr SendWR) func(*misuse) error {
		return func(m *misuse) error {
			x := e(m)
			wr.SGList = []SGE{x.mr.SGE(0, 8)}
			n, err := x.qp.PostSend(wr)
			require.Zero(t, n)
			require.Equal(t, QPSRTS, x.qp.State())
			return err
		}
	}
	rc := func(m *misuse) *end { return m.rc }
	uc := func(m *misuse) *end { return m.uc }
	ud := func(m *misuse) *end { return m.ud }
	createQP := func(attr func(*misuse) QPInitAttr) func(*misuse) error {
		return func(m *misuse) error {
			a := attr(m)
			a.Cap = QPCap{MaxSendWR: 1, MaxRecvWR: 1}
			_, err := m.pd2.CreateQP(a)
			return err
		}
	}
	for _, tc := range []struct {
		name string
		call func(*misuse) error
		want error
		says string // in the error's message
	}{
		{"CreateQP/without CQs", createQP(func(m *misuse) QPInitAttr { return QPInitAttr{Type: QPTypeRC} }),
			ErrInvalidArgument, "CQ"},
		{"CreateQP/raw packet type", createQP(func(m *misuse) QPInitAttr {
			return QPInitAttr{Type: QPType(8), SendCQ: m.rc.cq, RecvCQ: m.rc.cq}
		}), ErrInvalidArgument, "not supported"},
		{"CreateQP/send CQ of another device", createQP(func(m *misuse) QPInitAttr {
			return QPInitAttr{Type: QPTypeRC, SendCQ: m.peer.cq, RecvCQ: m.rc.cq}
		}), ErrInvalidArgument, "another device"},
		{"CreateQP/receive CQ of another device", createQP(func(m *misuse) QPInitAttr {
			return QPInitAttr{Type: QPTypeRC, SendCQ: m.rc.cq, RecvCQ: m.peer.cq}
		}), ErrInvalidArgument, "another device"},
		{"CreateQP/SRQ of another device", createQP(func(m *misuse) QPInitAttr {
			return QPInitAttr{Type: QPTypeRC, SendCQ: m.rc.cq, RecvCQ: m.rc.cq, SRQ: m.srqB}
		}), ErrInvalidArgument, "another device"},
		{"CreateQP/deallocated PD", func(m *misuse) error {
			require.NoError(t, m.pd2.Dealloc())
			_, err := m.pd2.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: m.rc.cq, RecvCQ: m.rc.cq})
			return err
		}, ErrClosed, "closed"},
		{"RegMR/nil buffer", func(m *misuse) error {
			_, err := m.pd2.RegMR(nil, AccessLocalWrite)
			return err
		}, ErrInvalidArgument, "empty buffer"},
		{"CreateCQ/vector beyond the device's", func(m *misuse) error {
			_, err := m.rc.dev.CreateCQ(4, len(m.rc.dev.Vectors()))
			return err
		}, ErrInvalidArgument, "completion vector"},
		{"SetPeerReceiveBuffer/negative", func(m *misuse) error { return m.rc.qp.SetPeerReceiveBuffer(-1, 1) },
			ErrInvalidArgument, "peer receive buffer"},
		{"RC PostSend/LOCAL_INV", post(rc, SendWR{Opcode: WRLocalInv}), ErrInvalidArgument, "opcode"},
		{"RC PostSend/BIND_MW", post(rc, SendWR{Opcode: WRBindMW}), ErrInvalidArgument, "opcode"},
		{"UC PostSend/RDMA READ", post(uc, SendWR{Opcode: WRRDMARead}), ErrInvalidArgument, "UC QP sends"},
		{"UC PostSend/atomic", post(uc, SendWR{Opcode: WRAtomicFetchAndAdd}), ErrInvalidArgument, "UC QP sends"},
		{"UC PostSend/ATOMIC_WRITE", post(uc, SendWR{Opcode: WRAtomicWrite}), ErrInvalidArgument, "UC QP sends"},
		{"UC PostSend/SEND_WITH_INV", post(uc, SendWR{Opcode: WRSendWithInv}), ErrInvalidArgument, "UC QP sends"},
		{"UD PostSend/RDMA WRITE", post(ud, SendWR{Opcode: WRRDMAWrite}), ErrInvalidArgument, "UD QP sends"},
		{"UD PostSend/RDMA WRITE WITH IMM", post(ud, SendWR{Opcode: WRRDMAWriteWithImm}), ErrInvalidArgument, "UD QP sends"},
		{"UD PostSend/RDMA READ", post(ud, SendWR{Opcode: WRRDMARead}), ErrInvalidArgument, "UD QP sends"},
		{"UD PostSend/atomic", post(ud, SendWR{Opcode: WRAtomicCmpAndSwp}), ErrInvalidArgument, "UD QP sends"},
		{"UD PostSend/SEND_WITH_INV", post(ud, SendWR{Opcode: WRSendWithInv}), ErrInvalidArgument, "UD QP sends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMisuse(t)
			err := tc.call(m)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.says)
		})
	}
}
