package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQPLookupCached drives a receive batch's one-entry QP cache through
// hits, misses and a QPN that is destroyed and handed to a new QP: the
// cache must never return a QP the table no longer maps to that QPN.
func TestQPLookupCached(t *testing.T) {
	var tab qpTable
	var c qpCache
	q1, q2 := new(QP), new(QP)
	n1, err := tab.insert(q1, 0, 1)
	require.NoError(t, err)
	n2, err := tab.insert(q2, 0, 1)
	require.NoError(t, err)
	steps := []struct {
		name string
		op   func()
		qpn  uint32
		want *QP
	}{
		{"first lookup fills the cache", nil, n1, q1},
		{"hit", nil, n1, q1},
		{"another QP replaces the entry", nil, n2, q2},
		{"back to the first", nil, n1, q1},
		{"unknown QPN", nil, 0xFFFFFF, nil},
		{"destroyed", func() { tab.remove(n1) }, n1, nil},
	}
	for _, s := range steps {
		if s.op != nil {
			s.op()
		}
		require.Same(t, s.want, tab.lookupCached(&c, s.qpn), s.name)
	}
	// The destroyed QP's number handed to a new QP.
	tab.next = n1
	q3 := new(QP)
	n, err := tab.insert(q3, 0, 1)
	require.NoError(t, err)
	require.Equal(t, n1, n)
	require.Same(t, q3, tab.lookupCached(&c, n1), "QPN reused by a new QP")
	// Destroyed and reused while cached, with no lookup in between.
	tab.remove(n1)
	tab.next = n1
	q4 := new(QP)
	_, err = tab.insert(q4, 0, 1)
	require.NoError(t, err)
	require.Same(t, q4, tab.lookupCached(&c, n1), "replaced while cached")
	// A remove while the QP is cached.
	tab.remove(n1)
	require.Nil(t, tab.lookupCached(&c, n1), "removed while cached")
}
