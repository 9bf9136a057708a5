package responder

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestSetPath answers a request after a path change: the ACK carries an
// ICRC for the new pseudo-header (drain checks it against h.cfg.Pseudo);
// an invalid pseudo-header is refused and changes nothing.
func TestSetPath(t *testing.T) {
	h := newHarness(t)
	h.postRecv(1, 64)
	h.postRecv(2, 64)
	bad := h.cfg.Pseudo
	bad.Dst = netip.MustParseAddr("2001:db8::2")
	require.ErrorIs(t, h.r.SetPath(bad), packet.ErrPseudoHeader)
	h.rx(packet.RCSendOnly, 100, nil, ackReq)
	out := h.drain()
	require.Len(t, out, 1, "still built for the old path")
	require.Equal(t, packet.RCAcknowledge, out[0].Opcode())

	h.cfg.Pseudo.Dst, h.cfg.Pseudo.DstPort = netip.MustParseAddr("192.0.2.77"), 0xC077
	require.NoError(t, h.r.SetPath(h.cfg.Pseudo))
	h.rx(packet.RCSendOnly, 101, nil, ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	require.Error(t, respPseudo.CheckICRC(out[0].Bytes()), "not for the old path")
}

// TestSetMaxDestRdAtomic resizes the responder resources between
// requests (SQD→SQD): growing keeps every resource, shrinking keeps the
// newest, a duplicate is answered exactly when its resource is kept, and
// zero resources refuse the next atomic. The output queue's bound follows.
func TestSetMaxDestRdAtomic(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 2 })
	va := uint64(rva + 8)
	word := h.remoteBytes(va, 8)
	// fadd runs a FETCH_ADD of 1 at psn and reports whether it was
	// answered and with which original value.
	fadd := func(psn packet.PSN) (bool, uint64) {
		h.rx(packet.RCFetchAdd, psn, nil, atomicETH(va, rkey, 1, 0))
		out := h.drain()
		if len(out) == 0 {
			return false, 0
		}
		require.Len(t, out, 1)
		require.Equal(t, packet.RCAtomicAcknowledge, out[0].Opcode())
		return true, out[0].AtomicAckETH().Orig()
	}
	for psn := packet.PSN(100); psn < 102; psn++ {
		ok, _ := fadd(psn)
		require.True(t, ok)
	}
	h.r.SetMaxDestRdAtomic(4)
	require.Equal(t, 4*4+16, h.r.q.Max())
	for psn := packet.PSN(102); psn < 104; psn++ {
		ok, _ := fadd(psn)
		require.True(t, ok)
	}
	require.Equal(t, uint64(4), binary.NativeEndian.Uint64(word))
	// Four resources: the duplicates of all four are answered with their
	// original values and do not execute again.
	for psn := packet.PSN(100); psn < 104; psn++ {
		ok, orig := fadd(psn)
		require.True(t, ok, "duplicate %d", psn)
		require.Equal(t, uint64(psn-100), orig, "duplicate %d", psn)
	}
	require.Equal(t, uint64(4), binary.NativeEndian.Uint64(word))

	h.r.SetMaxDestRdAtomic(1)
	require.Equal(t, 1*4+16, h.r.q.Max())
	ok, orig := fadd(103)
	require.True(t, ok, "the newest resource is kept")
	require.Equal(t, uint64(3), orig)
	ok, _ = fadd(102)
	require.False(t, ok, "an older one is gone: its duplicate is dropped")
	ok, orig = fadd(104)
	require.True(t, ok)
	require.Equal(t, uint64(4), orig)
	ok, _ = fadd(103)
	require.False(t, ok, "one resource: 104 recycled 103's")
	require.Equal(t, uint64(5), binary.NativeEndian.Uint64(word))

	h.r.SetMaxDestRdAtomic(0)
	h.rx(packet.RCFetchAdd, 105, nil, atomicETH(va, rkey, 1, 0))
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(105), syndrome(packet.NAKSyndrome(packet.NAKInvalidRequest)))
	require.Equal(t, uint64(5), binary.NativeEndian.Uint64(word))
}
