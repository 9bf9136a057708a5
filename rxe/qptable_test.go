package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
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

// TestReceiveRunMatchesOneByOne hands a run of packets to an RC QP at once
// (QP.receiveRun, as a receive batch does) and the same packets to a
// second, identical QP one run each, as the receive path did before runs:
// the QP's state, counters and completions must be the same, also when a
// packet in the middle of the run fails the responder.
func TestReceiveRunMatchesOneByOne(t *testing.T) {
	type pkt struct {
		dpsn int // PSN after the QP's first expected one
		n    int // SEND ONLY payload bytes
	}
	for _, tc := range []struct {
		name   string
		pkts   []pkt
		cqe    int  // the receive CQ's size (default 256)
		failed bool // the QP enters ERR (after a NAK, once it has gone)
	}{
		{"in order", []pkt{{0, 8}, {1, 8}, {2, 8}}, 0, false},
		{"a duplicate in the middle", []pkt{{0, 8}, {0, 8}, {1, 8}}, 0, false},
		{"a gap, then the missing PSN", []pkt{{1, 8}, {0, 8}, {1, 8}}, 0, false},
		{"a length error fails the responder, then more", []pkt{{0, 8}, {1, 200}, {2, 8}, {3, 8}}, 0, true},
		{"a full CQ fails the responder, then more", []pkt{{0, 8}, {1, 8}, {2, 8}, {3, 8}}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type outcome struct {
				state QPState
				c     QPCounters
				wcs   []wcBrief
			}
			run := func(oneByOne bool) outcome {
				da, db, _, _ := pipeDevices(t)
				a := smallEnd(t, da, nil, qpOpts{})
				b := smallEnd(t, db, nil, qpOpts{cqe: tc.cqe})
				link(t, a, b, qpOpts{}, qpOpts{})
				for i := range 4 {
					_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(i*64, 64)}})
					require.NoError(t, err)
				}
				psn := b.qp.Query().RQPSN
				var run []rcPacket
				for _, k := range tc.pkts {
					p, err := packet.Parse(rawSend(t, b.qp.QPN(), (psn+uint32(k.dpsn))&0xFFFFFF, make([]byte, k.n), nil))
					require.NoError(t, err)
					run = append(run, rcPacket{p, da.Addr()})
				}
				// The transmit path is held meanwhile: an ACK or NAK sent
				// between two one-packet runs would move the QP on (a
				// failed responder's QP enters ERR once its NAK is out),
				// which the receive path's runs do not decide.
				now := time.Now()
				b.qp.vec.txMu.Lock()
				if oneByOne {
					for i := range run {
						b.qp.receiveRun(now, run[i:i+1], false)
					}
				} else {
					b.qp.receiveRun(now, run, false)
				}
				b.qp.vec.txMu.Unlock()
				if tc.failed {
					require.Eventually(t, func() bool { return b.qp.Query().State == QPSErr }, testutil.Bound(), time.Millisecond)
				}
				var wcs []wcBrief
				buf := make([]WC, 8)
				for {
					n := b.cq.Poll(buf)
					if n == 0 {
						break
					}
					wcs = append(wcs, briefs(buf[:n])...)
				}
				c := b.qp.Counters()
				// What the transmit goroutine sent by now is timed apart.
				c.SentPkts, c.BackoffDelay = 0, 0
				c.Responder.AcksSent, c.Responder.NaksSent, c.Responder.AcksCoalesced = 0, 0, 0
				return outcome{b.qp.Query().State, c, wcs}
			}
			require.Equal(t, run(true), run(false))
		})
	}
}

// TestQPTableClosed: after close, insert fails with ErrClosed and the QPs
// inserted before stay visible to each (Device.Close stops them).
func TestQPTableClosed(t *testing.T) {
	var tab qpTable
	q := new(QP)
	_, err := tab.insert(q, 0, 1)
	require.NoError(t, err)
	tab.close()
	_, err = tab.insert(new(QP), 0, 1)
	require.ErrorIs(t, err, ErrClosed)
	var seen []*QP
	tab.each(func(qp *QP) { seen = append(seen, qp) })
	require.Equal(t, []*QP{q}, seen)
}
