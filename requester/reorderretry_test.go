package requester

import (
	"testing"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestReorderedOldResponseSpendsNoRetry: go-back-N, retry_cnt 1. The
// first response of an 8-packet READ is lost and the next two arrive
// swapped (p+2 before p+1). p+2 starts one retry (the re-read of the
// hole, retry_cnt now spent); p+1, a late response of the same original
// train, arrives after the re-read left. It is no sign that the re-read's
// answer passed the hole (replayPassedHole): the answer has not even been
// sent yet. It must not start another retry: one loss and one swap are
// within retry_cnt 1, and the re-read's answer completes the READ.
func TestReorderedOldResponseSpendsNoRetry(t *testing.T) {
	const p0 = 0x300
	cfg := baseConfig(256, p0)
	cfg.RetryCnt = 1
	cfg.MaxRdAtomic = 1
	cfg.SigAll = true
	h, f, rm := withResponder(t, cfg, 1<<16, verbs.AccessRemoteRead, 5)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 2048, LKey: lkeyA}}})
	for _, b := range h.drain() {
		f.handle(b)
	}
	train := f.take()
	require.Len(t, train, 8)

	// train[0] is lost; train[2] overtakes train[1].
	h.recv(train[2])
	for _, b := range h.drain() { // the re-read of the hole leaves
		f.handle(b)
	}
	replay := f.take()
	h.recv(train[1]) // late, reordered: not an answer to the re-read
	st, failed := h.r.Failed()
	require.False(t, failed, "a reordered response of the original train spent retry_cnt: %v", st)

	for _, o := range train[3:] {
		h.recv(o)
	}
	for _, o := range replay {
		h.recv(o)
	}
	for _, b := range h.drain() {
		f.handle(b)
	}
	for _, o := range f.take() {
		h.recv(o)
	}
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
	require.Equal(t, rm.buf[:2048], h.mem[lkeyA].buf[:2048])
}
