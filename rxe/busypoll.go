package rxe

import (
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// Busy polling: a caller that spins on a CQ (CQ.BusyPoll, as perftest
// spins on ibv_poll_cq) reads the socket itself and does the receive
// goroutine's work on its own goroutine, so a response reaches it without
// a goroutine wake-up; and PostSend on a QP whose CQ is busy-polled sends
// on the caller's goroutine when the vector's transmit path is free, as
// kernel rxe's rxe_post_send runs the requester task inline. With a
// blocking waiter (CQ.Wait, a completion channel) the hand-offs stay: a
// goroutine woken by a channel send then runs next on the same processor,
// which is cheap, while an inline send would hold the transmit path when
// the receive goroutine wants it (docs/performance.md, "Inline PostSend").

// connReader is the receiving side of one of the device's netdevs: the
// receive goroutine, which blocks until datagrams arrive, and busy-polling
// callers, which read without waiting. When the netdev is a
// netdev.SharedReader they take its datagrams in turn under gate, each
// handling what it read (the QP steps, completions) before unlocking, so a
// QP sees its packets in the order the socket delivered them. Otherwise
// only the receive goroutine reads, and busy polling spins on the CQ.
type connReader struct {
	d      *Device
	conn   netdev.Conn
	shared netdev.SharedReader // conn, if it is one; else nil
	served []*vector           // the vectors whose QPs' packets conn receives

	gate netdev.Gate       // with shared: held by the goroutine reading and handling a batch
	msgs []netdev.Message  // the batch being read and handled (under gate with shared)
	icrc packet.ICRCPrefix // checks the batch's ICRCs (as msgs)
	qps  qpCache           // the last QP the batch's packets went to (as msgs)
	// recovered counts the batch's packets whose non-zero IPv4 ID was
	// recovered from their ICRC; dispatch adds it to the device's count
	// once per batch (as msgs).
	recovered uint64
	// rcvdVec and rcvd count the run of the batch's packets that went to
	// one vector's QPs; the run is added to the vector's count when the
	// vector changes and at the end of the batch (as msgs).
	rcvdVec *vector
	rcvd    uint64
	// run is the batch's current run of packets for one RC QP, runQP:
	// they are handed to it under one hold of its lock (QP.receiveRun)
	// when a packet for another QP comes, before a transmit pass, and at
	// the end of the batch (as msgs).
	run   []rcPacket
	runQP *QP

	wakes []*CQ // scratch for Device.endBatch

	polls      atomic.Uint64 // inline reads by busy-polling callers that found datagrams
	polledPkts atomic.Uint64 // the datagrams they handled
	spinPkts   atomic.Uint64 // the datagrams the receive goroutine read while spinning (spin)
}

func newConnReader(d *Device, conn netdev.Conn, served []*vector) *connReader {
	r := &connReader{d: d, conn: conn, served: served, msgs: make([]netdev.Message, conn.BatchSize()),
		run: make([]rcPacket, 0, conn.BatchSize())}
	r.shared, _ = netdev.AsSharedReader(conn)
	for i := range r.msgs {
		r.msgs[i].Buf = make([]byte, rxBufSize)
	}
	for _, v := range served {
		v.reader = r
	}
	return r
}

// readBlocking is the receive goroutine's read: it waits for a batch and,
// with a shared netdev, returns holding gate when it returns datagrams.
func (r *connReader) readBlocking() (int, error) {
	if r.shared != nil {
		return r.shared.ReadBatchGated(r.msgs, &r.gate)
	}
	return r.conn.ReadBatch(r.msgs)
}

// handle checks and dispatches the n datagrams just read (the QP steps
// and completions run here), releases gate if the netdev is shared, and
// then sends what became ready as the receive goroutine does.
func (r *connReader) handle(n int) {
	r.dispatch(n)
	if r.shared != nil {
		r.unlock()
	}
	r.sendInline()
}

// dispatch checks and dispatches msgs[:n]. After each flushBytes of
// datagrams, if more remain, it runs a transmit pass (sendInline): the
// ACKs and READ responses that the first part of a large batch made
// ready then leave while the rest is handled, instead of after the whole
// batch. A batch holds up to a whole PSN window of 4 KiB packets (one
// recvmmsg takes everything queued, and GRO buffers hold 15 each), so
// without the pass the requester hears nothing until the responder has
// handled its whole window, and each window became a round trip of its
// own (docs/performance.md, "ACKs within a batch"). Batches of small
// packets never reach flushBytes and cost no extra pass.
func (r *connReader) dispatch(n int) {
	r.d.batches.Add(1)
	total := 0
	defer func() { r.d.endBatch(&r.wakes, total >= streamBytes) }()
	now := time.Now()
	bytes := 0
	for i := range n {
		m := &r.msgs[i]
		r.d.receive(now, m, r)
		total += m.N
		if bytes += m.N; bytes >= flushBytes && i+1 < n {
			r.flushRun(now)
			r.sendInline()
			bytes = 0
		}
	}
	r.flushRun(now)
	// The cache is the batch's (qpCache): forgetting it here keeps no QP
	// destroyed after the batch reachable from the reader.
	r.qps = qpCache{}
	if r.recovered > 0 {
		r.d.counters.icrcRecovered.Add(r.recovered)
		r.recovered = 0
	}
	r.countVector(nil)
}

// rcPacket is a packet of a run for one RC QP and its source address.
type rcPacket struct {
	p   packet.Packet
	src netip.AddrPort
}

// addRun adds packet p from src, addressed to RC QP qp, to the batch's
// run, handing the run so far to its QP first if it is another's.
func (r *connReader) addRun(now time.Time, qp *QP, p packet.Packet, src netip.AddrPort) {
	if qp != r.runQP {
		r.flushRun(now)
		r.runQP = qp
	}
	r.run = append(r.run, rcPacket{p, src})
}

// flushRun hands the run to its QP. The QP's packets to send are queued
// without waking the transmit goroutine when r serves its vector (see
// Device.receive).
func (r *connReader) flushRun(now time.Time) {
	if r.runQP == nil {
		return
	}
	r.runQP.receiveRun(now, r.run, r.runQP.vec.reader == r)
	clear(r.run)
	r.run, r.runQP = r.run[:0], nil
}

// countVector counts a packet received for a QP of vector v, adding the
// run counted so far to its vector's count when v differs from that
// vector; countVector(nil) ends the run.
func (r *connReader) countVector(v *vector) {
	if v != nil && v == r.rcvdVec {
		r.rcvd++
		return
	}
	if r.rcvdVec != nil {
		r.rcvdVec.rcvdPkts.Add(r.rcvd)
	}
	r.rcvdVec, r.rcvd = v, 0
	if v != nil {
		r.rcvd = 1
	}
}

// streamBytes is the size from which a batch of datagrams counts as a
// stream's for endBatch: four 4 KiB packets (a batch of ACKs or of small
// messages is far smaller).
const streamBytes = 16 << 10

// flushBytes is how many bytes of datagrams dispatch handles between
// transmit passes within a batch: sixteen 4 KiB packets, a 64 KiB
// message, a quarter of the default PSN window.
const flushBytes = 64 << 10

// unlock releases gate. When it is taken back for us (a reader found it
// held and left the socket to us: netdev.Gate.Unlock), the socket is read
// and handled until it is empty, then released again. It returns how many
// datagrams it handled so.
func (r *connReader) unlock() int {
	total := 0
	for r.gate.Unlock() {
		for {
			n, err := r.shared.TryReadBatch(r.msgs)
			if err != nil || n == 0 {
				break
			}
			r.polledPkts.Add(uint64(n))
			r.dispatch(n)
			total += n
		}
	}
	return total
}

// sendInline runs one transmit pass for each served vector that has
// runnable QPs and whose transmit path is free: up to a batch of their
// packets (ACKs, READ responses, the next requests) goes out on this
// goroutine. The transmit goroutine is woken only for what is left: a
// vector whose transmit path was busy, or QPs still runnable after the
// pass. The QPs that the datagrams just handled made runnable were queued
// without waking it (Device.receive), so a batch whose ACK the pass sends
// costs no goroutine wake-up. Options.NoInlineSend turns the pass off
// (the transmit goroutine is woken instead).
func (r *connReader) sendInline() {
	for _, v := range r.served {
		if !v.runnable() {
			continue
		}
		if !r.d.opts.NoInlineSend && v.txMu.TryLock() {
			v.transmitPass(len(v.txMsgs))
			v.txMu.Unlock()
			if !v.runnable() {
				continue
			}
		}
		v.wake()
	}
}

// wakeRunnable wakes the transmit goroutine of each served vector that has
// runnable QPs: the ones the datagrams just handled queued without waking
// it (Device.receive), when the reader sends nothing itself (poll).
func (r *connReader) wakeRunnable() {
	for _, v := range r.served {
		if v.runnable() {
			v.wake()
		}
	}
}

// poll reads the netdev without waiting, on the calling goroutine, and
// handles what arrived as the receive goroutine would, except that it
// does not send what that made ready (ACKs, responses): those stay queued
// for the caller (CQ.BusyPoll sends them at its next call, a PostSend in
// the same transmit pass as its request), and the transmit goroutine has
// been woken for them as always. A full batch is followed by another read,
// so that no datagram the netdev has already taken from the socket (a GRO
// buffer's) is left behind. It returns how many datagrams it handled: 0
// when the netdev is not shared, another goroutine is reading it, or
// nothing was there.
func (r *connReader) poll() int {
	if r.shared == nil || !r.gate.TryLock() {
		return 0
	}
	return r.pollLocked()
}

// pollLocked is poll once the gate is taken; it releases it.
func (r *connReader) pollLocked() int {
	total := 0
	for {
		n, err := r.shared.TryReadBatch(r.msgs)
		if err != nil || n == 0 {
			// An error is the receive goroutine's to count and act on:
			// it meets the same socket at its next read.
			break
		}
		total += n
		r.d.counters.readBatches.Add(1)
		r.dispatch(n)
		if n < len(r.msgs) {
			break
		}
	}
	if total > 0 {
		r.polls.Add(1)
		r.polledPkts.Add(uint64(total))
	}
	if r.unlock()+total > 0 {
		r.wakeRunnable()
	}
	return total
}

// BusyPoll moves up to len(wcs) completions into wcs like Poll. When the
// CQ is empty it first reads the sockets its QPs receive on (their
// vectors'; before any QP uses the CQ, its own vector's) once each,
// without waiting, and does the receive goroutine's work on the calling
// goroutine (packet checks, the QP steps, their completions and the ACKs
// or responses they send), then polls again; so a caller spinning on
// BusyPoll, as perftest spins on ibv_poll_cq, gets its completion with no
// goroutine wake-up and without the Go runtime's network poller. It never
// blocks. Once BusyPoll has been called on a CQ, PostSend on a QP using it
// sends on the caller's goroutine when the QP's vector is not already
// transmitting.
//
// The ACKs and responses that the packets it read made ready are not sent
// before BusyPoll returns: the caller's answer (a PostSend right after the
// completion, as in a ping-pong) takes them along in its own sendmmsg, and
// otherwise the next BusyPoll sends them first thing (or the transmit
// goroutine, woken for them, if no BusyPoll comes). So a message that
// completes a wait costs its receiver one system call before the answer
// leaves, not two.
//
// A passive end, such as the target of READs and atomics, which gets no
// completion for what it answers, can spin on BusyPoll of its QPs' CQ all
// the same: the requests it reads are answered on the spinning goroutine,
// without waking the receive goroutine (rxectl's read-lat server does
// this).
//
// The sockets of the multicast groups the device joined are read too,
// without waiting, in turn with the goroutines that read them
// (Device.pollMcast): a UD QP's group datagrams reach a spinner as its
// unicast ones do.
//
// The socket is read only where the device's netdev can be shared with the
// receive goroutine (netdev.SharedReader: a netdev.UDPConn, as Listen
// opens, or a decorator over one that reads in turn, netdev.AsSharedReader;
// not a PipeConn); otherwise BusyPoll is Poll.
// The receive goroutine keeps serving the socket whenever no caller polls.
func (cq *CQ) BusyPoll(wcs []WC) int {
	if cq.unsent.Load() && cq.unsent.Swap(false) {
		cq.sendReady()
	}
	if n := cq.Poll(wcs); n > 0 || len(wcs) == 0 {
		return n
	}
	if !cq.busy.Load() {
		cq.busy.Store(true)
		cq.dev.busyPolled.Store(true) // the receive goroutines stop spinning (connReader.spin)
	}
	if cq.dev.closed.Load() {
		return 0
	}
	got := 0
	if rs := cq.readers.Load(); rs != nil {
		for _, r := range *rs {
			got += r.poll()
		}
	} else {
		got = cq.dev.vecs[cq.vector].reader.poll()
	}
	got += cq.dev.pollMcast()
	if got == 0 {
		return 0
	}
	cq.unsent.Store(true)
	return cq.Poll(wcs)
}

// sendReady runs a transmit pass on the calling goroutine for each vector
// of the CQ's readers that has runnable QPs and a free transmit path: the
// ACKs and responses left by BusyPoll's last reads.
func (cq *CQ) sendReady() {
	if rs := cq.readers.Load(); rs != nil {
		for _, r := range *rs {
			r.sendInline()
		}
		return
	}
	cq.dev.vecs[cq.vector].reader.sendInline()
}

// addReader records that a QP completing into the CQ receives its packets
// through r (its vector's socket reader), so that BusyPoll reads there: a
// QP's vector is its receive CQ's, which need not be this CQ's, and with a
// socket per vector its packets (the ACKs that complete its sends
// included) arrive on its vector's socket only. Readers stay recorded
// after the QP is destroyed; polling one more socket is harmless.
func (cq *CQ) addReader(r *connReader) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	var next []*connReader
	if cur := cq.readers.Load(); cur != nil {
		if slices.Contains(*cur, r) {
			return
		}
		next = slices.Clone(*cur)
	}
	next = append(next, r)
	cq.readers.Store(&next)
}

