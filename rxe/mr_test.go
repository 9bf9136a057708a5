package rxe

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestRegMRRules: the registration rules of ibv_reg_mr (IBA 10.6.3.1).
func TestRegMRRules(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	buf := make([]byte, 64)
	bad := []struct {
		name   string
		buf    []byte
		access AccessFlags
	}{
		{"remote-write-without-local-write", buf, AccessRemoteWrite},
		{"remote-atomic-without-local-write", buf, AccessRemoteAtomic | AccessRemoteRead},
		{"empty-buffer", buf[:0], AccessLocalWrite},
		{"nil-buffer", nil, 0},
		{"on-demand", buf, AccessLocalWrite | verbs.AccessOnDemand},
		{"hugetlb", buf, AccessLocalWrite | verbs.AccessHugeTLB},
		{"unknown-bit", buf, AccessLocalWrite | 1<<12},
		{"above-the-optional-range", buf, AccessLocalWrite | 1<<30},
		// Go memory is not persistent memory: rxe_mr_init_user refuses
		// IB_ACCESS_FLUSH_PERSISTENT for pages outside pmem (EINVAL), so
		// no peer's persistent FLUSH is acknowledged for it.
		{"flush-persistent", buf, AccessLocalWrite | AccessRemoteWrite | AccessFlushPersistent},
		{"flush-persistent-alone", buf, AccessFlushPersistent},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			mr, err := pd.RegMR(c.buf, c.access)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Nil(t, mr)
		})
	}
	// The refusals took no PD reference.
	require.NoError(t, pd.Dealloc())
	_, err = pd.RegMR(buf, 0)
	require.ErrorIs(t, err, ErrClosed, "dealloc'd PD")
	require.ErrorIs(t, pd.Dealloc(), ErrClosed)

	// Wrapping IOVA.
	pd, err = d.AllocPD()
	require.NoError(t, err)
	iova := ^uint64(0) - 10
	_, err = pd.RegMRWith(buf, MRAttr{IOVA: &iova})
	require.ErrorIs(t, err, ErrInvalidArgument)
	// Local read only (no flags) is fine.
	mr, err := pd.RegMR(buf, 0)
	require.NoError(t, err)
	require.NoError(t, mr.Dereg())
	// The optional flags (bits 20 to 29, IBV_ACCESS_RELAXED_ORDERING
	// first) are ignored, as rxe_reg_user_mr accepts IB_ACCESS_OPTIONAL
	// and libibverbs lets a device ignore them.
	for _, opt := range []AccessFlags{1 << 20, 1 << 29} {
		mr, err = pd.RegMR(buf, AccessLocalWrite|opt)
		require.NoError(t, err, "optional access flag %#x", uint32(opt))
		require.Equal(t, AccessLocalWrite, mr.Access())
		require.NoError(t, mr.Dereg())
	}
	// FLUSH with global visibility needs no persistent memory.
	mr, err = pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite|AccessFlushGlobal)
	require.NoError(t, err)
	require.NoError(t, mr.Dereg())
	require.ErrorIs(t, mr.Dereg(), ErrClosed)
}

// TestMRKeys: rxe's key layout (index<<8 | key byte, protocol.md §6.3).
func TestMRKeys(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	reg := func(a AccessFlags) *MR {
		mr, err := pd.RegMR(make([]byte, 64), a)
		require.NoError(t, err)
		return mr
	}
	local := reg(AccessLocalWrite)
	none := reg(0)
	remote := reg(AccessLocalWrite | AccessRemoteWrite)
	readOnly := reg(AccessRemoteRead)
	require.Zero(t, local.RKey(), "no remote right: rkey 0")
	require.Zero(t, none.RKey())
	require.Equal(t, remote.LKey(), remote.RKey(), "rxe: rkey = lkey with a remote right")
	require.Equal(t, readOnly.LKey(), readOnly.RKey())
	seen := map[uint32]bool{}
	for _, mr := range []*MR{local, none, remote, readOnly} {
		require.GreaterOrEqual(t, mr.LKey(), uint32(256), "index 0 is never used")
		require.False(t, seen[mr.LKey()>>8], "one index per region")
		seen[mr.LKey()>>8] = true
		require.Equal(t, 64, mr.Len())
	}

	// An index freed by Dereg is reused, always with another key byte.
	mr := reg(AccessLocalWrite | AccessRemoteRead)
	for range 300 {
		old := mr.LKey()
		require.NoError(t, mr.Dereg())
		mr = reg(AccessLocalWrite | AccessRemoteRead)
		require.NotEqual(t, old, mr.LKey(), "with another key byte")
	}
}

