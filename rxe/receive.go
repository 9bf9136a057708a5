package rxe

import (
	"errors"
	"net"
	"runtime"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// routineReceive reads batches of datagrams and dispatches them to QPs.
//
// After each batch, if QPs became runnable and the transmit goroutine is
// not busy (txMu is free), it runs one transmit pass itself: up to a
// batch of their packets is pulled and written here, and the transmit
// goroutine is woken only if the pass could not run or left runnable QPs
// (connReader.sendInline). This is rxe's way of running a task inline when it is not already
// running (rxe_run_task) and it matters on few cores: the RC window
// advances one round trip at a time (data, ACK, more data), and every
// goroutine wake-up in that loop waits for the Go scheduler to find a P,
// tens of µs when the other goroutines are busy in system calls. See
// docs/performance.md ("RC transport"). Options.NoInlineSend turns it off.
//
// A caller busy-polling a CQ (CQ.BusyPoll) may read the same socket
// between two of these reads and do the same work (busypoll.go).
func (d *Device) routineReceive(r *connReader) {
	defer d.wg.Done()
	if len(r.served) == 1 {
		r.served[0].pin()
	}
	var spin time.Duration
	if r.shared != nil {
		spin = d.opts.receiveSpin()
	}
	for {
		n, err := r.readBlocking()
		if err != nil {
			if d.readFailed(err) {
				return
			}
			continue
		}
		if d.closed.Load() {
			if r.shared != nil {
				r.unlock()
			}
			return
		}
		d.counters.readBatches.Add(1)
		r.handle(n)
		if spin > 0 {
			r.spin(spin)
		}
	}
}

// spin reads the socket without waiting after a batch (Options.ReceiveSpin)
// while the device's transport waits on round trips (Device.wantSpin: a
// loss being recovered, or a window bound to a small socket buffer): each
// batch it finds is handled as the receive goroutine handles one, and
// restarts the limit; after an empty read it yields its processor
// (runtime.Gosched). It returns when limit passes without a datagram, the
// transport no longer waits so, the device closes, a read fails (the
// blocking read meets the error and counts it), or a caller busy-polls one
// of the device's CQs (that caller reads the socket itself). A read it
// cannot take because another goroutine holds the socket (a busy poller, a
// QP reading before a timeout) is not one: that goroutine handles what is
// there.
func (r *connReader) spin(limit time.Duration) {
	d := r.d
	now := time.Now()
	if !d.wantSpin(now) {
		return
	}
	end := now.Add(limit)
	for !d.closed.Load() && !d.busyPolled.Load() {
		if r.gate.TryLock() {
			n, err := r.shared.TryReadBatch(r.msgs)
			if err != nil {
				r.unlock()
				return
			}
			if n > 0 {
				r.spinPkts.Add(uint64(n))
				d.counters.readBatches.Add(1)
				r.handle(n)
				end = time.Now().Add(limit)
				continue
			}
			if r.unlock() > 0 {
				// Another reader left the socket to us and we handled
				// what it found (connReader.unlock): send what that made
				// ready, as handle does.
				r.sendInline()
				end = time.Now().Add(limit)
			}
		}
		if t := time.Now(); t.After(end) || !d.wantSpin(t) {
			return
		}
		runtime.Gosched()
	}
}

// checkDatagram checks the RoCE packet in m as rxe_rcv does before it
// looks at the destination QP: its structure (packet.Parse), its ICRC
// (checkICRC, with the prefix cache pre) and its P_Key; a congestion
// notification is counted and goes no further. It reports the packet,
// whether its ICRC held only for a recovered IPv4 ID (the caller counts
// it), and whether the packet goes on; the drops are counted.
func (d *Device) checkDatagram(m *netdev.Message, pre *packet.ICRCPrefix) (p packet.Packet, recovered, ok bool) {
	pkt := m.Buf[:m.N]
	p, err := packet.Parse(pkt)
	if err != nil {
		d.counters.malformed.Add(1)
		return p, false, false
	}
	if ok, recovered = d.checkICRC(pkt, m, pre); !ok {
		return p, false, false
	}
	if p.Opcode() == packet.CNP {
		d.counters.cnps.Add(1)
		return p, recovered, false
	}
	if p.BTH().PKey()&0x7FFF != packet.DefaultPKey&0x7FFF {
		d.counters.malformed.Add(1)
		return p, recovered, false
	}
	return p, recovered, true
}

// receive checks one datagram (rxe_rcv, hdr_check; checkDatagram) and hands it to its QP:
// a UC or UD QP at once, an RC QP with the run of its packets that r is
// collecting (connReader.addRun, QP.receiveRun). r is the reader that read
// it: a QP of a vector r serves that has packets to send after it is
// queued without waking the transmit goroutine, which r does after its
// batch (connReader.sendInline, wakeRunnable); any other is queued and
// woken at once.
func (d *Device) receive(now time.Time, m *netdev.Message, r *connReader) {
	p, recovered, ok := d.checkDatagram(m, &r.icrc)
	if recovered {
		r.recovered++
	}
	if !ok {
		return
	}
	if p.DestQP() == packet.GSIQPN {
		// The packets of the batch before this MAD reach their QP first,
		// in arrival order, before anything the MAD starts (a DREQ or
		// REJ ends with its QP in ERR).
		r.flushRun(now)
		d.receiveGSI(now, p, m.Addr)
		return
	}
	if p.DestQP() == MulticastQPN {
		// A datagram to a multicast group, on a socket bound to the
		// wildcard address (mcast.go), or a packet for no QP.
		d.receiveMcastOnDevice(now, p, m, r)
		return
	}
	qp := d.qps.lookupCached(&r.qps, p.DestQP())
	if qp == nil {
		d.counters.unknownQP.Add(1)
		return
	}
	r.countVector(qp.vec) // per vector: no cache line shared between vectors
	if qp.unreliable() {
		qp.receiveUnreliable(now, p, m, d.addr)
		return
	}
	r.addRun(now, qp, p, m.Addr)
}

// lossSpinHold is how long after a sign of loss (noteLoss) the receive
// goroutines spin after their batches: the recovery of one loss takes a
// few round trips, and at 0.1 % loss of a stream of 4 KiB packets the next
// loss comes within a few milliseconds.
const lossSpinHold = 50 * time.Millisecond

// noteLoss records at now that a QP of the device recovers a loss (a NAK
// or hole report sent or received, a request packet sent or received
// again: QP.noteLossSignals): the
// receive goroutines spin after their batches for lossSpinHold.
func (d *Device) noteLoss(now time.Time) {
	if until := int64(now.Sub(d.epoch) + lossSpinHold); until > d.spinUntil.Load() {
		d.spinUntil.Store(until)
	}
}

// wantSpin reports whether the receive goroutines spin after a batch at
// now (connReader.spin): while a loss is being recovered (noteLoss), for
// good on a device whose own receive buffer is too small for rxe's
// 128-PSN window (OpenConns), and while a QP lives whose peer's buffer is
// (QP.bufferLimits, Device.spinQPs). Both make the transport wait
// on its round trips, which a processor waking from idle lengthens; a
// loss-free stream with room in its window keeps the processors busy, and
// there a spin took turns from the goroutines doing the work (loss-free
// WRITE and SEND streams 5-12 % slower; docs/performance.md, "A receive
// goroutine that spins before it blocks").
func (d *Device) wantSpin(now time.Time) bool {
	return d.spinBound.Load() || d.spinQPs.Load() > 0 || int64(now.Sub(d.epoch)) < d.spinUntil.Load()
}

// readFailed handles an error of a receive goroutine's read: it reports
// true, for the goroutine to end, once the device or its socket is
// closed; any other error is counted (Counters.ReceiveErrors) and waited
// on for a millisecond, so that a socket failing at once does not spin.
func (d *Device) readFailed(err error) bool {
	if d.closed.Load() || errors.Is(err, net.ErrClosed) {
		return true
	}
	d.counters.receiveErrors.Add(1)
	select {
	case <-d.done:
		return true
	case <-time.After(time.Millisecond):
		return false
	}
}
