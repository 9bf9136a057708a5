package rxe

import (
	"net/netip"
	"sync"

	"github.com/gorxe/gorxe/requester"
)

// bufShares is the device's record of its RC QPs that are connected (RTS
// or SQD) toward a peer that announced its receive buffer
// (QP.SetPeerReceiveBuffer), by the two sockets each QP's stream fills:
// the peer's socket that receives its requests, and this device's socket
// that receives its READ responses and ACKs. QPs on one socket share its
// buffer, and QP.bufferLimits gives each its share of both.
//
// mu is a leaf: it is taken under a QP's lock (syncShare, bufferLimits)
// and no other lock is taken while it is held. A QP whose share changed
// because another joined or left is not changed from here: it is marked
// (QP.shareStale), and the holder of its own lock applies its new window
// before its requester builds another packet (QP.takeShare).
type bufShares struct {
	mu      sync.Mutex
	members map[*QP]shareKey
	peerN   map[peerSocket]int
	ownN    map[*connReader]int
}

// peerSocket names one socket of a peer: the peer's address and port and,
// when the peer announced its socket count, the residue of the peer QPN
// its reuseport group steers by (netdev.ListenUDPGroup: destination QPN
// modulo the count). With the count unknown (0), every QP toward that
// address and port is taken to share one socket.
type peerSocket struct {
	dest    netip.AddrPort
	sockets uint32
	residue uint32
}

// shareKey is where a QP's stream lands: the peer's socket and this
// device's (the reader of the QP's vector: its own socket when the device
// has one per vector, steered by QPN as qpTable.insert gives them, or
// else the device's one socket).
type shareKey struct {
	peer peerSocket
	own  *connReader
}

// peerSocketOf returns the peer socket of a QP connected to dest's QP
// peerQPN, which announced sockets receive sockets (0: unknown).
func peerSocketOf(dest netip.AddrPort, peerQPN uint32, sockets int) peerSocket {
	if sockets <= 0 {
		return peerSocket{dest: dest}
	}
	n := uint32(min(sockets, int(^uint32(0)>>1)))
	return peerSocket{dest: dest, sockets: n, residue: peerQPN % n}
}

// shareKey returns where the QP's stream lands, and whether the QP shares
// sockets' buffers now: an RC QP in RTS or SQD, alive, whose peer
// announced its buffer (caller holds mu).
func (qp *QP) shareKey() (shareKey, bool) {
	k := shareKey{peer: peerSocketOf(qp.dest, qp.attr.DestQPN, qp.peerBuf.sockets), own: qp.vec.reader}
	in := qp.req != nil && qp.peerBuf.recv > 0 && !qp.dead() && (qp.state == QPSRTS || qp.state == QPSSQD)
	return k, in
}

// counts returns how many of the device's sharing QPs land on k's peer
// socket and on k's own socket, qp counted there whether it is recorded
// yet or not.
func (s *bufShares) counts(qp *QP, k shareKey) (peer, own int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	peer, own = s.peerN[k.peer], s.ownN[k.own]
	mk, in := s.members[qp]
	if !in || mk.peer != k.peer {
		peer++
	}
	if !in || mk.own != k.own {
		own++
	}
	return peer, own
}

// update records qp at k (in) or forgets it (!in) and marks the QPs
// whose shares that changes (QP.shareStale): the others on the sockets
// qp leaves or joins, and qp itself when it stays recorded at a new key.
// A mark is a store to an atomic flag: a change costs one pass over the
// recorded QPs, whatever their number.
func (s *bufShares) update(qp *QP, k shareKey, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, was := s.members[qp]
	if was == in && (!in || old == k) {
		return
	}
	if s.members == nil {
		s.members, s.peerN, s.ownN = make(map[*QP]shareKey), make(map[peerSocket]int), make(map[*connReader]int)
	}
	if was {
		delete(s.members, qp)
		dec(s.peerN, old.peer)
		dec(s.ownN, old.own)
	}
	if in {
		s.members[qp] = k
		s.peerN[k.peer]++
		s.ownN[k.own]++
		if was {
			qp.shareStale.Store(true)
		}
	}
	for m, mk := range s.members {
		if m != qp && (was && (mk.peer == old.peer || mk.own == old.own) || in && (mk.peer == k.peer || mk.own == k.own)) {
			m.shareStale.Store(true)
		}
	}
}

// dec decrements m[k], deleting it at zero.
func dec[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// syncShare records whether and where the QP shares sockets' buffers
// after a change of its state or attributes (caller holds mu), and marks
// every other QP whose share that changes (shareStale; bufShares.update).
// The QP's own window was set by startRequester with the QP already
// counted; it is marked too only when its sockets changed (a new address
// vector or destination QP).
func (qp *QP) syncShare() {
	k, in := qp.shareKey()
	qp.dev.shares.update(qp, k, in)
}

// takeShare applies the QP's new share if it is marked (caller holds
// mu). The step runs it before the requester builds packets, so that no
// packet leaves under a share that changed; a QP held back by a window
// that grew has packets outstanding, whose ACKs step it again. Counters
// runs it too, so that the window it reports is the one the next packet
// obeys.
func (qp *QP) takeShare() {
	if qp.shareStale.Load() && qp.shareStale.Swap(false) && qp.req != nil && !qp.dead() &&
		(qp.state == QPSRTS || qp.state == QPSSQD) {
		qp.applyShare()
	}
}

// applyShare gives the requester the window and READ part size of the
// QP's share now (bufferLimits), if they changed (caller holds mu).
func (qp *QP) applyShare() {
	w, parts := qp.bufferLimits(qp.attr.PathMTU.Bytes())
	if w <= 0 {
		w = requester.DefaultWindow
	}
	if cw, cp := qp.req.Limits(); cw == w && cp == parts {
		return
	}
	qp.req.SetWindow(w, parts)
}
