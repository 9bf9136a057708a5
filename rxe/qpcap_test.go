package rxe

import (
	"fmt"
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
		{"recv-sge-above-limit", QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxRecvSGE: maxSGE + 1}, "max_recv_sge"},
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

// TestCreateQPSendCapsWidened: as rxe_init_sq sizes a send WQE for the
// larger of max_send_sge SGEs (16 bytes each) and max_inline_data bytes,
// and reports both capabilities that the WQE holds, a QP takes inline data
// up to 16 bytes per SGE asked for, and SGEs up to the inline bytes asked
// for over 16. Cap reports them, and PostSend honours them.
func TestCreateQPSendCapsWidened(t *testing.T) {
	cases := []struct {
		ask, want QPCap
	}{
		{QPCap{MaxSendSGE: 1}, QPCap{MaxSendSGE: 1, MaxInlineData: 16}},
		{QPCap{MaxSendSGE: 4}, QPCap{MaxSendSGE: 4, MaxInlineData: 64}},
		{QPCap{MaxSendSGE: 1, MaxInlineData: 100}, QPCap{MaxSendSGE: 6, MaxInlineData: 100}},
		{QPCap{MaxSendSGE: 4, MaxInlineData: 64}, QPCap{MaxSendSGE: 4, MaxInlineData: 64}},
		{QPCap{MaxSendSGE: 2, MaxInlineData: 40}, QPCap{MaxSendSGE: 2, MaxInlineData: 40}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("sge-%d-inline-%d", c.ask.MaxSendSGE, c.ask.MaxInlineData), func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a := smallEnd(t, da, nil, qpOpts{})
			b := smallEnd(t, db, nil, qpOpts{})
			ask := c.ask
			ask.MaxSendWR, ask.MaxRecvWR, ask.MaxRecvSGE = 8, 8, 1
			qp, err := a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: ask})
			require.NoError(t, err)
			require.NoError(t, a.qp.Destroy())
			a.qp = qp
			got := qp.Cap()
			require.Equal(t, c.want.MaxSendSGE, got.MaxSendSGE)
			require.Equal(t, c.want.MaxInlineData, got.MaxInlineData)
			link(t, a, b, qpOpts{}, qpOpts{})

			n := c.want.MaxInlineData
			_, err = b.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{b.mr.SGE(0, 1024)}})
			require.NoError(t, err)
			_, err = qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled | SendInline, InlineData: make([]byte, n)})
			require.NoError(t, err, "inline SEND of %d bytes", n)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			sges := make([]SGE, c.want.MaxSendSGE)
			for i := range sges {
				sges[i] = a.mr.SGE(8*i, 8)
			}
			_, err = b.qp.PostRecv(RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(0, 1024)}})
			require.NoError(t, err)
			_, err = qp.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: sges})
			require.NoError(t, err, "SEND of %d SGEs", len(sges))
			require.Equal(t, []wcBrief{{2, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			_, err = qp.PostSend(SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled | SendInline, InlineData: make([]byte, n+1)})
			require.ErrorIs(t, err, ErrInvalidArgument, "one byte over the inline capability")
		})
	}
}

// TestCreateQPOnSRQIgnoresRecvCaps: a QP on an SRQ takes its receive WQEs
// from the SRQ, so its receive capabilities do not apply: CreateQP accepts
// any max_recv_wr and max_recv_sge, as rxe_qp_chk_cap checks neither when
// the QP has an SRQ, and Cap reports 0 for both (the SRQ's MaxWR and
// MaxSGE are what apply).
func TestCreateQPOnSRQIgnoresRecvCaps(t *testing.T) {
	r := newModifyRig(t)
	srq, err := r.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 2})
	require.NoError(t, err)
	cases := []struct {
		name string
		cap  QPCap
	}{
		{"recv-sge-above-limit", QPCap{MaxSendWR: 4, MaxRecvSGE: maxSGE + 1}},
		{"recv-sge-negative", QPCap{MaxSendWR: 4, MaxRecvSGE: -1}},
		{"recv-wr-above-limit", QPCap{MaxSendWR: 4, MaxRecvWR: maxQPWR + 1, MaxRecvSGE: 1}},
		{"recv-caps-valid", QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxRecvSGE: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qp, err := r.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: r.cq, RecvCQ: r.cq, SRQ: srq, Cap: c.cap})
			require.NoError(t, err)
			defer func() { require.NoError(t, qp.Destroy()) }()
			got := qp.Cap()
			require.Zero(t, got.MaxRecvWR, "max_recv_wr of a QP on an SRQ")
			require.Zero(t, got.MaxRecvSGE, "max_recv_sge of a QP on an SRQ")
			require.Equal(t, got, qp.Query().Cap)
		})
	}
	o := CMOptions{PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, SRQ: srq, Cap: QPCap{MaxRecvSGE: maxSGE + 1}}
	require.NoError(t, o.defaults(r.dev), "CMOptions with an SRQ")
}
