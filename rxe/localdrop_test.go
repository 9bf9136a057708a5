package rxe

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// localDropPair connects two devices in the given local-drop mode through a
// pipe; the sends of the device faulty (0 = a, 1 = b) pass a fault injector
// with rules. It returns the devices and the injector.
func localDropPair(t *testing.T, mode LocalDropMode, faulty int, rules ...string) (*Device, *Device, *faults.Conn) {
	t.Helper()
	pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	conns := [2]netdev.Conn{pa, pb}
	fc := faults.Wrap(conns[faulty], faults.Config{Seed: 7, Rules: parseRules(t, rules...)})
	conns[faulty] = fc
	da, db := openPairWith(t, conns[0], conns[1], Options{LinkMTU: 9000, LocalDropMode: mode}, "", "")
	return da, db, fc
}

// connectVirtual connects two ends with a short ACK timeout (timeout 10:
// 4.2 ms), on synctest's virtual clock.
func connectVirtual(t *testing.T, a, b *end) {
	t.Helper()
	ia, ib := a.qp.Info(0x100), b.qp.Info(0x200)
	o := ConnectOptions{MTU: MTU1024, Timeout: 10, RetryCnt: 7, RNRRetry: 7}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))
}

const (
	ldMsg   = 16 << 10
	ldSlots = 64
)

// stream runs ldSlots RDMA operations of ldMsg bytes from a to b (op WRITE
// or READ) and checks every byte.
func stream(t *testing.T, a, b *end, op WROpcode, seed uint64) {
	t.Helper()
	src, dst := a, b
	if op == WRRDMARead {
		src, dst = b, a
	}
	fill(src.buf, seed)
	clear(dst.buf)
	syncMem(a, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, newStreamer(ctx, a, b, op, ldMsg, 16, 4).run(ldSlots))
	syncMem(a, b)
	for i := range ldSlots {
		off := i * benchMsg
		require.True(t, bytes.Equal(src.buf[off:off+ldMsg], dst.buf[off:off+ldMsg]), "slot %d differs", i)
	}
}

// TestLocalDropModes streams RDMA WRITEs and READs while 5% of the data
// sender's datagrams are refused by the (emulated) local host, in each
// LocalDropMode, on virtual time. Adaptive mode must recover without any
// transport retry; Timeout mode through the requester's retransmissions.
func TestLocalDropModes(t *testing.T) {
	for _, mode := range []LocalDropMode{LocalDropAdaptive, LocalDropTimeout, LocalDropSpin} {
		for _, op := range []WROpcode{WRRDMAWrite, WRRDMARead} {
			t.Run(fmt.Sprintf("%v/%v", mode, op), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					faulty := 0 // the data sender: a for WRITE, b (read responses) for READ
					if op == WRRDMARead {
						faulty = 1
					}
					da, db, fc := localDropPair(t, mode, faulty, "local-drop=5%")
					a, b := newEnd(t, da, ldSlots*benchMsg), newEnd(t, db, ldSlots*benchMsg)
					connectVirtual(t, a, b)
					stream(t, a, b, op, uint64(mode)*10+uint64(op))
					sender := []*end{a, b}[faulty]
					dc, qc := sender.dev.Counters(), sender.qp.Counters()
					rc := a.qp.Counters().Requester
					require.Positive(t, fc.Stats().Send.LocalDrops, "no datagram was refused: the test tests nothing")
					require.Equal(t, dc.LocalDrops, qc.LocalDrops, "one QP: its drops are the device's")
					require.Positive(t, qc.LocalDrops)
					t.Logf("device %+v; qp drops %d retries %d delay %v; requester %+v",
						dc, qc.LocalDrops, qc.DropRetries, qc.BackoffDelay, rc)
					switch mode {
					case LocalDropAdaptive:
						require.Zero(t, rc.Retransmits, "a local drop became a transport retry")
						require.Zero(t, rc.Timeouts)
						require.Zero(t, rc.RcvdSeqErr)
						require.Positive(t, qc.DropRetries)
						require.Positive(t, qc.BackoffDelay)
					case LocalDropTimeout:
						require.Positive(t, rc.Retransmits, "the requester never recovered a discarded datagram")
						require.Zero(t, qc.DropRetries)
					case LocalDropSpin:
						require.Zero(t, rc.Retransmits)
						require.Zero(t, qc.DropRetries)
					}
				})
			})
		}
	}
}

