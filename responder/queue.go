package responder

import "github.com/gorxe/gorxe/packet"

// outKind is the kind of an output queue item.
type outKind uint8

const (
	outACK       outKind = iota // ACKNOWLEDGE with an ACK syndrome (cumulative)
	outNAK                      // ACKNOWLEDGE with a NAK or RNR NAK syndrome
	outAtomicACK                // ATOMIC ACKNOWLEDGE
	outRead                     // an RDMA READ response train (or one empty response)
)

// outItem is one queued response. A read train stays at the head until its
// last packet is built.
type outItem struct {
	kind  outKind
	fatal bool // the error NAK of a failure (kept by Flush)
	first bool // outRead: the next packet is FIRST or ONLY
	syn   packet.Syndrome
	psn   packet.PSN // PSN of the next packet
	msn   uint32
	orig  uint64 // outAtomicACK
	// outRead: what is left to send.
	va    uint64
	rkey  uint32
	resid uint32
}

// outQueue is a bounded ring of responses in PSN order. Its items start
// empty and grow by doubling up to the bound when more responses are
// queued than ever before, so an idle QP costs little memory and a steady
// stream allocates nothing.
type outQueue struct {
	items    []outItem
	max      int // the bound
	start, n int
}

// minOut is the first size of the output queue.
const minOut = 4

func (q *outQueue) init(size int) { q.max = size }

func (q *outQueue) free() int { return q.max - q.n }

// grow doubles the items (at most max) and moves the queued ones to the
// front.
func (q *outQueue) grow() {
	items := make([]outItem, min(q.max, max(minOut, 2*len(q.items))))
	for i := range q.n {
		items[i] = *q.at(i)
	}
	q.items, q.start = items, 0
}

func (q *outQueue) at(i int) *outItem { return &q.items[(q.start+i)%len(q.items)] }

func (q *outQueue) head() *outItem { return &q.items[q.start] }

func (q *outQueue) tail() *outItem { return q.at(q.n - 1) }

// push appends an item; the caller has checked free() (getReq does).
func (q *outQueue) push() *outItem {
	if q.n == len(q.items) {
		q.grow()
	}
	it := q.at(q.n)
	q.n++
	*it = outItem{}
	return it
}

func (q *outQueue) pop() {
	q.start = (q.start + 1) % len(q.items)
	q.n--
}

// truncate drops every item behind the head.
func (q *outQueue) truncate() { q.n = min(q.n, 1) }

// keepFatal drops every item but a fatal NAK.
func (q *outQueue) keepFatal() {
	var fatal outItem
	found := false
	for i := 0; i < q.n; i++ {
		if it := q.at(i); it.kind == outNAK && it.fatal {
			fatal, found = *it, true
			break
		}
	}
	q.start, q.n = 0, 0
	if found {
		*q.push() = fatal
	}
}

func (q *outQueue) hasRead() bool {
	for i := 0; i < q.n; i++ {
		if q.at(i).kind == outRead {
			return true
		}
	}
	return false
}

// queueACK queues a plain ACK for psn with the current MSN. If the newest
// queued item is a plain ACK it is replaced: ACKs are cumulative
// (IBA 9.7.5.1.1, coalescing).
func (r *Responder) queueACK(psn packet.PSN) {
	if r.q.n > 0 {
		if t := r.q.tail(); t.kind == outACK {
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

// queueRead queues a READ response train.
func (r *Responder) queueRead(rd readReq, msn uint32) {
	it := r.q.push()
	it.kind, it.first, it.psn, it.msn = outRead, true, rd.psn, msn
	it.va, it.rkey, it.resid = rd.va, rd.rkey, rd.length
}
