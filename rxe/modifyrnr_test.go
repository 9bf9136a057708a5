package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestModifyRTSMinRNRTimerReachesResponder: MIN_RNR_TIMER given on
// RTS→RTS (IBA 10.3.1 lists it as optional there) applies to the RNR NAKs
// the responder sends from then on, as rxe_qp_from_attr sets
// qp->attr.min_rnr_timer that rxe's responder puts in its RNR NAKs. b
// starts with code 1 (10 µs), is moved to code 18 (5.12 ms), and a's SEND
// that finds no receive WQE waits the new time before each retry.
func TestModifyRTSMinRNRTimerReachesResponder(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	require.NoError(t, b.qp.Modify(&QPAttr{MinRNRTimer: 18}, QPAttrMinRNRTimer))
	require.Equal(t, uint8(18), b.qp.Query().MinRNRTimer)
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
	require.NoError(t, err)
	// Each RNR NAK makes a wait 5.12 ms before the retry: in a time T at
	// most T/5.12 ms + 2 more come (with b's old 10 µs code, dozens in
	// 10 ms would). T is measured, so a host that stalls the test
	// meanwhile widens the bound with it.
	require.Eventually(t, func() bool { return a.qp.Counters().Requester.RcvdRNRErr > 0 },
		testutil.Bound(), 100*time.Microsecond, "the SEND draws an RNR NAK")
	n0, t0 := a.qp.Counters().Requester.RcvdRNRErr, time.Now()
	time.Sleep(10 * time.Millisecond)
	n1, elapsed := a.qp.Counters().Requester.RcvdRNRErr, time.Since(t0)
	require.LessOrEqual(t, n1-n0, uint64(elapsed/(5120*time.Microsecond))+2,
		"a's RNR waits follow the MIN_RNR_TIMER b was given on RTS→RTS (%v measured)", elapsed)
	_, err = b.qp.PostRecv(RecvWR{ID: 2, SGList: []SGE{b.mr.SGE(0, 64)}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
}

// TestModifyRTSAccessFlagsReachResponder: ACCESS_FLAGS given on RTS→RTS
// (optional there, IBA 10.3.1) govern the requests the responder takes
// from then on, as rxe_qp_from_attr sets qp->attr.qp_access_flags that
// rxe's check_op_valid reads: b drops its remote write right, and a's
// RDMA WRITE then draws an Invalid Request NAK (rxe answers an operation
// the QP's flags refuse with RESPST_ERR_UNSUPPORTED_OPCODE) and completes
// with WCRemInvReqErr.
func TestModifyRTSAccessFlagsReachResponder(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	require.NoError(t, b.qp.Modify(&QPAttr{AccessFlags: AccessLocalWrite | AccessRemoteRead}, QPAttrAccessFlags))
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemInvReqErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
}
