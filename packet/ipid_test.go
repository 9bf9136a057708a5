package packet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRewriteIPv4ID checks the rewritten ICRC against one computed from
// scratch for the new ID, for every sample packet and a spread of IDs, and
// that rewriting back restores the original bytes.
func TestRewriteIPv4ID(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for _, s := range samples() {
		for _, ids := range [][2]uint16{{0, 1}, {0, 63}, {1, 2}, {0, 0xFFFF}, {uint16(r.Uint32()), uint16(r.Uint32())}} {
			buf := make([]byte, 512)
			ph := testPH
			ph.IPID = ids[0]
			n, err := Build(buf, &s.h, s.payload, &ph)
			require.NoError(t, err)
			pkt := buf[:n]
			orig := append([]byte(nil), pkt...)
			RewriteIPv4ID(pkt, ids[0], ids[1])
			ph.IPID = ids[1]
			require.NoError(t, ph.CheckICRC(pkt), "%s: ID %#x -> %#x", s.name, ids[0], ids[1])
			if ids[0] != ids[1] {
				ph.IPID = ids[0]
				require.Error(t, ph.CheckICRC(pkt), s.name)
			}
			RewriteIPv4ID(pkt, ids[1], ids[0])
			require.Equal(t, orig, pkt, s.name)
		}
	}
	short := []byte{1, 2, 3}
	RewriteIPv4ID(short, 0, 5)
	require.Equal(t, []byte{1, 2, 3}, short, "too short: unchanged")
}

// TestRewriteIPv4IDLong covers tails beyond the operator cache.
func TestRewriteIPv4IDLong(t *testing.T) {
	ph := testPH
	h := samples()[0].h
	payload := make([]byte, maxCachedTail+100)
	buf := make([]byte, len(payload)+256)
	n, err := Build(buf, &h, payload, &ph)
	require.NoError(t, err)
	RewriteIPv4ID(buf[:n], 0, 7)
	ph.IPID = 7
	require.NoError(t, ph.CheckICRC(buf[:n]))
}

// FuzzRewriteIPv4ID: after RewriteIPv4ID the ICRC checks for the new ID;
// no byte but the ICRC changed (an ICRC check alone misses a change to the
// bits it masks, FECN and BECN); an ICRC off by e comes out off by e; and
// rewriting back restores the packet.
func FuzzRewriteIPv4ID(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnop"), uint16(0), uint16(3))
	f.Fuzz(func(t *testing.T, pkt []byte, from, to uint16) {
		if len(pkt) < BTHSize+ICRCSize {
			return
		}
		ph := testPH
		ph.IPID = from
		if ph.SetICRC(pkt) != nil {
			return
		}
		orig := bytes.Clone(pkt)
		RewriteIPv4ID(pkt, from, to)
		ph.IPID = to
		require.NoError(t, ph.CheckICRC(pkt))
		n := len(pkt) - ICRCSize
		require.Equal(t, orig[:n], pkt[:n], "only the ICRC changes")
		// It reads the length, not the ICRC: an ICRC off by e comes out
		// off by e; and rewriting back gives the packet it started from.
		e := uint32(from)<<16 | uint32(to) | 1
		bad := bytes.Clone(orig)
		binary.LittleEndian.PutUint32(bad[n:], binary.LittleEndian.Uint32(bad[n:])^e)
		RewriteIPv4ID(bad, from, to)
		require.Equal(t, binary.LittleEndian.Uint32(pkt[n:])^e, binary.LittleEndian.Uint32(bad[n:]))
		RewriteIPv4ID(pkt, to, from)
		require.Equal(t, orig, pkt)
	})
}

func BenchmarkRewriteIPv4ID4K(b *testing.B) {
	pkt := make([]byte, 4096+BTHSize+ICRCSize)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		RewriteIPv4ID(pkt, 0, uint16(i&63))
	}
}