// TestLocalDropOtherQPNotHeld: two QPs share a device; every RDMA WRITE
// datagram of the first is refused for a while, so it backs off on its
// timer many times, while the second QP streams SENDs. The second QP's
// stream completes without virtual time passing at all (the transmit
// goroutine never waited for the first QP's back-off), and the first QP's
// WRITEs complete byte-exact without a transport retry.
func TestLocalDropOtherQPNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		da, db, _ := localDropPair(t, LocalDropAdaptive, 0, "local-drop=RC_RDMA_WRITE_*#1-400")
		a1, b1 := newEnd(t, da, ldSlots*benchMsg), newEnd(t, db, ldSlots*benchMsg)
		a2, b2 := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
		connectVirtual(t, a1, b1)
		connectVirtual(t, a2, b2)
		fill(a1.buf, 1)
		fill(a2.buf, 2)
		syncMem(a1, b1)
		syncMem(a2, b2)

		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// QP 1: a stream of WRITEs, in the background.
		wdone := make(chan error, 1)
		var wEnd time.Time
		go func() {
			err := newStreamer(ctx, a1, b1, WRRDMAWrite, ldMsg, 16, 4).run(ldSlots)
			wEnd = time.Now()
			wdone <- err
		}()
		// QP 2: SENDs of 4 KiB, one after another, waiting for each.
		const sends = 32
		for i := range sends {
			_, err := b2.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b2.mr.SGE(i*4096, 4096)}})
			require.NoError(t, err)
		}
		for i := range sends {
			_, err := a2.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled,
				SGList: []SGE{a2.mr.SGE(i*4096, 4096)}})
			require.NoError(t, err)
			wc := waitVirtual(t, a2.cq)
			require.Equal(t, WCSuccess, wc.Status)
			rwc := waitVirtual(t, b2.cq)
			require.Equal(t, WCSuccess, rwc.Status)
		}
		sendElapsed := time.Since(start)
		require.NoError(t, <-wdone)
		writeElapsed := wEnd.Sub(start)
		syncMem(a1, b1)
		syncMem(a2, b2)
		require.True(t, bytes.Equal(a2.buf[:sends*4096], b2.buf[:sends*4096]), "SEND data differs")
		for i := range ldSlots {
			off := i * benchMsg
			require.True(t, bytes.Equal(a1.buf[off:off+ldMsg], b1.buf[off:off+ldMsg]), "WRITE slot %d differs", i)
		}
		q1, q2 := a1.qp.Counters(), a2.qp.Counters()
		t.Logf("SENDs done after %v, WRITEs after %v; qp1 drops %d retries %d delay %v; qp2 drops %d",
			sendElapsed, writeElapsed, q1.LocalDrops, q1.DropRetries, q1.BackoffDelay, q2.LocalDrops)
		require.Positive(t, q1.LocalDrops)
		require.Positive(t, q1.DropRetries)
		require.Zero(t, q2.LocalDrops)
		require.Zero(t, q1.Requester.Retransmits)
		require.Zero(t, q2.Requester.Retransmits)
		require.Positive(t, writeElapsed, "the WRITE QP never backed off")
		require.Zero(t, sendElapsed, "the SEND QP waited for the other QP's back-off")
	})
}

// slowConn makes every WriteBatch take d before it is carried out, as a
// sendmmsg that also delivers the batch through a veth pair does.
type slowConn struct {
	netdev.Conn
	d time.Duration
}

