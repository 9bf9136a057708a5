package rxe

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/internal/ring"
	"github.com/gorxe/gorxe/netdev"
)

// vector is a completion vector: the run queue of the QPs whose
// receive CQ is bound to it and the transmit goroutine that drains it,
// with its own batch buffers, so QPs of different vectors are driven on
// different cores without sharing a lock. With one netdev.Conn per vector
// (Listen, OpenConns) the vector also has its own receive goroutine, and
// the kernel steers each QP's packets to its vector's socket by QPN.
type vector struct {
	d    *Device
	id   int
	conn netdev.Conn // written by this vector (and read by it when it has its own)
	// reader reads the netdev that receives the vector's QPs' packets
	// (its own, or the device's one), for busy polling (busypoll.go).
	reader *connReader

	runMu sync.Mutex     // protects runq
	runq  ring.Ring[*QP] // runnable QPs in FIFO order, each at most once (QP.queued)
	kick  chan struct{}

	// txMu is held by whichever goroutine pulls packets from the vector's
	// QPs and writes them (the transmit goroutine, or a receive goroutine
	// sending inline), from the pull through the write: datagrams leave in
	// the order they were pulled. It protects the batch below.
	txMu     sync.Mutex
	txMsgs   []netdev.Message // the batch being built and written
	txOwners []*QP            // the QP of each datagram in txMsgs
	txGens   []uint32         // the QP's incarnation (QP.gen) each datagram was built in

	timers timerQueue // the wake-up times of the vector's QPs (timers.go)

	cpu      atomic.Int32  // the CPU the vector's goroutines are pinned to, or -1
	rcvdPkts atomic.Uint64 // packets of the vector's QPs received
	sentPkts atomic.Uint64 // datagrams the vector wrote
	passes   atomic.Uint64 // transmit passes that wrote something
}

func newVector(d *Device, id int, conn netdev.Conn) *vector {
	b := conn.BatchSize()
	v := &vector{d: d, id: id, conn: conn, kick: make(chan struct{}, 1),
		txMsgs: make([]netdev.Message, b), txOwners: make([]*QP, b), txGens: make([]uint32, b)}
	for i := range v.txMsgs {
		v.txMsgs[i].Buf = make([]byte, maxPacket)
	}
	v.cpu.Store(-1)
	v.timers.v = v
	v.runq.Init(maxQPs, nil)
	return v
}

// pin pins the calling goroutine's thread to the vector's CPU when
// Options.PinVectors is set. A failure leaves the goroutine unpinned and
// shows as CPU -1 in Device.Vectors.
func (v *vector) pin() {
	if v.d.cpus == nil {
		return
	}
	cpu := v.d.cpus[v.id%len(v.d.cpus)]
	if err := pinThread(cpu); err != nil {
		v.cpu.Store(-1)
		v.d.counters.pinErrors.Add(1)
		return
	}
	v.cpu.CompareAndSwap(-1, int32(cpu))
}

// VectorInfo describes a completion vector (Device.Vectors).
type VectorInfo struct {
	// ID is the vector's number (CQAttr.Vector).
	ID int
	// CQs is the number of CQs bound to the vector.
	CQs int
	// CPU is the CPU its goroutines are pinned to (Options.PinVectors),
	// or -1.
	CPU int
	// OwnSocket reports whether the vector reads its own socket (one per
	// vector, steered by QPN) rather than sharing the device's.
	OwnSocket bool
	// RcvdPkts counts the packets received for the vector's QPs; SentPkts
	// the datagrams it wrote; Passes its transmit passes that wrote any.
	RcvdPkts, SentPkts, Passes uint64
}

// Vectors describes the device's completion vectors.
func (d *Device) Vectors() []VectorInfo {
	d.vecMu.Lock()
	defer d.vecMu.Unlock()
	out := make([]VectorInfo, len(d.vecs))
	for i, v := range d.vecs {
		out[i] = VectorInfo{ID: i, CQs: d.vecUses[i], CPU: int(v.cpu.Load()), OwnSocket: len(d.conns) > 1,
			RcvdPkts: v.rcvdPkts.Load(), SentPkts: v.sentPkts.Load(), Passes: v.passes.Load()}
	}
	return out
}

