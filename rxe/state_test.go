package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestPostInWrongState: PostSend needs RTS or SQD (or ERR, where it
// flushes), PostRecv INIT or later (protocol.md §6.5; rxe returns EINVAL).
func TestPostInWrongState(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	send := SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}}
	recv := RecvWR{ID: 1, SGList: []SGE{a.mr.SGE(0, 8)}}

	n, err := a.qp.PostSend(send)
	require.ErrorIs(t, err, ErrInvalidState, "RESET")
	require.Zero(t, n)
	n, err = a.qp.PostRecv(recv)
	require.ErrorIs(t, err, ErrInvalidState, "RESET")
	require.Zero(t, n)

	o := qpOpts{}.withDefaults()
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: o.access},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	_, err = a.qp.PostSend(send)
	require.ErrorIs(t, err, ErrInvalidState, "INIT")
	n, err = a.qp.PostRecv(recv)
	require.NoError(t, err, "INIT accepts receives")
	require.Equal(t, 1, n)

	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: db.GID(), UDPPort: db.Addr().Port()}, PathMTU: MTU1024,
		DestQPN: b.qp.QPN(), RQPSN: 0, MaxDestRdAtomic: 1, MinRNRTimer: 1},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	_, err = a.qp.PostSend(send)
	require.ErrorIs(t, err, ErrInvalidState, "RTR")
	require.Equal(t, QPSRTR, a.qp.State())

	// ERR straight from RTR: the receive posted in INIT flushes, and so do
	// later sends and receives, though the QP never reached RTS.
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCRecv}}, briefs(waitWCs(t, a.cq, 1)))
	_, err = a.qp.PostSend(send)
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
	_, err = a.qp.PostRecv(RecvWR{ID: 2})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{2, WCWRFlushErr, WCRecv}}, briefs(waitWCs(t, a.cq, 1)))
}

// TestModifyToErrFlushes: a user's move to ERR flushes both queues in
// order, with a completion for every send WR, signaled or not.
func TestModifyToErrFlushes(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	_, err := a.qp.PostRecv(RecvWR{ID: 11, SGList: []SGE{a.mr.SGE(0, 64)}}, RecvWR{ID: 12, SGList: []SGE{a.mr.SGE(64, 64)}})
	require.NoError(t, err)
	// b posts no receive: the SEND waits on RNR and stays outstanding.
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}},
		SendWR{ID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.qp.Counters().Requester.RcvdRNRErr > 0 }, testutil.Bound(), time.Millisecond)
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	require.Equal(t, QPSErr, a.qp.State())
	got := briefs(waitWCs(t, a.cq, 4))
	var sends, recvs []wcBrief
	for _, w := range got {
		if w.Opcode.IsRecv() {
			recvs = append(recvs, w)
		} else {
			sends = append(sends, w)
		}
	}
	require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCSend}, {2, WCWRFlushErr, WCRDMAWrite}}, sends)
	require.Equal(t, []wcBrief{{11, WCWRFlushErr, WCRecv}, {12, WCWRFlushErr, WCRecv}}, recvs)
	// ERR to ERR is allowed and does nothing more.
	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	noWC(t, a.cq, 10*time.Millisecond)
	// A user's move to ERR is no engine error: no event, no counter.
	require.Empty(t, drainEvents(a.dev, 0))
	require.Zero(t, a.dev.Counters().QPErrors)
}

// TestRNR: a SEND meeting no receive WQE draws RNR NAKs (IBA 9.7.5.2.8);
// rnr_retry 0 fails it at once, rnr_retry 7 waits for ever.
func TestRNR(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind+"/rnr-retry-0", func(t *testing.T) {
			// The local ACK timeout is 4.3 s (20), not 67 ms: on a
			// loaded machine under -race the RNR NAK can take longer
			// than 67 ms, and a timeout resend would draw a second one.
			a, b := smallPair(t, kind, qpOpts{noRNRRetry: true, timeout: 20}, qpOpts{})
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}},
				SendWR{ID: 2, Opcode: WRSend, SGList: []SGE{a.mr.SGE(0, 8)}})
			require.NoError(t, err)
			wcs := waitWCs(t, a.cq, 2)
			require.Equal(t, []wcBrief{{1, WCRNRRetryExcErr, WCSend}, {2, WCWRFlushErr, WCSend}}, briefs(wcs))
			require.Equal(t, uint32(0x20|1), wcs[0].VendorErr, "the RNR NAK's syndrome, timer code 1")
			require.Equal(t, QPSErr, a.qp.State())
			c := a.qp.Counters().Requester
			require.Equal(t, uint64(1), c.RcvdRNRErr)
			require.Equal(t, uint64(1), c.RNRRetryExceededErr)
			// An RNR NAK is no error for the responder: it stays up.
			require.Equal(t, QPSRTS, b.qp.State())
			require.Equal(t, uint64(1), b.qp.Counters().Responder.SendRNRErr)
			noWC(t, b.cq, 10*time.Millisecond)
			require.Empty(t, drainEvents(b.dev, 0))
			require.Empty(t, drainEvents(a.dev, 0))
		})
		t.Run(kind+"/rnr-retry-7", func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{}, qpOpts{minRNRTimer: 3}) // 30 µs
			fill(a.buf[:100], 9)
			syncMem(a, b)
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 100)}})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return a.qp.Counters().Requester.RcvdRNRErr >= 3 }, testutil.Bound(), time.Millisecond)
			noWC(t, a.cq, 0)
			_, err = b.qp.PostRecv(RecvWR{ID: 7, SGList: []SGE{b.mr.SGE(0, 128)}})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCSend}}, briefs(waitWCs(t, a.cq, 1)))
			rw := waitWCs(t, b.cq, 1)
			require.Equal(t, []wcBrief{{7, WCSuccess, WCRecv}}, briefs(rw))
			require.Equal(t, uint32(100), rw[0].ByteLen)
			syncMem(a, b)
			require.Equal(t, a.buf[:100], b.buf[:100])
			require.Equal(t, QPSRTS, a.qp.State())
		})
	}
}

// TestPeerVanishes: requests to a peer that is gone exhaust retry_cnt
// (IBA 9.7.6.1.3) and fail with RETRY_EXC_ERR after retry_cnt + 1 timeouts.
func TestPeerVanishes(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{timeout: 8, retryCnt: 2}, qpOpts{})
			require.NoError(t, b.dev.Close())
			start := time.Now()
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
				SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			require.NoError(t, err)
			wcs := waitWCs(t, a.cq, 2)
			require.Equal(t, []wcBrief{{1, WCRetryExcErr, WCRDMAWrite}, {2, WCWRFlushErr, WCRDMARead}}, briefs(wcs))
			require.Less(t, time.Since(start), 2*time.Second)
			require.Equal(t, QPSErr, a.qp.State())
			c := a.qp.Counters().Requester
			require.Equal(t, uint64(3), c.Timeouts, "retry_cnt 2: two retries, then the third timeout fails")
			require.Equal(t, uint64(1), c.RetryExceededErr)
			require.Empty(t, drainEvents(a.dev, 0))
		})
	}
}
