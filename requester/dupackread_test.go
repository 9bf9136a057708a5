package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestDupAckInsideReadSpendsNoRetry: go-back-N. WRITE W (PSN p) and a
// 2-packet READ R (p+1, p+2) are executed; W's ACK arrives, R's responses
// are lost. The responder answers duplicates of W with an ACK for its
// ePSN−1 = p+2, inside R's response PSNs. Such an ACK is no response of
// the READ (kernel rxe's check_psn drops it: diff > 0 on a READ WQE) and
// spends no retry. checkPSN used to take each one as a gap in R's
// responses, a "replay that passed the hole" and a new episode: eight
// duplicate ACKs failed the QP with RETRY_EXC_ERR within microseconds, no
// timeout involved, while its re-reads were on their way.
func TestDupAckInsideReadSpendsNoRetry(t *testing.T) {
	p := packet.PSN(0x100)
	cfg := baseConfig(1024, p)
	h, f, _ := withResponder(t, cfg, 64<<10, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase + 4096, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 4096, Length: 2048, LKey: lkeyA}}})
	reqs := h.drain()
	require.Len(t, reqs, 2)
	for _, b := range reqs {
		f.handle(b)
	}
	resps := f.take() // ACK p, READ FIRST p+1, READ LAST p+2
	require.Len(t, resps, 3)
	h.now = h.now.Add(20e3)
	h.recv(resps[0]) // W completes; R's responses are lost
	require.Equal(t, []uint64{1}, h.cq.ids())

	var rereads [][]byte // re-reads on their way to the responder
	for i := 0; i < 8; i++ {
		f.handle(reqs[0]) // a duplicate of W
		dup := f.take()
		require.Len(t, dup, 1)
		require.Equal(t, p.Add(2), parse(t, dup[0]).PSN(), "ACK of ePSN-1, inside R")
		h.now = h.now.Add(1e3)
		h.recv(dup[0])
		for h.r.Pending() {
			rereads = append(rereads, h.next())
		}
		if _, failed := h.r.Failed(); failed {
			break
		}
	}
	st, failed := h.r.Failed()
	c := h.r.Counters()
	t.Logf("failed %v %v after %v; timeouts %d, retries %d, re-reads sent %d (none answered yet)",
		failed, st, h.now.Sub(t0), c.Timeouts, c.CompleterRetryErr, len(rereads))
	require.False(t, failed, "RETRY_EXC_ERR from duplicate ACKs, no timeout, re-reads still on their way")
}