func (c *slowConn) WriteBatch(msgs []netdev.Message) (int, error) {
	time.Sleep(c.d)
	return c.Conn.WriteBatch(msgs)
}

// TestLocalDropBurstEndsAtWriteStart: a drop burst ends when the retried
// datagram is handed to the host, at the start of the write that carries
// it, not when that write returns. Every write here takes 200 µs (virtual
// time) and the back-off timer is exact, so each burst lasts the delay
// alone and the adaptive delay settles at its floor; counting the write's
// own duration made every burst at least 200 µs longer, and the delay
// about as long as a write.
func TestLocalDropBurstEndsAtWriteStart(t *testing.T) {
	const slow = 200 * time.Microsecond
	synctest.Test(t, func(t *testing.T) {
		pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
		fc := faults.Wrap(pb, faults.Config{Seed: 7, Rules: parseRules(t, "local-drop=5%")})
		// No inline sends: only the transmit goroutine writes, so no
		// goroutine waits on txMu (not a durable block for synctest)
		// while a write sleeps.
		da, db := openPairWith(t, pa, &slowConn{Conn: fc, d: slow},
			Options{LinkMTU: 9000, LocalDropMode: LocalDropAdaptive, NoInlineSend: true}, "", "")
		a, b := newEnd(t, da, ldSlots*benchMsg), newEnd(t, db, ldSlots*benchMsg)
		connectVirtual(t, a, b)
		stream(t, a, b, WRRDMARead, 11)
		qc := b.qp.Counters()
		require.Positive(t, qc.LocalDrops, "no datagram was refused: the test tests nothing")
		require.Positive(t, qc.DropRetries)
		require.Zero(t, a.qp.Counters().Requester.Retransmits)
		require.Less(t, qc.BackoffDelay, slow/4, "the write's duration was counted in the drop bursts")
	})
}

// TestLocalDropHeldBounded: a QP whose held datagrams go out a part at a
// time (the rest of the batch is other QPs') and are refused again each
// time must keep them in order in no more buffers than it ever held at
// once. takeBack used to append the refused datagrams after the ones still
// held without reusing the slots already sent from, so every such round
// grew the QP's held buffers by the datagrams refused, without bound under
// a lasting local drop.
func TestLocalDropHeldBounded(t *testing.T) {
	const held, room = 64, 24
	da, _ := newDevices(t, "pipe")
	qp := initQP(t, da)
	v := qp.vec
	// The test is the vector's transmit pass: it holds txMu, as step and
	// takeBack's callers do, so the transmit goroutine stays out.
	v.txMu.Lock()
	defer v.txMu.Unlock()

	msgs := make([]netdev.Message, held)
	owners := make([]*QP, held)
	gens := make([]uint32, held) // the QP's first incarnation
	for i := range msgs {
		msgs[i] = netdev.Message{Buf: make([]byte, maxPacket), N: 64}
		msgs[i].Buf[0] = byte(i)
		owners[i] = qp
	}
	qp.takeBack(msgs, owners, gens) // the whole batch refused
	for round := range 40 {
		qp.mu.Lock()
		qp.localDrop.until = time.Time{} // the back-off is over
		k, _ := qp.stepHeld(time.Now(), msgs[:room], owners, 0)
		qp.mu.Unlock()
		require.Equal(t, room, k)
		qp.takeBack(msgs[:k], owners[:k], gens[:k]) // refused again

		qp.mu.Lock()
		l := &qp.localDrop
		var order []byte
		for i := l.head; i < l.n; i++ {
			order = append(order, l.held[i].Buf[0])
		}
		size := len(l.held)
		qp.mu.Unlock()
		want := make([]byte, held)
		for i := range want {
			want[i] = byte(i)
		}
		require.Equal(t, want, order, "round %d: the held datagrams out of order", round)
		require.LessOrEqual(t, size, held, "round %d: %d buffers for %d held datagrams", round, size, held)
	}
}
