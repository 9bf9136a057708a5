package rxe

import (
	"errors"
	"net"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// routineReceive reads batches of datagrams and dispatches them to QPs.
//
// After each batch, if QPs became runnable and the transmit goroutine is
// not busy (txMu is free), it runs one transmit pass itself: up to a
// batch of their packets is pulled and written here, without waking the
// transmit goroutine, which still gets the kick and takes whatever is
// left. This is rxe's way of running a task inline when it is not already
// running (rxe_run_task) and it matters on few cores: the RC window
// advances one round trip at a time (data, ACK, more data), and every
// goroutine wake-up in that loop waits for the Go scheduler to find a P,
// tens of µs when the other goroutines are busy in system calls. See
// docs/performance.md ("RC transport"). Options.NoInlineSend turns it off.
func (d *Device) routineReceive(conn netdev.Conn, served []*vector) {
	defer d.wg.Done()
	if len(served) == 1 {
		served[0].pin()
	}
	b := conn.BatchSize()
	msgs := make([]netdev.Message, b)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufSize)
	}
	for {
		n, err := conn.ReadBatch(msgs)
		if err != nil {
			if d.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			d.counters.receiveErrors.Add(1)
			select {
			case <-d.done:
				return
			case <-time.After(time.Millisecond):
			}
			continue
		}
		if d.closed.Load() {
			return
		}
		d.counters.readBatches.Add(1)
		now := time.Now()
		for i := range n {
			d.receive(now, &msgs[i])
		}
		if d.opts.NoInlineSend {
			continue
		}
		for _, v := range served {
			if v.runnable() && v.txMu.TryLock() {
				v.transmitPass(len(v.txMsgs))
				v.txMu.Unlock()
			}
		}
	}
}

// receive checks one datagram (rxe_rcv, hdr_check) and hands it to its QP.
func (d *Device) receive(now time.Time, m *netdev.Message) {
	pkt := m.Buf[:m.N]
	p, err := packet.Parse(pkt)
	if err != nil {
		d.counters.malformed.Add(1)
		return
	}
	if !d.checkICRC(pkt, m) {
		return
	}
	if p.Opcode() == packet.CNP {
		d.counters.cnps.Add(1)
		return
	}
	if p.BTH().PKey()&0x7FFF != packet.DefaultPKey&0x7FFF {
		d.counters.malformed.Add(1)
		return
	}
	if p.DestQP() == packet.GSIQPN {
		d.receiveGSI(now, p, m.Addr)
		return
	}
	qp := d.qps.lookup(p.DestQP())
	if qp == nil {
		d.counters.unknownQP.Add(1)
		return
	}
	qp.vec.rcvdPkts.Add(1) // per vector: no cache line shared between vectors per packet
	qp.receive(now, p, m.Addr)
}
