package rxe

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/stretchr/testify/require"
)

// TestPeerDiesMidRun closes the peer's device while a pipelined stream of
// WRITEs, READs and SENDs is in flight (packets sent, READ responses
// arriving): the requester's ACK timer runs out retry_cnt+1 times
// (IBA 9.7.6.1.3; rxe_comp.c's retransmit timer and
// COMPST_ERROR_RETRY), the oldest outstanding work request completes with
// RETRY_EXC_ERR and every one behind it with WR_FLUSH_ERR, in send-queue
// order, within the QP's retry budget ((retry_cnt+1) ACK timeouts), and
// the QP is in ERR. TestPeerVanishes closes the peer before anything is
// posted.
func TestPeerDiesMidRun(t *testing.T) {
	const (
		n        = 48
		size     = 32 << 10
		retryCnt = 1
	)
	// testutil.QPTimeout: the first WRITE completes before the peer
	// closes, however loaded the host; 4.096 µs · 2^18 a try.
	try := time.Duration(4096<<testutil.QPTimeout) * time.Nanosecond
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{timeout: testutil.QPTimeout, retryCnt: retryCnt, sendWR: n}, qpOpts{recvWR: n})
			for i := range n {
				_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(0, size)}})
				require.NoError(t, err)
			}
			ops := []WROpcode{WRRDMAWrite, WRRDMARead, WRSend}
			wrs := make([]SendWR, n)
			for i := range wrs {
				wrs[i] = SendWR{ID: uint64(i), Opcode: ops[i%len(ops)], Flags: SendSignaled,
					SGList: []SGE{a.mr.SGE(size, size)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
			}
			posted, err := a.qp.PostSend(wrs...)
			require.NoError(t, err)
			require.Equal(t, n, posted)
			first := waitWC(t, a.cq, a, b)
			require.Equal(t, wcBrief{0, WCSuccess, WCRDMAWrite}, briefs([]WC{first})[0])
			start := time.Now()
			require.NoError(t, b.dev.Close())

			got := waitWCs(t, a.cq, n-1)
			elapsed := time.Since(start)
			failed := -1
			for i, wc := range got {
				id := uint64(i + 1)
				require.Equal(t, id, wc.ID, "send-queue order")
				require.Equal(t, verbsWCOpcode(ops[id%uint64(len(ops))]), wc.Opcode)
				switch {
				case failed < 0 && wc.Status == WCRetryExcErr:
					failed = i
				case failed < 0:
					require.Equal(t, WCSuccess, wc.Status, "completion %d before the failure", id)
				default:
					require.Equal(t, WCWRFlushErr, wc.Status, "completion %d after the failure", id)
				}
			}
			require.GreaterOrEqual(t, failed, 0, "no RETRY_EXC_ERR: %v", briefs(got))
			require.Equal(t, QPSErr, a.qp.State())
			require.Equal(t, uint64(retryCnt+1), a.qp.Counters().Requester.Timeouts)
			t.Logf("%d completions, RETRY_EXC_ERR at %d after %v", len(got), failed+1, elapsed)
			// The ACK timer restarted at the ACK that completed the first
			// WRITE, just before the close: every try runs out in full.
			require.Greater(t, elapsed, (retryCnt+1)*try-try/2, "no try cut short")
			require.Less(t, elapsed, (retryCnt+1)*try+time.Second, "within the retry budget")
		})
	}
}
