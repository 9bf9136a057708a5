package rxe

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// sharePair is a QP of device a connected to a QP of device b.
type sharePair struct{ a, b *end }

// connectShared connects n QPs of da to n QPs of db over MTU 4096, each
// end taking the other's ConnInfo as announced, but for what peer does to
// b's announcement to a.
func connectShared(t *testing.T, da, db *Device, n int, peer func(*ConnInfo)) []sharePair {
	t.Helper()
	var ps []sharePair
	for i := range n {
		a, b := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
		ia, ib := a.qp.Info(uint32(100*i+1)), b.qp.Info(uint32(100*i+2))
		if peer != nil {
			peer(&ib)
		}
		o := ConnectOptions{MTU: MTU4096, Timeout: testutil.QPTimeout}
		require.NoError(t, a.qp.Connect(ia, ib, o))
		require.NoError(t, b.qp.Connect(ib, ia, o))
		ps = append(ps, sharePair{a, b})
	}
	return ps
}

// reqLimits returns the window and READ part size the QP's next packet
// obeys (0, 0 without a requester): a share marked stale is taken first,
// as the step and Counters take it.
func reqLimits(qp *QP) (window, parts int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.req == nil {
		return 0, 0
	}
	qp.takeShare()
	return qp.req.Limits()
}

// rawLimits is reqLimits without taking a stale share.
func rawLimits(qp *QP) (window, parts int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.req.Limits()
}

// shareWindow is the window and READ part size of a QP whose share is
// peer bytes of the peer's buffer and own bytes of its device's.
func shareWindow(peer, own int, c charge) (int, int) {
	w := min(windowFor(peer, 4096, c), windowFor(own, 4096, c))
	return w, w / 2
}

// requireWindows waits (bounded) until every QP of qps has the window
// and part size want gives it: the QPs already in RTS apply a new share
// in their own step.
func requireWindows(t *testing.T, qps []*QP, want func(i int) (int, int), msg string) {
	t.Helper()
	ok := testutil.Within(testutil.Bound(), func() bool {
		for i, qp := range qps {
			w, p := reqLimits(qp)
			ww, wp := want(i)
			if w != ww || p != wp {
				return false
			}
		}
		return true
	})
	if !ok {
		var got, exp [][2]int
		for i, qp := range qps {
			w, p := reqLimits(qp)
			ww, wp := want(i)
			got, exp = append(got, [2]int{w, p}), append(exp, [2]int{ww, wp})
		}
		require.Equal(t, exp, got, msg)
	}
}

// TestSharedReceiveBuffer: two and four QPs of one device connected to
// one peer device with one socket each: every QP's window is what its
// share absorbs, the peer's buffer and this device's each divided among
// the QPs, including the QPs already in RTS when the others came; a QP
// that leaves (ERR, RESET, Destroy) gives its share back to the others.
// The data stays byte-exact.
func TestSharedReceiveBuffer(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			da, ca := smallBufDevice(t, "127.0.0.1", "share-a", false)
			db, cb := smallBufDevice(t, "127.0.0.2", "share-b", false)
			own, peer := ca.BufferSizes().Recv, cb.BufferSizes().Recv
			c := da.chargeTo(netip.MustParseAddr("127.0.0.2"))
			w1, _ := shareWindow(peer, own, c)
			wn, _ := shareWindow(peer/n, own/n, c)
			require.Less(t, wn, w1, "the test needs buffers whose shares absorb less than the whole")

			ps := connectShared(t, da, db, n, nil)
			qps := make([]*QP, n)
			for i, p := range ps {
				qps[i] = p.a.qp
			}
			requireWindows(t, qps, func(int) (int, int) { return shareWindow(peer/n, own/n, c) },
				"each of the QPs gets its share, the first ones too")
			require.Equal(t, wn, qps[0].Counters().Requester.Recovery.Window)

			// Byte-exact data over every QP at once, within the shares.
			for i, p := range ps {
				fill(p.a.buf, uint64(i+7))
				_, err := p.a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGList: []SGE{p.a.mr.SGE(0, 1<<20)}, RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey()})
				require.NoError(t, err)
				_, err = p.a.qp.PostSend(SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled,
					SGList: []SGE{p.a.mr.SGE(1<<19, 1<<19)}, RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey()})
				require.NoError(t, err)
			}
			for _, p := range ps {
				for range 2 {
					wc := waitWC(t, p.a.cq, p.a, p.b)
					require.Equal(t, WCSuccess, wc.Status, "%v", wc)
				}
				syncMem(p.a, p.b)
				require.True(t, bytes.Equal(p.a.buf[:1<<19], p.b.buf[:1<<19]), "WRITE data differs")
				require.True(t, bytes.Equal(p.a.buf[1<<19:], p.b.buf[:1<<19]), "READ data differs")
			}

			// One leaves by ERR: the others share among n-1.
			require.NoError(t, qps[0].Modify(&QPAttr{State: QPSErr}, QPAttrState))
			requireWindows(t, qps[1:], func(int) (int, int) { return shareWindow(peer/(n-1), own/(n-1), c) },
				"the QP in ERR no longer takes a share")
			if n == 4 {
				// Then one is destroyed, and one reset.
				require.NoError(t, qps[1].Destroy())
				require.NoError(t, qps[2].Modify(&QPAttr{State: QPSReset}, QPAttrState))
			}
			// The last one gets the whole buffers back.
			last := qps[n-1:]
			requireWindows(t, last, func(int) (int, int) { return shareWindow(peer, own, c) },
				"alone again: the whole buffers")
			require.Equal(t, w1, last[0].Counters().Requester.Recovery.Window)
		})
	}
}