// schedulePosted queues a QP that has new work requests. If one of its
// CQs is busy-polled, its packets go out on the calling goroutine when the
// vector's transmit path is free (sendNow); otherwise the transmit
// goroutine is woken.
func (qp *QP) schedulePosted() {
	if qp.sendCQ.busy.Load() || qp.recvCQ.busy.Load() {
		qp.vec.sendNow(qp)
		return
	}
	qp.vec.schedule(qp)
}

// sendNow puts qp on the run queue and, if no other goroutine is
// transmitting for the vector, runs a transmit pass on the calling
// goroutine; the transmit goroutine is woken only if the pass could not
// run or left runnable QPs.
func (v *vector) sendNow(qp *QP) {
	if v.d.opts.NoInlineSend {
		v.schedule(qp)
		return
	}
	v.enqueue(qp)
	if v.txMu.TryLock() {
		v.transmitPass(len(v.txMsgs))
		v.txMu.Unlock()
		if !v.runnable() {
			return
		}
	}
	v.wake()
}

// PollsSocket reports whether BusyPoll on the CQ reads its vector's socket
// itself (the device's netdev is a netdev.SharedReader); if not, BusyPoll
// is Poll and a spinning caller depends on the device's goroutines, which
// the Go runtime wakes only from a processor with nothing else to run.
func (cq *CQ) PollsSocket() bool {
	if rs := cq.readers.Load(); rs != nil {
		for _, r := range *rs {
			if r.shared == nil {
				return false
			}
		}
		return true
	}
	return cq.dev.vecs[cq.vector].reader.shared != nil
}

