package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCreateQPCaps: CreateQP takes the capabilities kernel rxe takes
// (rxe_qp_chk_cap: each at most the device's limit; rxe_queue_init: "num_elem
// == 0 is allowed"), so a QP may have no receive queue (one that only
// sends, or only initiates RDMA READ and WRITE) or no send queue (one that
// only receives). The capabilities it reports are at least those asked
// for (ibv_create_qp), and a zero-depth receive queue takes no WQE.
func TestCreateQPCaps(t *testing.T) {
	r := newModifyRig(t)
	cases := []struct {
		name string
		cap  QPCap
		err  string // "" if CreateQP succeeds
	}{
		{"both-queues", QPCap{MaxSendWR: 4, MaxRecvWR: 4}, ""},
		{"no-send-queue", QPCap{MaxSendWR: 0, MaxRecvWR: 4}, ""},
		{"no-recv-queue", QPCap{MaxSendWR: 4, MaxRecvWR: 0}, ""},
		{"limits", QPCap{MaxSendWR: maxQPWR, MaxRecvWR: maxQPWR, MaxSendSGE: maxSGE, MaxRecvSGE: maxSGE, MaxInlineData: maxInlineData}, ""},
		{"send-wr-negative", QPCap{MaxSendWR: -1, MaxRecvWR: 4}, "max_send_wr"},
		{"recv-wr-negative", QPCap{MaxSendWR: 4, MaxRecvWR: -1}, "max_recv_wr"},
		{"send-wr-above-limit", QPCap{MaxSendWR: maxQPWR + 1, MaxRecvWR: 4}, "max_send_wr"},
		{"recv-wr-above-limit", QPCap{MaxSendWR: 4, MaxRecvWR: maxQPWR + 1}, "max_recv_wr"},
		{"send-sge-above-limit", QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: maxSGE + 1}, "max_send_sge"},
		{"inline-above-limit", QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxInlineData: maxInlineData + 1}, "max_inline_data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qp, err := r.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: r.cq, RecvCQ: r.cq, Cap: c.cap})
			if c.err != "" {
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			defer func() { require.NoError(t, qp.Destroy()) }()
			got := qp.Cap()
			require.GreaterOrEqual(t, got.MaxSendWR, c.cap.MaxSendWR)
			require.GreaterOrEqual(t, got.MaxRecvWR, c.cap.MaxRecvWR)
			require.GreaterOrEqual(t, got.MaxSendSGE, c.cap.MaxSendSGE)
			require.GreaterOrEqual(t, got.MaxRecvSGE, c.cap.MaxRecvSGE)
			require.GreaterOrEqual(t, got.MaxInlineData, c.cap.MaxInlineData)
			if c.cap.MaxRecvWR == 0 {
				a := r.attr(QPSReset)
				a.State = QPSInit
				require.NoError(t, qp.Modify(&a, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
				n, err := qp.PostRecv(RecvWR{ID: 1})
				require.ErrorIs(t, err, ErrNoResources, "a receive queue of 0 WRs")
				require.Zero(t, n)
			}
		})
	}
}
