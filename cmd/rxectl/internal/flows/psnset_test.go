package flows

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestPSNSet: a psnSet answers as a set of single PSNs does, through
// adds and removes of spans and single PSNs that overlap and wrap past
// 2^24-1 (PSNs near the wrap, seeded).
func TestPSNSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := packet.PSN(packet.PSNMask - 40)
	psn := func() packet.PSN { return base.Add(rng.IntN(80)) }
	for round := range 200 {
		var s psnSet
		ref := map[packet.PSN]bool{}
		for range 20 {
			first, n := psn(), rng.IntN(30)
			if rng.IntN(3) == 0 {
				s.add(first, n)
				for i := range n {
					ref[first.Add(i)] = true
				}
			} else {
				s.remove(first, n)
				for i := range n {
					delete(ref, first.Add(i))
				}
			}
			for i := range 120 {
				q := base.Add(i - 20)
				if s.has(q) != ref[q] {
					require.Equal(t, ref[q], s.has(q), "round %d, PSN %#x, set %v", round, q, s)
				}
			}
		}
	}
}