// TestSharedPeerSockets: a peer that announces two receive sockets
// steers each QP's requests by its QPN modulo two, so the QPs whose peer
// QPNs fall on different sockets share nothing there: four QPs, two on
// each peer socket, each get half of the peer's buffer, not a quarter.
// A peer that announces no count is one socket for all four.
func TestSharedPeerSockets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sockets int
		perSock int // QPs sharing a peer socket
	}{{"two sockets", 2, 2}, {"count unknown", 0, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			da, ca := smallBufDevice(t, "127.0.0.1", "socks-a", false)
			db, _ := smallBufDevice(t, "127.0.0.2", "socks-b", false)
			own := ca.BufferSizes().Recv
			peer := own / 2 // the peer's smaller buffer bounds the shares
			c := da.chargeTo(netip.MustParseAddr("127.0.0.2"))
			halves, _ := shareWindow(peer/2, own/4, c)
			quarters, _ := shareWindow(peer/4, own/4, c)
			require.Less(t, quarters, halves, "the test needs shares that differ")

			ps := connectShared(t, da, db, 4, func(ib *ConnInfo) { ib.RecvBuffer, ib.RecvSockets = peer, tc.sockets })
			qps := make([]*QP, len(ps))
			for i, p := range ps {
				qps[i] = p.a.qp
			}
			if tc.sockets == 2 {
				odd := 0
				for _, p := range ps {
					odd += int(p.b.qp.QPN() % 2)
				}
				require.Equal(t, 2, odd, "the peer's QPNs: two on each socket")
			}
			requireWindows(t, qps, func(int) (int, int) { return shareWindow(peer/tc.perSock, own/4, c) },
				"the peer's buffer divided among the QPs on each of its sockets")
		})
	}
}

// TestOwnBufferThroughDecorator: a device whose socket carries a fault
// injector (as rxectl's --drop, or a capture with --pcap) still divides
// its own socket's buffer among its QPs: the decorator hides the buffer
// from SocketBuffers (and so from Info's announcement), not from the
// shares.
func TestOwnBufferThroughDecorator(t *testing.T) {
	o := SocketOptions(Options{RecvBuffer: 212992, NoForceBuffers: true})
	uc, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), o)
	require.NoError(t, err)
	da, err := Open(faults.Wrap(uc, faults.Config{Seed: 1}), Options{Name: "wrapped", OwnConn: true, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { da.Close() })
	db, _ := smallBufDevice(t, "127.0.0.2", "plain", false)
	_, ok := da.SocketBuffers()
	require.False(t, ok, "the decorator hides the buffer from SocketBuffers")
	own := uc.BufferSizes().Recv
	require.Equal(t, own, da.ownRecvBuffer())

	const big = 1 << 30 // a peer whose buffer bounds nothing
	ps := connectShared(t, da, db, 4, func(ib *ConnInfo) { ib.RecvBuffer, ib.RecvSockets = big, 4 })
	qps := make([]*QP, len(ps))
	for i, p := range ps {
		qps[i] = p.a.qp
	}
	c := da.chargeTo(netip.MustParseAddr("127.0.0.2"))
	requireWindows(t, qps, func(int) (int, int) { return shareWindow(big, own/4, c) },
		"this device's buffer divided among its four QPs")
}

// TestShareTakenByStep: a QP that leaves from its own step (an engine
// failure moves it to ERR in afterEngines) marks the QPs it shared
// sockets with; each takes its larger share before its requester builds
// its next packet (its step), or when its counters are read.
func TestShareTakenByStep(t *testing.T) {
	da, ca := smallBufDevice(t, "127.0.0.1", "steps-a", false)
	db, cb := smallBufDevice(t, "127.0.0.2", "steps-b", false)
	own, peer := ca.BufferSizes().Recv, cb.BufferSizes().Recv
	c := da.chargeTo(netip.MustParseAddr("127.0.0.2"))
	ps := connectShared(t, da, db, 3, nil)
	qps := []*QP{ps[0].a.qp, ps[1].a.qp, ps[2].a.qp}
	thirds := func(int) (int, int) { return shareWindow(peer/3, own/3, c) }
	halves := func(int) (int, int) { return shareWindow(peer/2, own/2, c) }
	requireWindows(t, qps, thirds, "three shares")

	q := qps[0]
	q.mu.Lock()
	q.enterError() // as afterEngines does on a failed engine
	q.syncShare()
	q.mu.Unlock()
	for _, m := range qps[1:] {
		require.True(t, m.shareStale.Load(), "marked")
		w, p := rawLimits(m)
		ww, wp := thirds(0)
		require.Equal(t, []int{ww, wp}, []int{w, p}, "not yet taken")
	}
	// A WRITE on the second: its step takes its share before it sends.
	p := ps[1]
	fill(p.a.buf, 3)
	_, err := p.a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled,
		SGList: []SGE{p.a.mr.SGE(0, 1<<20)}, RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, p.a.cq, p.a, p.b).Status)
	syncMem(p.a, p.b)
	require.True(t, bytes.Equal(p.a.buf, p.b.buf), "WRITE data differs")
	w, parts := rawLimits(qps[1])
	ww, wp := halves(0)
	require.Equal(t, []int{ww, wp}, []int{w, parts}, "the step took the share")
	// The third's counters report its new window.
	require.Equal(t, ww, qps[2].Counters().Requester.Recovery.Window)
	require.False(t, qps[2].shareStale.Load())
}
