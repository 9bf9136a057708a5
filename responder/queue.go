package responder

import (
	"github.com/gorxe/gorxe/internal/ring"
	"github.com/gorxe/gorxe/packet"
)

// outKind is the kind of an output queue item.
type outKind uint8

const (
	outACK       outKind = iota // ACKNOWLEDGE with an ACK syndrome (cumulative)
	outNAK                      // ACKNOWLEDGE with a NAK or RNR NAK syndrome
	outAtomicACK                // ATOMIC ACKNOWLEDGE
	outRead                     // an RDMA READ response train (or one empty response)
	// outHeld: receive completions held behind a READ response stream
	// (Responder.hold): nheld of them, the oldest in Responder.held. It
	// sends nothing: once nothing but hole and progress reports is queued
	// ahead of it, releaseHeld removes it and posts them.
	outHeld
)

// outItem is one queued response. A read train stays at the head until its
// last packet is built.
type outItem struct {
	kind  outKind
	fatal bool // the error NAK of a failure (kept by Flush)
	// urgent: a selective-repeat hole report or extra READ stream, queued
	// ahead of the other items (jumpQueue).
	urgent bool
	first  bool // outRead: the next packet is FIRST or ONLY
	syn    packet.Syndrome
	psn    packet.PSN // PSN of the next packet
	req    packet.PSN // outRead: PSN of the READ request the train answers
	msn    uint32
	nheld  uint32 // outHeld
	orig   uint64 // outAtomicACK
	// outRead: what is left to send.
	va    uint64
	rkey  uint32
	resid uint32
	// outRead: Responder.heldIn when the request the stream answers (the
	// READ, or the duplicate it was queued or repositioned for) was
	// received, and whether a receive WQE was in use by a message in
	// progress then: what a fault of the stream completes (readFault).
	heldMark uint64
	midMsg   bool
}

// outQueue is the bounded ring of responses in PSN order (ring.Ring: it
// grows up to its bound only when more responses are queued than ever
// before). reads counts its outRead items, so that whether a READ
// response stream is queued costs no walk of the queue.
type outQueue struct {
	ring.Ring[outItem]
	reads int
}

// pop removes the head item.
func (q *outQueue) pop() {
	if q.Front().kind == outRead {
		q.reads--
	}
	q.Pop()
}

// truncate keeps the first n items and counts the READ streams among
// them; every removal of items but pop goes through it, so reads stays
// right whatever the kinds of the items kept or removed.
func (q *outQueue) truncate(n int) {
	q.Truncate(n)
	q.reads = 0
	for i := range n {
		if q.At(i).kind == outRead {
			q.reads++
		}
	}
}

// remove removes the item at index i, keeping the order of the others.
func (q *outQueue) remove(i int) {
	n := q.Len()
	for j := i; j < n-1; j++ {
		*q.At(j) = *q.At(j + 1)
	}
	q.truncate(n - 1)
}

// push appends a zeroed item; the caller has checked Free (getReq does).
func (q *outQueue) push() *outItem {
	it := q.Push()
	*it = outItem{}
	return it
}

// keepFatal drops every item but a fatal NAK.
func (q *outQueue) keepFatal() {
	var fatal outItem
	found := false
	for i := range q.Len() {
		if it := q.At(i); it.kind == outNAK && it.fatal {
			fatal, found = *it, true
			break
		}
	}
	q.truncate(0)
	if found {
		*q.push() = fatal
	}
}

// hasRead reports whether a READ response stream is queued: a READ's
// train, the replay of a duplicate READ, or the empty response of a FLUSH
// or ATOMIC_WRITE.
func (q *outQueue) hasRead() bool { return q.reads > 0 }

// queueACK queues a plain ACK for psn with the current MSN. If the newest
// queued item is a plain ACK it is replaced: ACKs are cumulative
// (IBA 9.7.5.1.1, coalescing).
func (r *Responder) queueACK(psn packet.PSN) {
	if r.q.Len() > 0 {
		if t := r.q.Back(); t.kind == outACK {
			t.psn, t.msn = psn, r.msn
			r.ctrs.AcksCoalesced++
			return
		}
	}
	it := r.q.push()
	it.kind, it.psn, it.msn = outACK, psn, r.msn
}

// queueNAK queues a NAK or RNR NAK.
func (r *Responder) queueNAK(syn packet.Syndrome, psn packet.PSN, fatal bool) {
	it := r.q.push()
	it.kind, it.syn, it.psn, it.msn, it.fatal = outNAK, syn, psn, r.msn, fatal
}

// queueAtomicACK queues an ATOMIC ACKNOWLEDGE carrying the original value.
func (r *Responder) queueAtomicACK(psn packet.PSN, orig uint64) {
	it := r.q.push()
	it.kind, it.psn, it.msn, it.orig = outAtomicACK, psn, r.msn, orig
}

// queueRead queues a READ response train for the request being run.
func (r *Responder) queueRead(rd readReq, msn uint32) {
	it := r.q.push()
	r.q.reads++
	it.kind, it.first, it.psn, it.req, it.msn = outRead, true, rd.psn, rd.psn, msn
	it.va, it.rkey, it.resid = rd.va, rd.rkey, rd.length
	it.heldMark, it.midMsg = r.heldIn, r.wqe.valid
}
