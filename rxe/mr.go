package rxe

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorxe/gorxe/rxe/verbs"
)

// PD is a protection domain (IBA 10.6.3). MRs, QPs, SRQs and address
// handles belong to one PD; a remote access succeeds only if the QP and the
// MR share it, and a UD QP sends only through address handles of its PD.
type PD struct {
	dev    *Device
	handle uint32
	mu     sync.Mutex   // orders use against Dealloc
	users  atomic.Int32 // MRs, QPs, SRQs and address handles on this PD (taken by use)
	closed atomic.Bool
}

// use takes the PD for a new MR, QP, SRQ or address handle: it fails with
// ErrClosed once the PD is deallocated. A failed creation gives it back
// (users.Add(-1)).
func (pd *PD) use() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed.Load() {
		return ErrClosed
	}
	pd.users.Add(1)
	return nil
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if err := d.take(&d.nPD, d.attr.MaxPD, "protection domains"); err != nil {
		return nil, err
	}
	return &PD{dev: d, handle: d.nextPD.Add(1)}, nil
}

// Dealloc frees the PD (ibv_dealloc_pd). It fails with ErrInUse while
// MRs, QPs, SRQs or address handles created on it exist, as
// ibv_dealloc_pd fails with EBUSY while objects use the PD, and with
// ErrClosed after Device.Close.
func (pd *PD) Dealloc() error {
	if pd.dev.closed.Load() {
		return ErrClosed
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed.Load() {
		return ErrClosed
	}
	// users grows under mu only (use): nothing can take the PD between
	// this check and closed being set.
	if n := pd.users.Load(); n > 0 {
		return fmt.Errorf("%w: the PD still has %d objects (MRs, QPs, SRQs or address handles); destroy them first", ErrInUse, n)
	}
	pd.closed.Store(true)
	pd.dev.nPD.Add(-1)
	return nil
}

// Device returns the PD's device.
func (pd *PD) Device() *Device { return pd.dev }

// MRAttr describes a memory registration beyond the buffer itself.
type MRAttr struct {
	// Access is the access rights (ibv_access_flags). Remote write and
	// remote atomic require local write (IBA 10.6.3.1, as ibv_reg_mr).
	// AccessFlushPersistent is refused: a buffer is not persistent
	// memory (kernel rxe refuses it outside pmem too). The optional flags
	// (bits 20 to 29, IBV_ACCESS_RELAXED_ORDERING first) are ignored.
	Access AccessFlags
	// IOVA, if non-nil, is the address peers and SGEs use for the first
	// byte of the buffer (ibv_reg_mr_iova). By default it is the buffer's
	// own address, what perftest sends as its VADDR; with AccessZeroBased
	// it is 0.
	IOVA *uint64
	// RemoteInvalidate lets a peer invalidate the MR's R_Key with
	// SEND_WITH_INV (as a fast-registration MR allows); plain user MRs
	// cannot be invalidated (rxe_invalidate_mr).
	RemoteInvalidate bool
}

// MR is a registered memory region.
type MR struct {
	pd         *PD
	buf        []byte
	iova       uint64
	access     AccessFlags
	lkey, rkey uint32
	stride     uint8 // the step of its index's key part (mrTable.insert)
	invalidate bool
	valid      atomic.Bool // registered and not invalidated
	// deregMu is held by the Dereg that deregisters the region for as
	// long as it waits for the device, so that a concurrent Dereg returns
	// only after it; dereg says the region has been deregistered.
	deregMu sync.Mutex
	dereg   bool
}

// Keys are index<<8 | an 8-bit key part, as rxe builds them (rxe_mr.c
// rxe_mr_init); the rkey equals the lkey when any remote access is granted
// and is 0 otherwise.
//
// A late packet (a peer's request with the R_Key of a region deregistered
// since) must not reach a region registered later. Kernel rxe gets that
// mostly from its pool, which hands out indices cyclically
// (xa_alloc_cyclic in rxe_pool.c), so a freed index comes back only after
// the index space wraps, and draws a random key part each time
// (rxe_get_next_key). gorxe keeps its table small instead, so:
//
//   - a freed index waits in a FIFO and is reused only once mrQuarantine
//     other indices were freed after it (new indices are taken meanwhile,
//     up to maxMRs, where the oldest freed one is reused at once): a
//     register/deregister loop does not hand the same index back at every
//     turn;
//   - the key part of an index steps by an odd stride drawn at random when
//     the index is first used (ib_inc_rkey steps it by one for a
//     fast-registration MR), so it takes all 256 values before one comes
//     back.
//
// A stale key thus names no region until its index has been reused 256
// times, at least 256 × mrQuarantine registrations later; with 8 key bits
// no scheme rules a repeat out for good. Until then its packet finds no
// region or a key that differs, and the peer gets a Remote Access NAK.
const maxMRs = 1 << 20

// mrQuarantine is how many indices must be freed after an index before it
// is reused (see maxMRs).
const mrQuarantine = 1024

// mrFree is a freed index: the last key it had and its key stride.
type mrFree struct {
	key    uint32
	stride uint8
}

// mrTable maps key>>8 to an MR; readers load a snapshot without locking.
type mrTable struct {
	mu    sync.Mutex // serialises writers
	slots atomic.Pointer[[]*MR]
	free  []mrFree // freed indices, oldest first
	next  uint32
	// quarantine is mrQuarantine; a test may lower it to reuse an index
	// at once.
	quarantine int
}

func (t *mrTable) lookup(key uint32) *MR {
	s := t.slots.Load()
	if s == nil {
		return nil
	}
	i := key >> 8
	if int(i) >= len(*s) {
		return nil
	}
	return (*s)[i]
}

// insert stores mr under an index, sets its keys and returns the lkey: a
// new index with a random key part, or the oldest freed index once
// quarantine others were freed after it (or no new index is left), with
// its key part stepped by the index's stride.
func (t *mrTable) insert(mr *MR) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idx, key uint32
	var stride uint8
	switch {
	case len(t.free) > t.quarantine || len(t.free) > 0 && t.next+1 >= maxMRs:
		old := t.free[0]
		t.free = t.free[1:]
		idx, stride = old.key>>8, old.stride
		key = (old.key + uint32(stride)) & 0xFF
	case t.next+1 >= maxMRs: // index 0 is never used, so no valid key is < 256
		return 0, fmt.Errorf("%w: %d memory regions", ErrNoResources, maxMRs)
	default:
		t.next++
		idx = t.next
		key = uint32(rand.UintN(256))
		stride = uint8(2*rand.UintN(128) + 1)
	}
	var cur []*MR
	if s := t.slots.Load(); s != nil {
		cur = *s
	}
	next := make([]*MR, max(len(cur), int(idx)+1))
	copy(next, cur)
	// The keys are set before the region is published: the receive
	// goroutine reads them without a lock.
	mr.lkey = idx<<8 | key
	mr.stride = stride
	if mr.access&verbs.AccessRemote != 0 {
		mr.rkey = mr.lkey
	}
	next[idx] = mr
	t.slots.Store(&next)
	return mr.lkey, nil
}

