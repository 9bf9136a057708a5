package sge

import (
	"bytes"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// mem is one region per L_Key, based at address 0x1000 × key.
type mem struct {
	regions  map[uint32][]byte
	readOnly map[uint32]bool
}

func (m *mem) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	b, ok := m.regions[lkey]
	if !ok || need&verbs.AccessLocalWrite != 0 && m.readOnly[lkey] {
		return nil, false
	}
	base := 0x1000 * uint64(lkey)
	if addr < base || addr-base+uint64(length) > uint64(len(b)) {
		return nil, false
	}
	return b[addr-base : addr-base+uint64(length)], true
}

func newMem() *mem {
	m := &mem{regions: map[uint32][]byte{}, readOnly: map[uint32]bool{3: true}}
	for k := uint32(1); k <= 3; k++ {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(k)<<6 | byte(i)
		}
		m.regions[k] = b
	}
	return m
}

var list = []verbs.SGE{
	{Addr: 0x1000 + 4, Length: 10, LKey: 1},
	{Addr: 0x2000, Length: 0, LKey: 2}, // empty: skipped
	{Addr: 0x2000 + 60, Length: 4, LKey: 2},
	{Addr: 0x3000, Length: 6, LKey: 3},
}

// flat returns the message list describes, read directly.
func flat(m *mem) []byte {
	var out []byte
	for _, s := range list {
		base := 0x1000 * uint64(s.LKey)
		out = append(out, m.regions[s.LKey][s.Addr-base:s.Addr-base+uint64(s.Length)]...)
	}
	return out
}

// TestGatherInChunks gathers the message in pieces of every size and
// checks it equals the SGEs' bytes in order.
func TestGatherInChunks(t *testing.T) {
	m := newMem()
	want := flat(m)
	require.Len(t, want, 20)
	for step := 1; step <= len(want); step++ {
		var c Cursor
		var got []byte
		for len(got) < len(want) {
			b := make([]byte, min(step, len(want)-len(got)))
			require.True(t, c.Gather(m, list, b), "step %d", step)
			got = append(got, b...)
		}
		require.Equal(t, want, got, "step %d", step)
		require.False(t, c.Gather(m, list, make([]byte, 1)), "past the end")
	}
}

// TestScatterThenSeek scatters a message into the writable SGEs, then
// gathers it back from an offset found by Seek.
func TestScatterThenSeek(t *testing.T) {
	m := newMem()
	w := list[:3] // LKey 3 is read-only
	src := []byte("0123456789abcd")
	var c Cursor
	require.True(t, c.Scatter(m, w, src[:7]))
	require.True(t, c.Scatter(m, w, src[7:]))
	require.False(t, c.Scatter(m, w, []byte{1}), "the list is full")
	for off := range uint32(len(src)) {
		var r Cursor
		r.Seek(w, off)
		b := make([]byte, len(src)-int(off))
		require.True(t, r.Gather(m, w, b))
		require.Equal(t, src[off:], b)
	}
	var end Cursor
	end.Seek(w, 14)
	require.Equal(t, Cursor{Index: 3}, end)
}

// TestFailures covers a bad L_Key, a region too short and a write to a
// read-only region: each reports false with the cursor at the chunk that
// failed and the bytes before it copied.
func TestFailures(t *testing.T) {
	tests := []struct {
		name    string
		sges    []verbs.SGE
		scatter bool
		at      Cursor // where the walk stops
	}{
		{"unknown lkey", []verbs.SGE{{Addr: 0x1000, Length: 4, LKey: 1}, {Addr: 0x9000, Length: 4, LKey: 9}}, false, Cursor{Index: 1}},
		{"beyond the region", []verbs.SGE{{Addr: 0x1000 + 60, Length: 8, LKey: 1}}, false, Cursor{}},
		{"read-only", []verbs.SGE{{Addr: 0x2000, Length: 2, LKey: 2}, {Addr: 0x3000, Length: 4, LKey: 3}}, true, Cursor{Index: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem()
			b := bytes.Repeat([]byte{0xEE}, 6)
			var c Cursor
			if tc.scatter {
				require.False(t, c.Scatter(m, tc.sges, b))
				require.Equal(t, []byte{0xEE, 0xEE}, m.regions[2][:2], "the first SGE was written")
				require.Equal(t, byte(3<<6), m.regions[3][0], "the read-only region was not")
			} else {
				require.False(t, c.Gather(m, tc.sges, b))
				if tc.at.Index > 0 {
					require.Equal(t, m.regions[1][:4], b[:4], "the first SGE was read")
				}
			}
			require.Equal(t, tc.at, c)
		})
	}
}