// TestMRKeysNotReused: a register/deregister loop must not hand a key of
// a deregistered region to a later one, so that a late packet for the
// old region (a peer's request with its R_Key) reaches nothing. The table
// used to hand the freed index back at once with a random key byte that
// differed only from the last one, so keys of two or more turns ago came
// back within a few hundred turns.
func TestMRKeysNotReused(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	seen := map[uint32]int{}
	for i := range 3 * mrQuarantine {
		mr, err := pd.RegMR(make([]byte, 64), AccessLocalWrite|AccessRemoteWrite)
		require.NoError(t, err)
		if j, ok := seen[mr.RKey()]; ok {
			t.Fatalf("registration %d got the rkey %#x of registration %d", i, mr.RKey(), j)
		}
		seen[mr.RKey()] = i
		require.NoError(t, mr.Dereg())
	}
}

// TestMRKeyStride: an index handed out again and again (no quarantine)
// takes all 256 key bytes before one comes back, in the same order then.
func TestMRKeyStride(t *testing.T) {
	var tab mrTable
	var keys []uint32
	for range 257 {
		mr := &MR{access: AccessRemoteRead}
		_, err := tab.insert(mr)
		require.NoError(t, err)
		keys = append(keys, mr.lkey)
		tab.remove(mr)
	}
	idx := map[uint32]bool{}
	key := map[uint32]bool{}
	for _, k := range keys[:256] {
		idx[k>>8], key[k&0xFF] = true, true
	}
	require.Len(t, idx, 1, "one index, reused at once")
	require.Len(t, key, 256, "every key byte once")
	require.Equal(t, keys[0], keys[256], "the cycle starts again")
}

// TestMRDeregAndInUse: a deregistered region is gone for peers and for
// SGEs; objects with dependents refuse to go.
func TestMRDeregAndInUse(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	extra, err := b.pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	require.NoError(t, err)
	rkey, va := extra.RKey(), extra.Addr()

	// Works before Dereg.
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: va, RKey: rkey})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCSuccess, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))

	require.ErrorIs(t, b.pd.Dealloc(), ErrInUse, "PD with MRs and a QP")
	require.NoError(t, extra.Dereg())
	// A region registered after it: the old key must not reach it.
	again, err := b.pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	require.NoError(t, err)
	syncMem(a, b)
	_, err = a.qp.PostSend(SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: va, RKey: rkey})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{2, WCRemAccessErr, WCRDMARead}}, briefs(waitWCs(t, a.cq, 1)))
	waitState(t, b.qp, QPSErr)
	syncMem(a, b)
	require.Equal(t, make([]byte, 4096), again.Bytes())

	// A's own SGE with a deregistered lkey.
	c, d := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	gone, err := c.pd.RegMR(make([]byte, 64), AccessLocalWrite)
	require.NoError(t, err)
	sge := gone.SGE(0, 8)
	require.NoError(t, gone.Dereg())
	_, err = d.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{d.mr.SGE(0, 64)}})
	require.NoError(t, err)
	_, err = c.qp.PostSend(SendWR{ID: 3, Opcode: WRSend, SGList: []SGE{sge}})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{3, WCLocProtErr, WCSend}}, briefs(waitWCs(t, c.cq, 1)))

	// Dependents: a CQ with QPs, a PD with MRs, QPs or SRQs.
	require.ErrorIs(t, c.cq.Destroy(), ErrInUse)
	require.ErrorIs(t, c.pd.Dealloc(), ErrInUse)
	require.NoError(t, c.qp.Destroy())
	require.ErrorIs(t, c.qp.Destroy(), ErrClosed)
	require.ErrorIs(t, c.pd.Dealloc(), ErrInUse, "the MR is left")
	require.NoError(t, c.mr.Dereg())
	srq, err := c.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	require.ErrorIs(t, c.pd.Dealloc(), ErrInUse, "the SRQ is left")
	require.NoError(t, srq.Destroy())
	require.NoError(t, c.pd.Dealloc())
	require.NoError(t, c.cq.Destroy())
	require.ErrorIs(t, c.cq.Destroy(), ErrClosed)
	_, err = c.cq.Wait(t.Context(), make([]WC, 1))
	require.ErrorIs(t, err, ErrClosed)
	_, err = c.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: d.cq, RecvCQ: d.cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	require.ErrorIs(t, err, ErrClosed)
}

