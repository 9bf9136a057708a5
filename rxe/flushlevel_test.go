package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
)

// TestFlushSelectivity: a FLUSH of the whole memory region (FETH
// selectivity level 1) names no range, so its RETH VA and DMA length are
// not checked against the region, only its R_Key and rights (rxe_resp.c
// check_rkey skips mr_check_range for IB_FLUSH_MR); a FLUSH of a range is
// checked against the region, a zero-length one included, and one outside
// it, or an R_Key that names no region, draws a Remote Access Error NAK
// that moves the QP to ERR.
func TestFlushSelectivity(t *testing.T) {
	const size = 4096
	for _, tc := range []struct {
		name   string
		feth   uint32
		va     func(mr *MR) uint64
		length uint32
		badKey bool // an R_Key whose key part differs from the region's
		ok     bool
	}{
		{"range", 1, func(mr *MR) uint64 { return mr.Addr() + 8 }, 8, false, true},
		{"zero_length_range_at_end", 1, func(mr *MR) uint64 { return mr.Addr() + size }, 0, false, true},
		{"region_va_zero", 1<<4 | 1, func(*MR) uint64 { return 0 }, 0, false, true},
		{"region_va_past_end", 1<<4 | 1, func(mr *MR) uint64 { return mr.Addr() + size }, 1 << 20, false, true},
		{"range_outside", 1, func(mr *MR) uint64 { return mr.Addr() + size }, 8, false, false},
		{"zero_length_range_outside", 1, func(*MR) uint64 { return 0 }, 0, false, false},
		{"region_bad_rkey", 1<<4 | 1, func(mr *MR) uint64 { return mr.Addr() }, 8, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db, ca, cb := pipeDevices(t)
			a := smallEnd(t, da, nil, qpOpts{})
			b := smallEnd(t, db, nil, qpOpts{})
			ob := qpOpts{access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessFlushGlobal}
			link(t, a, b, qpOpts{}, ob)
			mr, err := b.pd.RegMR(make([]byte, size), AccessLocalWrite|AccessRemoteWrite|AccessFlushGlobal)
			require.NoError(t, err)
			require.NotZero(t, mr.Addr(), "the region's IOVA is its buffer's address")

			key := mr.RKey()
			if tc.badKey {
				key ^= 1
			}
			psn := b.qp.Query().RQPSN
			h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCFlush, PKey: packet.DefaultPKey, DestQP: b.qp.QPN(), PSN: packet.PSN(psn), AckReq: true},
				RETH: packet.RETHFields{VA: tc.va(mr), RKey: key, DMALen: tc.length}, FETH: tc.feth}
			injectPacket(t, ca, cb, &h, nil)
			if tc.ok {
				want := (psn + 1) & packet.PSNMask
				require.Eventually(t, func() bool { return b.qp.Query().RQPSN == want }, testutil.Bound(), time.Millisecond)
				require.Equal(t, QPSRTS, b.qp.State())
				require.Zero(t, b.dev.Counters().QPErrors)
				return
			}
			require.Eventually(t, func() bool { return b.qp.State() == QPSErr }, testutil.Bound(), time.Millisecond)
			require.Equal(t, psn, b.qp.Query().RQPSN)
		})
	}
}