// FuzzWalk builds an SGE list over one region from the input (lengths of
// 0..31 bytes, each SGE after a gap), then gathers the message in chunks
// of the given sizes from a cursor Seek put at an offset: the bytes equal
// the flat message from that offset, Gather fails exactly when a chunk
// runs past the end, Scatter of the gathered bytes writes them back
// unchanged, and Scatter of them into a zeroed region of the same layout
// writes exactly those bytes of the message, each where its SGE says,
// and nothing else.
func FuzzWalk(f *testing.F) {
	f.Add([]byte{4, 0, 7, 31, 1}, []byte{3, 5, 1, 30}, uint8(2))
	f.Add([]byte{0, 0}, []byte{1}, uint8(0))
	f.Fuzz(func(t *testing.T, lens, chunks []byte, seek uint8) {
		if len(lens) > 32 || len(chunks) > 64 {
			return
		}
		m := &mem{regions: map[uint32][]byte{1: make([]byte, 32*64)}}
		region := m.regions[1]
		for i := range region {
			region[i] = byte(i * 7)
		}
		m.regions[2] = make([]byte, len(region)) // the zeroed copy, at 0x2000
		var sges, zeroed []verbs.SGE
		var msg []byte
		var at []uint64 // the offset in the region of each byte of msg
		addr := uint64(0)
		for i, l := range lens {
			n := uint32(l % 32)
			addr += uint64(i % 3) // gaps between SGEs
			sges = append(sges, verbs.SGE{Addr: 0x1000 + addr, Length: n, LKey: 1})
			zeroed = append(zeroed, verbs.SGE{Addr: 0x2000 + addr, Length: n, LKey: 2})
			msg = append(msg, region[addr:addr+uint64(n)]...)
			for k := range uint64(n) {
				at = append(at, addr+k)
			}
			addr += uint64(n)
		}
		off := min(int(seek), len(msg))
		// c gathers, f gathers the same chunks with GatherICRC: the same
		// bytes, the same outcome, and the register of the bytes gathered.
		var c, f Cursor
		c.Seek(sges, uint32(off))
		f.Seek(sges, uint32(off))
		got := []byte{}
		crc := uint32(0x5A5A5A5A)
		for _, ch := range chunks {
			b := make([]byte, int(ch%40))
			ok := c.Gather(m, sges, b)
			b2 := make([]byte, len(b))
			crc2, ok2 := f.GatherICRC(m, sges, b2, crc)
			require.Equal(t, ok, ok2, "GatherICRC fails where Gather does")
			if off+len(got)+len(b) > len(msg) {
				require.False(t, ok, "a chunk past the end fails")
				break
			}
			require.True(t, ok)
			require.Equal(t, b, b2, "GatherICRC copies what Gather does")
			require.Equal(t, packet.ICRCUpdate(crc, b), crc2, "GatherICRC folds what it copies")
			crc = crc2
			got = append(got, b...)
		}
		require.Equal(t, c, f, "both cursors advance alike")
		require.True(t, bytes.Equal(msg[off:off+len(got)], got), "gathered %x, message %x from %d", got, msg, off)

		var w Cursor
		w.Seek(sges, uint32(off))
		before := append([]byte(nil), region...)
		require.True(t, w.Scatter(m, sges, got))
		require.Equal(t, before, region, "writing back the same bytes changes nothing")

		var z Cursor
		z.Seek(zeroed, uint32(off))
		require.True(t, z.Scatter(m, zeroed, got))
		want := make([]byte, len(region))
		for i := range got {
			want[at[off+i]] = region[at[off+i]]
		}
		require.Equal(t, want, m.regions[2], "Scatter writes the message's bytes where the SGEs put them, and nothing else")
	})
}