// TestZeroBasedMR: with ZERO_BASED (or an explicit IOVA) the peer
// addresses the region from 0 (or that IOVA): RETH and AtomicETH VAs are
// relative to it, end to end.
func TestZeroBasedMR(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{}, qpOpts{})
			zbuf := make([]byte, 8192)
			zero, err := b.pd.RegMR(zbuf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic|AccessZeroBased)
			require.NoError(t, err)
			require.Zero(t, zero.Addr())
			ibuf := make([]byte, 4096)
			iova := uint64(0x7000_0000)
			at, err := b.pd.RegMRWith(ibuf, MRAttr{Access: AccessLocalWrite | AccessRemoteRead, IOVA: &iova})
			require.NoError(t, err)
			require.Equal(t, iova, at.Addr())

			fill(a.buf[:3000], 8)
			fill(ibuf, 9)
			binary.NativeEndian.PutUint64(zbuf[16:], 40)
			syncMem(a, b)
			_, err = a.qp.PostSend(
				SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 3000)}, RemoteAddr: 100, RKey: zero.RKey()},
				SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(4096, 3000)}, RemoteAddr: 100, RKey: zero.RKey()},
				SendWR{ID: 3, Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(8192, 8)}, RemoteAddr: 16, RKey: zero.RKey(), CompareAdd: 2},
				SendWR{ID: 4, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(12288, 1000)}, RemoteAddr: iova + 96, RKey: at.RKey()},
			)
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{1, WCSuccess, WCRDMAWrite}, {2, WCSuccess, WCRDMARead}, {3, WCSuccess, WCFetchAdd}, {4, WCSuccess, WCRDMARead}},
				briefs(waitWCs(t, a.cq, 4)))
			syncMem(a, b)
			require.True(t, bytes.Equal(a.buf[:3000], zbuf[100:3100]))
			require.True(t, bytes.Equal(a.buf[:3000], a.buf[4096:7096]))
			require.Equal(t, uint64(40), binary.NativeEndian.Uint64(a.buf[8192:]))
			require.Equal(t, uint64(42), binary.NativeEndian.Uint64(zbuf[16:]))
			require.True(t, bytes.Equal(ibuf[96:1096], a.buf[12288:13288]))

			// VA 0 of a zero-based region is in bounds; one past its end
			// is not, even though the buffer's own address would be.
			_, err = a.qp.PostSend(SendWR{ID: 5, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: 8192, RKey: zero.RKey()})
			require.NoError(t, err)
			require.Equal(t, []wcBrief{{5, WCRemAccessErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
		})
	}
}

// TestRemoteMROfAnotherPD: a peer's rkey is good only for the QP's PD
// (IBA 10.6.3.2).
func TestRemoteMROfAnotherPD(t *testing.T) {
	a, b := smallPair(t, "pipe", qpOpts{}, qpOpts{})
	pd2, err := b.dev.AllocPD()
	require.NoError(t, err)
	buf := make([]byte, 64)
	other, err := pd2.RegMR(buf, AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, SGList: []SGE{a.mr.SGE(0, 8)}, RemoteAddr: other.Addr(), RKey: other.RKey()})
	require.NoError(t, err)
	require.Equal(t, []wcBrief{{1, WCRemAccessErr, WCRDMAWrite}}, briefs(waitWCs(t, a.cq, 1)))
	ev, _ := waitEvent(t, b.dev, EventQPAccessErr)
	require.Same(t, b.qp, ev.QP)
	syncMem(a, b)
	require.Equal(t, make([]byte, 64), buf)
	noWC(t, b.cq, 5*time.Millisecond)
}