// schedule puts qp on its vector's run queue, once.
func (d *Device) schedule(qp *QP) { qp.vec.schedule(qp) }

// schedule puts qp on the run queue, once, and wakes the transmit
// goroutine.
func (v *vector) schedule(qp *QP) {
	if v.enqueue(qp) {
		v.wake()
	}
}

// enqueue puts qp on the run queue unless it is already there, and
// reports whether it did. The caller wakes the transmit goroutine, or
// runs a transmit pass itself (connReader.sendInline).
func (v *vector) enqueue(qp *QP) bool {
	if qp.queued.Swap(true) {
		return false
	}
	v.runMu.Lock()
	// Not nil: a QP is queued at most once, and a device has at most
	// maxQPs of them.
	*v.runq.Push() = qp
	v.runMu.Unlock()
	return true
}

// wake wakes the transmit goroutine.
func (v *vector) wake() {
	select {
	case v.kick <- struct{}{}: // wake-ups coalesce, like rxe's task ARMED state
	default:
	}
}

// runnable reports whether a QP is on the run queue.
func (v *vector) runnable() bool {
	v.runMu.Lock()
	defer v.runMu.Unlock()
	return v.runq.Len() > 0
}

// nextRunnable pops a runnable QP, or returns nil if none is queued.
func (v *vector) nextRunnable() *QP {
	v.runMu.Lock()
	defer v.runMu.Unlock()
	if v.runq.Len() == 0 {
		return nil
	}
	slot := v.runq.Front()
	qp := *slot
	*slot = nil // the slot keeps no destroyed QP alive
	v.runq.Pop()
	return qp
}

// routineTransmit pulls packets from runnable QPs into batches and sends
// them, one transmit pass after another until no QP is runnable.
func (v *vector) routineTransmit() {
	d := v.d
	defer d.wg.Done()
	v.pin()
	for {
		select {
		case <-d.done:
			return
		case <-v.kick:
		}
		for {
			if d.closed.Load() {
				return
			}
			v.txMu.Lock()
			k := v.transmitPass(len(v.txMsgs))
			v.txMu.Unlock()
			if k == 0 {
				break
			}
		}
	}
}

// transmitPass pulls up to limit packets from runnable QPs into txMsgs and
// writes them; it returns how many datagrams it handled. It never sleeps:
// a datagram the local host refuses goes back to its QP (see send). The
// caller holds txMu.
func (v *vector) transmitPass(limit int) int {
	k := 0
	for k < limit {
		qp := v.nextRunnable()
		if qp == nil {
			break
		}
		from := k
		var gen uint32
		k, gen = qp.step(v.txMsgs[:limit], v.txOwners, k)
		for i := from; i < k; i++ {
			v.txGens[i] = gen
		}
	}
	if k > 0 {
		v.passes.Add(1)
		v.send(v.txMsgs[:k], v.txOwners[:k], v.txGens[:k])
		// As the run queue's slots (nextRunnable), the batch's owners
		// keep no QP alive once it is written.
		clear(v.txOwners[:k])
	}
	return k
}