// remove frees the index of mr, to be reused after the quarantine.
func (t *mrTable) remove(mr *MR) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := *t.slots.Load()
	next := make([]*MR, len(cur))
	copy(next, cur)
	next[mr.lkey>>8] = nil
	t.slots.Store(&next)
	t.free = append(t.free, mrFree{key: mr.lkey, stride: mr.stride})
}

// accessOptional is libibverbs' IBV_ACCESS_OPTIONAL_RANGE (the kernel's
// IB_ACCESS_OPTIONAL): bits 20 to 29 of the access flags.
const accessOptional AccessFlags = 1<<30 - 1<<20

// RegMR registers buf with the given access rights. The buffer must not be
// empty; it must stay reachable and must not be resized while registered
// (peers write into it directly).
func (pd *PD) RegMR(buf []byte, access AccessFlags) (*MR, error) {
	return pd.RegMRWith(buf, MRAttr{Access: access})
}

// RegMRWith registers buf with the attributes in attr.
func (pd *PD) RegMRWith(buf []byte, attr MRAttr) (*MR, error) {
	if pd.closed.Load() || pd.dev.closed.Load() {
		return nil, ErrClosed
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: empty buffer", ErrInvalidArgument)
	}
	if uint64(len(buf)) > 1<<40 {
		return nil, fmt.Errorf("%w: buffer of %d bytes", ErrInvalidArgument, len(buf))
	}
	// The optional flags (bits 20 to 29: IBV_ACCESS_RELAXED_ORDERING
	// and the ones after it) are hints a device may ignore: rxe_reg_user_mr
	// accepts IB_ACCESS_OPTIONAL, and gorxe ignores them.
	a := attr.Access &^ accessOptional
	if a&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && a&verbs.AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write or atomic access requires local write", ErrInvalidArgument)
	}
	known := verbs.AccessLocalWrite | verbs.AccessRemote | verbs.AccessZeroBased | verbs.AccessMWBind
	if a&^known != 0 {
		return nil, fmt.Errorf("%w: unsupported access flags %#x", ErrInvalidArgument, uint32(a&^known))
	}
	// A FLUSH with persistence placement may be acknowledged only for
	// persistent memory, which a Go buffer is not (the responder writes
	// nothing back): rxe_mr_init_user refuses the right with EINVAL for
	// pages outside pmem (rxe_mr_fill_pages_from_sgt).
	if a&verbs.AccessFlushPersistent != 0 {
		return nil, fmt.Errorf("%w: persistent FLUSH access needs persistent memory, which a registered buffer is not", ErrInvalidArgument)
	}
	mr := &MR{pd: pd, buf: buf, access: a, invalidate: attr.RemoteInvalidate}
	switch {
	case attr.IOVA != nil:
		mr.iova = *attr.IOVA
	case a&verbs.AccessZeroBased != 0:
		mr.iova = 0
	default:
		mr.iova = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	if mr.iova+uint64(len(buf)) < mr.iova {
		return nil, fmt.Errorf("%w: IOVA range wraps", ErrInvalidArgument)
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	if _, err := pd.dev.mrs.insert(mr); err != nil {
		pd.users.Add(-1)
		return nil, err
	}
	mr.valid.Store(true)
	return mr, nil
}

// Dereg deregisters the MR (ibv_dereg_mr). Later accesses by its keys
// fail: a peer's gets a Remote Access NAK, a local SGE a local protection
// error. The keys name no region registered later until their index has
// been reused 256 times (mrTable.insert). Dereg returns only once the device no longer touches the buffer,
// as rxe_dereg_mr waits until no requester or responder holds the region:
// every QP of the MR's PD copies registered memory only inside one step
// under its lock, so Dereg waits, after the region stops resolving, until
// each of those QPs is outside a step (see quiesce). After Device.Close it
// returns ErrClosed: Close stops every QP. During a Close that has not yet
// stopped them all it returns ErrClosed too, but only once the steps under
// way on the QPs of the MR's PD have ended: a step that began before Close
// marked the device closed may still be copying, and every later one does
// nothing (QP.dead). A second Dereg of the same region returns ErrClosed,
// but not before the first has returned: the device no longer touches the
// buffer when either call returns.
func (mr *MR) Dereg() error {
	d := mr.pd.dev
	mr.deregMu.Lock()
	defer mr.deregMu.Unlock()
	if d.closed.Load() {
		return d.closedFor(mr.pd)
	}
	if mr.dereg {
		return ErrClosed
	}
	mr.dereg = true
	mr.valid.Store(false)
	d.mrs.remove(mr)
	d.quiesce(mr.pd)
	mr.pd.users.Add(-1)
	return nil
}

// quiesce waits until every QP of pd is outside a step, so that a region
// of pd that no longer resolves is no longer being copied (the grace
// period of an RCU-style removal). A step holds its QP's lock for a bounded
// amount of work, at most one batch of packets and never across I/O or a
// wait, so quiesce waits that long per QP at most; it takes no context.
func (d *Device) quiesce(pd *PD) {
	d.qps.each(func(qp *QP) {
		if qp.pd == pd {
			// An empty critical section: it waits for the step that
			// holds the lock.
			qp.mu.Lock()
			qp.mu.Unlock() //nolint:staticcheck // SA2001: intended

		}
	})
}

// closedFor is what MR.Dereg and SRQ.Destroy do when they find the device
// closed: wait until the steps under way on the QPs of pd have ended
// (quiesce), then return ErrClosed. Close marks the device closed before
// it stops its QPs one at a time, so a step that began before the mark may
// still be copying to or from memory of pd's regions, while every step
// that begins after it does nothing (QP.dead); returning at once would
// hand the caller memory the device still touches.
func (d *Device) closedFor(pd *PD) error {
	d.quiesce(pd)
	return ErrClosed
}

// LKey returns the local key, for SGEs.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey returns the remote key (0 without remote access), for peers.
func (mr *MR) RKey() uint32 { return mr.rkey }

// Addr returns the IOVA of the first byte: what SGEs and peers use.
func (mr *MR) Addr() uint64 { return mr.iova }

// Len returns the region's length.
func (mr *MR) Len() int { return len(mr.buf) }

// Bytes returns the registered buffer.
func (mr *MR) Bytes() []byte { return mr.buf }

// Access returns the access rights.
func (mr *MR) Access() AccessFlags { return mr.access }

// SGE returns an SGE for length bytes at offset off in the region. It
// does not check the range, as an ibv_sge built by hand is not checked
// until it is used: an SGE outside the region fails where the device
// copies it (a send WR's completion with LOC_PROT_ERR, a receive WR's
// with LOC_QP_OP_ERR; rxe copy_data), and a negative length is taken
// modulo 2^32, as a uint32 conversion does.
func (mr *MR) SGE(off, length int) SGE {
	return SGE{Addr: mr.iova + uint64(off), Length: uint32(length), LKey: mr.lkey}
}

// slice returns the bytes [addr, addr+length) if they lie inside the MR.
func (mr *MR) slice(addr uint64, length uint32) ([]byte, bool) {
	if addr < mr.iova {
		return nil, false
	}
	off := addr - mr.iova
	if off > uint64(len(mr.buf)) || uint64(length) > uint64(len(mr.buf))-off {
		return nil, false
	}
	return mr.buf[off : off+uint64(length) : off+uint64(length)], true
}

// pdMemory resolves keys for the QPs of one PD; it implements the Memory
// interfaces of packages requester and responder.
type pdMemory struct {
	dev *Device
	pd  *PD
}

// Local resolves an SGE (rxe_mr.c lookup_mr + mr_check_range): the lkey,
// the PD, local write access if need asks for it, and the range.
func (m pdMemory) Local(lkey uint32, addr uint64, length uint32, need AccessFlags) ([]byte, bool) {
	mr := m.dev.mrs.lookup(lkey)
	if mr == nil || mr.lkey != lkey || mr.pd != m.pd || !mr.valid.Load() {
		return nil, false
	}
	if need&^mr.access&verbs.AccessLocalWrite != 0 {
		return nil, false
	}
	return mr.slice(addr, length)
}

// Remote resolves a peer's access (rxe_resp.c check_rkey): the rkey, the
// PD, the access rights and the range.
func (m pdMemory) Remote(rkey uint32, va uint64, length uint32, need AccessFlags) ([]byte, bool) {
	mr := m.remoteMR(rkey, need)
	if mr == nil {
		return nil, false
	}
	return mr.slice(va, length)
}

// RemoteRegion checks a peer's access to a whole region (a FLUSH at
// selectivity level memory region): Remote's checks of the rkey, the PD
// and the access rights, without the range.
func (m pdMemory) RemoteRegion(rkey uint32, need AccessFlags) bool {
	return m.remoteMR(rkey, need) != nil
}

// remoteMR returns the valid MR of this PD whose rkey is rkey and that
// grants need, or nil.
func (m pdMemory) remoteMR(rkey uint32, need AccessFlags) *MR {
	mr := m.dev.mrs.lookup(rkey)
	if mr == nil || mr.rkey == 0 || mr.rkey != rkey || mr.pd != m.pd || !mr.valid.Load() || need&^mr.access != 0 {
		return nil
	}
	return mr
}

// Invalidate invalidates the MR with rkey for SEND_WITH_INV, if it was
// registered with RemoteInvalidate. An MR invalidated already is
// invalidated again without error, as rxe_invalidate_mr frees a matching
// MR whatever its state; a deregistered one names no MR and fails.
func (m pdMemory) Invalidate(rkey uint32) bool {
	mr := m.dev.mrs.lookup(rkey)
	if mr == nil || mr.rkey != rkey || mr.pd != m.pd || !mr.invalidate {
		return false
	}
	mr.valid.Store(false)
	return true
}
