package faults_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusedDuplicateNotLost: when the inner Conn refuses the original of
// a duplicated datagram, the decision is taken back (the caller sends the
// datagram again and it is duplicated then), so its copy, which was not
// tried either, is not a lost datagram. Counters must add up: what the
// peer receives = sent − dropped + duplicated − lost.
func TestRefusedDuplicateNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string
		want []int
		dups uint64
	}{
		{"scripted", "dup=#3", []int{0, 1, 2, 2}, 1},
		{"always", "dup=1", []int{0, 0, 1, 1, 2, 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, st := sendThrough(t, 2, 0, 1, mustRules(t, tc.rule+",dir=send"), alternating(t, 3))
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.dups, st.Duplicated)
			require.Zero(t, st.Lost, "no datagram was lost")
			require.Equal(t, uint64(len(got)), 3+st.Duplicated-st.Dropped-st.Lost)
		})
	}
}
