package requester

import (
	"testing"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRPartsAtTrack: under selective repeat New bounds MaxReadPkts below
// srTrack, so a READ asked in parts of MaxReadPkts fits the tracked PSNs
// and is sent. With a part of srTrack packets readFits refused it even
// with nothing outstanding: the READ was never sent, no timer was armed,
// nothing failed.
func TestSRPartsAtTrack(t *testing.T) {
	const pmtu = 256
	cfg := baseConfig(pmtu, 0x10)
	cfg.SelectiveRepeat = true
	cfg.MaxReadPkts = srTrack
	n := (srTrack + 1) * pmtu
	h, f, src := withResponder(t, cfg, n, verbs.AccessRemoteRead, 1)
	f.sr.on = true
	require.NoError(t, h.r.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: uint32(n), LKey: lkeyA}}}))
	pumpLink(h, f)
	t.Logf("outstanding %d pending %v deadline %v", h.r.Outstanding(), h.r.Pending(), h.r.Deadline())
	require.Zero(t, h.r.Outstanding(), "READ never sent")
	require.Equal(t, src.buf, h.mem[lkeyA].buf)
}
