package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMRKeyMatchAndInvalidate: a key resolves only if all of it matches
// the region's key, not only its index part (rxe_mr.c lookup_mr compares
// the whole lkey or rkey); Invalidate refuses a key whose key part is
// stale and leaves the region valid (rxe_invalidate_mr checks the key);
// and once a region is invalidated neither its lkey nor its rkey resolves
// (lookup_mr wants a valid region).
func TestMRKeyMatchAndInvalidate(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	mr, err := pd.RegMRWith(make([]byte, 64), MRAttr{Access: AccessLocalWrite | AccessRemoteWrite, RemoteInvalidate: true})
	require.NoError(t, err)
	m := pdMemory{dev: d, pd: pd}
	stale := func(key uint32) uint32 { return key&^0xFF | (key+1)&0xFF }

	_, ok := m.Local(mr.LKey(), mr.Addr(), 8, AccessLocalWrite)
	require.True(t, ok)
	_, ok = m.Local(stale(mr.LKey()), mr.Addr(), 8, 0)
	require.False(t, ok, "an lkey with another key part")
	_, ok = m.Remote(stale(mr.RKey()), mr.Addr(), 8, AccessRemoteWrite)
	require.False(t, ok, "an rkey with another key part")

	require.False(t, m.Invalidate(stale(mr.RKey())), "a stale rkey invalidates nothing")
	_, ok = m.Local(mr.LKey(), mr.Addr(), 8, 0)
	require.True(t, ok, "still valid after a stale key's invalidation")

	require.True(t, m.Invalidate(mr.RKey()))
	_, ok = m.Local(mr.LKey(), mr.Addr(), 8, 0)
	require.False(t, ok, "the lkey of an invalidated region")
	_, ok = m.Remote(mr.RKey(), mr.Addr(), 8, AccessRemoteWrite)
	require.False(t, ok, "the rkey of an invalidated region")
	require.NoError(t, mr.Dereg())
}