// endBatch ends a batch that dispatch began: it wakes the CQ waiters whose
// wake-up waited for the batch (CQ.wakeWaiter), taking them into *scratch
// (the caller's, reused) so that no lock is held while it wakes them.
//
// A goroutine woken here waits in this processor's run queue until this
// goroutine blocks or is preempted, and a receive goroutine that finds the
// socket never empty (a stream at the machine's speed) blocks late. So
// endBatch yields its processor, letting the woken goroutine run next, in
// two cases:
//
//   - stream is set (the batch held streamBytes or more: READ responses,
//     WRITE or SEND data), and a CQ it wakes holds a send queue's
//     completion and was woken by an earlier batch whose completions are
//     still there (CQ.woken, CQ.sendWC): its consumer, which posts the
//     next requests, has not run since (or runs elsewhere and has not
//     polled yet). Yielding then made a 64 KiB READ stream faster and
//     cheaper per operation. The same yield for receive completions, or
//     after batches of ACKs, made SEND or WRITE streams slower in some
//     runs (docs/performance.md, "A consumer that has not taken its
//     completions since its wake-up"); the receiving consumer has the
//     next rule;
//   - a completion of the batch left its CQ more than half full, or a
//     receive WQE the batch took left its SRQ or its QP's own RQ with
//     fewer than half its max_wr (Device.behind; the receive CQ of
//     several QPs can be far from half full while one of their receive
//     queues runs empty): the consumer is falling behind the device,
//     and until the Go runtime preempts this goroutine, up to 10 ms
//     later, it reposts nothing, so its receive queue runs empty (RNR
//     NAKs; UD and UC messages dropped) or its CQ overflows.
//
// The yield costs a goroutine switch, and only while a consumer waits.
func (d *Device) endBatch(scratch *[]*CQ, stream bool) {
	d.batches.Add(-1)
	if d.behind.Load() && d.behind.Swap(false) {
		defer runtime.Gosched()
	}
	d.wakeMu.Lock()
	if len(d.wakes) == 0 {
		d.wakeMu.Unlock()
		return
	}
	list := append((*scratch)[:0], d.wakes...)
	clear(d.wakes)
	d.wakes = d.wakes[:0]
	d.wakeMu.Unlock()
	if wakeCQs(list) && stream {
		runtime.Gosched()
	}
	clear(list)
	*scratch = list[:0]
}

// recvQueueLow sets behind if a batch is being handled: a take from a
// receive queue left it with fewer than half its max_wr WQEs
// (recvQueue.take, recvQueue.Pop), and endBatch then yields to the
// consumer so that it re-posts before the next batch.
func (d *Device) recvQueueLow() {
	if d.batches.Load() > 0 && !d.behind.Load() {
		d.behind.Store(true)
	}
}

// wakeCQs wakes the waiters of the CQs in list and reports whether one of
// them holds a send queue's completion and had been woken before and has
// not taken its completions since (CQ.woken, CQ.sendWC).
func wakeCQs(list []*CQ) bool {
	starved := false
	for _, cq := range list {
		cq.wakePending.Store(false)
		if cq.woken.Load() && cq.queued.Load() > 0 && cq.sendWC.Load() {
			starved = true
		} else {
			cq.woken.Store(true)
		}
		select {
		case cq.wake <- struct{}{}:
		default:
		}
	}
	return starved
}
