package sge

import (
	"testing"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// aliasMem is a Memory of one buffer under two L_Keys: key 1 at address
// 0x1000 and key 2, the same bytes, at 0x9000 (two regions of one buffer);
// key 3 grants no local write.
type aliasMem struct{ buf []byte }

func (m aliasMem) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	var base uint64
	switch lkey {
	case 1:
		base = 0x1000
	case 2:
		base = 0x9000
	case 3:
		if need&verbs.AccessLocalWrite != 0 {
			return nil, false
		}
		base = 0x1000
	default:
		return nil, false
	}
	if addr < base || addr-base+uint64(length) > uint64(len(m.buf)) {
		return nil, false
	}
	off := addr - base
	return m.buf[off : off+uint64(length)], true
}

// TestApart: two SGE lists are apart when no byte of one is a byte of the
// other, through any L_Key; an SGE that does not resolve with local write
// access makes them not apart.
func TestApart(t *testing.T) {
	mem := aliasMem{buf: make([]byte, 0x2000)}
	sg := func(key uint32, addr uint64, n uint32) verbs.SGE { return verbs.SGE{LKey: key, Addr: addr, Length: n} }
	for _, tc := range []struct {
		name string
		a, b []verbs.SGE
		want bool
	}{
		{"disjoint", []verbs.SGE{sg(1, 0x1000, 0x100)}, []verbs.SGE{sg(1, 0x1100, 0x100)}, true},
		{"one byte shared", []verbs.SGE{sg(1, 0x1000, 0x101)}, []verbs.SGE{sg(1, 0x1100, 0x100)}, false},
		{"same buffer", []verbs.SGE{sg(1, 0x1000, 0x400)}, []verbs.SGE{sg(1, 0x1000, 0x400)}, false},
		{"the same bytes through another key", []verbs.SGE{sg(1, 0x1200, 0x10)}, []verbs.SGE{sg(2, 0x9200, 0x10)}, false},
		{"apart through another key", []verbs.SGE{sg(1, 0x1200, 0x10)}, []verbs.SGE{sg(2, 0x9210, 0x10)}, true},
		{"the second SGE overlaps", []verbs.SGE{sg(1, 0x1000, 0x10), sg(1, 0x1800, 0x10)}, []verbs.SGE{sg(1, 0x1400, 0x10), sg(2, 0x980f, 1)}, false},
		{"empty SGEs share nothing", []verbs.SGE{sg(1, 0x1000, 0)}, []verbs.SGE{sg(1, 0x1000, 0x10)}, true},
		{"no local write", []verbs.SGE{sg(3, 0x1000, 0x10)}, []verbs.SGE{sg(1, 0x1800, 0x10)}, false},
		{"unknown key", []verbs.SGE{sg(1, 0x1000, 0x10)}, []verbs.SGE{sg(7, 0x1800, 0x10)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Apart(mem, tc.a, tc.b))
			require.Equal(t, tc.want, Apart(mem, tc.b, tc.a), "symmetric")
		})
	}
}