// TestCheck: Check resolves every chunk of the next n bytes with local
// write access, as Scatter would, without writing: it fails at the first
// chunk whose L_Key does not resolve, whose region is read-only or that
// the list does not hold, with the cursor at that chunk.
func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		sges []verbs.SGE
		n    uint32
		ok   bool
		at   Cursor
	}{
		{"none", list[:3], 0, true, Cursor{}},
		{"whole list", list[:3], 14, true, Cursor{Index: 2, Offset: 4}},
		{"part of the second SGE", list[:3], 12, true, Cursor{Index: 2, Offset: 2}},
		{"past the end", list[:3], 15, false, Cursor{Index: 3}},
		{"read-only second SGE", []verbs.SGE{{Addr: 0x2000, Length: 2, LKey: 2}, {Addr: 0x3000, Length: 4, LKey: 3}}, 4, false, Cursor{Index: 1}},
		{"unknown second L_Key", []verbs.SGE{{Addr: 0x1000, Length: 4, LKey: 1}, {Addr: 0x9000, Length: 4, LKey: 9}}, 6, false, Cursor{Index: 1}},
		{"beyond the region", []verbs.SGE{{Addr: 0x1000 + 60, Length: 8, LKey: 1}}, 8, false, Cursor{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem()
			before := flat(m)
			var c Cursor
			require.Equal(t, tc.ok, c.Check(m, tc.sges, tc.n))
			require.Equal(t, tc.at, c)
			require.Equal(t, before, flat(m), "Check writes nothing")
		})
	}
}

// TestGatherICRCFailure: when GatherICRC fails, the register it returns
// covers exactly the bytes copied before the chunk that failed.
func TestGatherICRCFailure(t *testing.T) {
	m := newMem()
	sges := []verbs.SGE{{Addr: 0x1000, Length: 4, LKey: 1}, {Addr: 0x9000, Length: 4, LKey: 9}}
	dst := make([]byte, 6)
	var c Cursor
	crc, ok := c.GatherICRC(m, sges, dst, 0x5A5A5A5A)
	require.False(t, ok)
	require.Equal(t, Cursor{Index: 1}, c)
	require.Equal(t, m.regions[1][:4], dst[:4])
	require.Equal(t, packet.ICRCUpdate(0x5A5A5A5A, m.regions[1][:4]), crc)
}

// wrongLen is a Memory that breaks the contract of Local: it returns
// delta bytes more (or fewer) than asked for.
type wrongLen struct {
	m     *mem
	delta int
}

func (w wrongLen) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	b, ok := w.m.Local(lkey, addr, length+1, need)
	if !ok {
		return nil, false
	}
	return b[:int(length)+w.delta], true
}

// TestLocalOfWrongLengthFails: the walk advances the cursor by what it
// asked Local for and copies what Local returned, so a slice of another
// length (a faulty memory-region lookup) is refused as an unresolved
// L_Key (rxe: a local protection error), with the cursor left at that
// chunk, instead of copying bytes out of step with the cursor or past the
// end of the packet.
func TestLocalOfWrongLengthFails(t *testing.T) {
	sges := []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	for _, delta := range []int{-1, 1} {
		w := wrongLen{newMem(), delta}
		var c Cursor
		require.False(t, c.Gather(w, sges, make([]byte, 4)), "Gather, %+d", delta)
		require.Equal(t, Cursor{}, c)
		_, ok := c.GatherICRC(w, sges, make([]byte, 4), 0)
		require.False(t, ok, "GatherICRC, %+d", delta)
		require.False(t, c.Scatter(w, sges, make([]byte, 4)), "Scatter, %+d", delta)
		require.False(t, c.Check(w, sges, 4), "Check, %+d", delta)
		require.Equal(t, Cursor{}, c)
	}
}
