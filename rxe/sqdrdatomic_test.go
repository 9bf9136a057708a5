package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestSQDModifyMaxRdAtomicReachesRequester: MAX_QP_RD_ATOMIC given on
// SQD→SQD (IBA 10.3.1 lists it as optional there) bounds the READs the
// requester keeps outstanding after SQD→RTS, as rxe_qp_from_attr sets
// qp->attr.max_rd_atomic that rxe's requester checks against its
// outstanding READs and atomics. a goes from 16 to 1 toward a silent
// peer: of four READs only the first is sent.
func TestSQDModifyMaxRdAtomicReachesRequester(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{timeout: 14}, qpOpts{}) // 67 ms: no retransmission meanwhile
	toSQD(t, a.qp)
	require.NoError(t, a.qp.Modify(&QPAttr{MaxRdAtomic: 1}, QPAttrMaxQPRdAtomic))
	require.Equal(t, 1, a.qp.Query().MaxRdAtomic)
	require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPAttrState))
	for i := range 4 {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled,
			SGList: []SGE{a.mr.SGE(8*i, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return a.qp.Counters().Requester.PacketsSent > 0 },
		testutil.Bound(), 100*time.Microsecond)
	time.Sleep(5 * time.Millisecond)
	// A host that stalls the test past the ACK timeout makes the
	// requester send the READ again: a resend is not a second READ.
	c := a.qp.Counters().Requester
	require.Equal(t, uint64(1), c.PacketsSent-c.Retransmits, "one READ outstanding at most")
}
