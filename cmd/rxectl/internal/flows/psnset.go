package flows

import "github.com/gorxe/gorxe/packet"

// psnSpan is the n PSNs from first on, in PSN order (modulo 2^24).
type psnSpan struct {
	first packet.PSN
	n     int
}

// psnSet is a set of PSNs kept as spans, so that a gap of millions of
// PSNs costs one span, not one entry per PSN. Spans are shorter than
// 2^23 (a gap is a forward distance, IBA 9.7.5.1.1) and may overlap.
type psnSet []psnSpan

// offset is how far q lies after first, modulo 2^24.
func offset(first, q packet.PSN) int { return int(uint32(q-first) & packet.PSNMask) }

// has reports whether q is in s.
func (s psnSet) has(q packet.PSN) bool {
	for _, sp := range s {
		if offset(sp.first, q) < sp.n {
			return true
		}
	}
	return false
}

// add puts the n PSNs from first on in s.
func (s *psnSet) add(first packet.PSN, n int) {
	if n > 0 {
		*s = append(*s, psnSpan{first, n})
	}
}

// remove takes the n PSNs from first on (n < 2^23) out of s.
func (s *psnSet) remove(first packet.PSN, n int) {
	const mod = packet.PSNMask + 1
	out := (*s)[:0:0]
	for _, sp := range *s {
		// The removed PSNs, in offsets from sp.first: [a, a+n), which
		// may wrap past 2^24 to [0, a+n-2^24).
		a := offset(sp.first, first)
		lo := max(0, a+n-mod) // the wrapped part covers [0, lo)
		end := min(a+n, mod)
		for _, piece := range [2][2]int{{lo, min(sp.n, a)}, {max(lo, end), sp.n}} {
			if piece[0] < piece[1] {
				out = append(out, psnSpan{sp.first.Add(piece[0]), piece[1] - piece[0]})
			}
		}
	}
	*s = out
}