// send writes a batch (the caller holds txMu). A datagram the local host
// refuses (a full qdisc or socket buffer: netdev.ErrLocalDrop) is handled
// as Options.LocalDropMode says; by default (LocalDropAdaptive) it and the
// later datagrams of its QP in the batch go back to that QP
// (QP.takeBack), which sends them again after its local-drop back-off
// (retry.Backoff): back-pressure, not a transport retry. The rest of the
// batch is written at once, so one QP's refusal holds back no other QP.
// Any other error drops the datagram (the transport's own retry recovers
// it) and is counted.
//
// gens[i] is the incarnation of its QP that built msgs[i] (QP.gen): a QP
// reset since then is a new connection, and what it learns of the write
// is only of its own datagrams (a reset drops everything the old
// incarnation queued, as rxe_qp_reset empties the send queue).
//
// A UC or UD QP's work request completes once its last datagram is
// written (rxe_xmit_packet marks the WQE done once the packet is handed
// to IP): each QP's send engine learns of its datagrams written or
// dropped here (QP.unreliableSent); the ones it takes back stay its own.
func (v *vector) send(msgs []netdev.Message, owners []*QP, gens []uint32) {
	d := v.d
	adaptive := d.opts.LocalDropMode == LocalDropAdaptive
	spins := 0
	for len(msgs) > 0 {
		// A QP's locally dropped datagrams lead its part of the batch, so
		// the host takes them when the call starts: that ends their burst
		// of local drops, not the return, which can come milliseconds
		// later when the call also delivers the batch through a veth pair
		// (measured in docs/seed002.md).
		var start time.Time
		if adaptive {
			start = time.Now()
		}
		n, err := v.conn.WriteBatch(msgs)
		d.counters.writeBatches.Add(1)
		n = max(n, 0)
		if n > 0 {
			spins = 0
			v.sentPkts.Add(uint64(n))
			if adaptive {
				backoffSent(owners[:n], gens[:n], start)
			} else {
				countSent(owners[:n], owners[:n], gens[:n])
			}
		}
		msgs, owners, gens = msgs[n:], owners[n:], gens[n:]
		if err == nil {
			return
		}
		if errors.Is(err, netdev.ErrLocalDrop) && len(msgs) > 0 {
			d.counters.localDrops.Add(1)
			owners[0].counter.localDrops.Add(1)
			switch d.opts.LocalDropMode {
			case LocalDropAdaptive:
				msgs, owners, gens = owners[0].takeBack(msgs, owners, gens)
				continue
			case LocalDropSpin:
				if spins < spinLimit {
					spins++
					runtime.Gosched()
					continue
				}
			}
			spins = 0
			countSent(owners[:0], owners[:1], gens[:1]) // discarded: it left our hands, as a datagram lost on the wire
			msgs, owners, gens = msgs[1:], owners[1:], gens[1:]
			continue
		}
		if d.closed.Load() || len(msgs) == 0 {
			// Close settles the UC and UD datagrams not written
			// (closeDevice).
			return
		}
		d.counters.sendErr.Add(1)
		countSent(owners[:0], owners[:1], gens[:1])
		msgs, owners, gens = msgs[1:], owners[1:], gens[1:]
	}
}

// backoffSent counts the datagrams of owners as sent at start and feeds
// each QP's local-drop back-off (localDrop.sent), taking each QP's lock
// and adding to its count once per run of its datagrams of one
// incarnation (gens); a UC or UD QP's send engine learns of them there
// (QP.unreliableSent) if it is the one that built them.
func backoffSent(owners []*QP, gens []uint32, start time.Time) {
	for i := 0; i < len(owners); {
		qp, gen, j := owners[i], gens[i], i
		qp.mu.Lock()
		for ; i < len(owners) && owners[i] == qp && gens[i] == gen; i++ {
			qp.localDrop.sent(start)
		}
		if gen == qp.gen {
			qp.unreliableSent(i - j)
		}
		qp.mu.Unlock()
		qp.counter.sentPkts.Add(uint64(i - j))
	}
}

// countSent counts the datagrams of counted as sent, one add per run of a
// QP's datagrams, and tells the send engine of each UC or UD QP of left
// (the datagrams that left: counted, or one dropped; gens are their
// incarnations) of its own (QP.unreliableSent), under the QP's lock, once
// per run, if the incarnation that built them is the QP's current one.
func countSent(counted, left []*QP, gens []uint32) {
	for i := 0; i < len(counted); {
		qp, j := counted[i], i
		for i < len(counted) && counted[i] == qp {
			i++
		}
		qp.counter.sentPkts.Add(uint64(i - j))
	}
	for i := 0; i < len(left); {
		qp, gen, j := left[i], gens[i], i
		for i < len(left) && left[i] == qp && gens[i] == gen {
			i++
		}
		if qp.unreliable() {
			qp.mu.Lock()
			if gen == qp.gen {
				qp.unreliableSent(i - j)
			}
			qp.mu.Unlock()
		}
	}
}
