package rxe

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
)

// busyWait spins on cq.BusyPoll until it returns completions, yielding
// now and then, and fails after testutil.Bound(), the bound of every wait
// of the busy-polling tests.
func busyWait(cq *CQ, wcs []WC) (int, error) {
	limit := testutil.Bound()
	end := time.Now().Add(limit)
	for i := 1; ; i++ {
		if n := cq.BusyPoll(wcs); n > 0 {
			return n, nil
		}
		if i%64 == 0 {
			if time.Now().After(end) {
				return 0, fmt.Errorf("no completion on CQ for %v", limit)
			}
			runtime.Gosched()
		}
	}
}

// waitRecv takes e's completions (busy-polling, or with CQ.Wait) until a
// receive, checks its status and returns it.
func waitRecv(e *end, busy bool) (WC, error) {
	wcs := make([]WC, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer cancel()
	for {
		var err error
		if busy {
			_, err = busyWait(e.cq, wcs)
		} else {
			_, err = e.cq.Wait(ctx, wcs)
		}
		if err != nil {
			return WC{}, err
		}
		if wcs[0].Status != WCSuccess {
			return WC{}, fmt.Errorf("completion %v of %v", wcs[0].Status, wcs[0].Opcode)
		}
		if wcs[0].Opcode == WCRecv {
			return wcs[0], nil
		}
	}
}

// pingPong bounces a 4-byte sequence number rounds times between a and z;
// busy says, per round, whether each side busy-polls (else it waits in
// CQ.Wait). Every SEND is signaled, so the CQs also carry send
// completions.
func pingPong(t *testing.T, a, z *end, rounds int, busy func(round int) bool) {
	t.Helper()
	recv := func(e *end, off int) error {
		_, err := e.qp.PostRecv(RecvWR{ID: uint64(off), SGList: []SGE{e.mr.SGE(off, 4)}})
		return err
	}
	send := func(e *end, off int, seq uint32) error {
		binary.BigEndian.PutUint32(e.buf[off:], seq)
		_, err := e.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{e.mr.SGE(off, 4)}})
		return err
	}
	require.NoError(t, recv(a, 0))
	require.NoError(t, recv(z, 0))
	echo := make(chan error, 1)
	go func() {
		for i := range rounds {
			wc, err := waitRecv(z, busy(i))
			if err == nil && (wc.ByteLen != 4 || binary.BigEndian.Uint32(z.buf) != uint32(i)) {
				err = fmt.Errorf("round %d: z received %d bytes, %x", i, wc.ByteLen, z.buf[:4])
			}
			if err == nil {
				err = recv(z, 0)
			}
			if err == nil {
				err = send(z, 64, uint32(i))
			}
			if err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	for i := range rounds {
		require.NoError(t, send(a, 64, uint32(i)))
		wc, err := waitRecv(a, busy(i))
		require.NoError(t, err, "round %d", i)
		require.Equal(t, uint32(4), wc.ByteLen)
		require.Equal(t, uint32(i), binary.BigEndian.Uint32(a.buf), "round %d", i)
		require.NoError(t, recv(a, 0))
	}
	require.NoError(t, <-echo)
}

// busyPair is udpPair with an IB ACK timeout of about 1 s (Timeout 18)
// instead of 67 ms: these tests check the hand-over between busy pollers
// and the receive goroutines, and under -race on a machine whose two CPUs
// other processes keep busy (load average about 10) a round trip has been
// seen to take over half a second, which with the default timeout spends
// the whole retry budget (RETRY_EXC_ERR) on a loopback that lost nothing.
// A reader that never read would still fail them (testutil.Bound()).
func busyPair(t *testing.T) (*end, *end, [2]*netdev.UDPConn) {
	return udpPairWith(t, Options{}, ConnectOptions{MTU: MTU4096, Timeout: 18})
}

// polled is how many datagrams busy-polling callers read from e's device.
func polled(e *end) uint64 { return e.dev.vecs[e.cq.vector].reader.polledPkts.Load() }

// TestBusyPollPingPong checks a SEND ping-pong over loopback UDP in which
// both sides busy-poll: every message arrives, in order and intact, while
// the receive goroutines keep reading the same sockets, and the pollers
// read datagrams themselves.
func TestBusyPollPingPong(t *testing.T) {
	a, z, _ := busyPair(t)
	pingPong(t, a, z, 500, func(int) bool { return true })
	require.Positive(t, polled(a), "a's poller read nothing")
	require.Positive(t, polled(z), "z's poller read nothing")
	for _, e := range []*end{a, z} {
		// One reader serves all the device's vectors (GOMAXPROCS of them):
		// the exported counter counts it once.
		require.Equal(t, polled(e), e.dev.Counters().PolledPkts)
	}
	require.True(t, a.cq.busy.Load())
	require.Zero(t, z.qp.Counters().Responder.OutOfSeqRequest)
}

// TestBusyPollThenWait checks the hand-over between a busy-polling caller
// and the receive goroutine: the sides switch between busy polling and
// sleeping in CQ.Wait every few rounds, and no completion is lost or
// waits past its bound when nobody polls.
func TestBusyPollThenWait(t *testing.T) {
	a, z, _ := busyPair(t)
	pingPong(t, a, z, 400, func(i int) bool { return i/7%2 == 0 })
	require.Positive(t, polled(a))
	require.Positive(t, polled(z))
}

// TestBusyPollPipe checks that BusyPoll on a netdev that cannot be shared
// (a PipeConn) is Poll: the receive goroutine delivers everything.
func TestBusyPollPipe(t *testing.T) {
	a, z := newPair(t, "pipe", MTU1024)
	require.Nil(t, a.dev.vecs[a.cq.vector].reader.shared)
	pingPong(t, a, z, 200, func(int) bool { return true })
	require.Zero(t, polled(a))
	require.Zero(t, polled(z))
	require.Zero(t, a.dev.Counters().PolledPkts)
}

// TestBusyPollStream checks that busy polling keeps a stream in order: a
// sends 300 multi-packet SENDs (9000 bytes, three packets at MTU 4096),
// up to 32 outstanding, while z busy-polls its receives (every fifth
// completion it sleeps in CQ.Wait instead, leaving the socket to the
// receive goroutine) and a busy-polls its send completions. Every message
// arrives intact and in order, and no packet reached a responder out of
// order (on loopback nothing is lost, so a PSN sequence error NAK would be
// two readers handling packets out of order). Which reader takes a batch
// is the scheduler's choice: a stream in which one end's poller read
// nothing itself did not test the interleaving, so the stream runs again
// on the same QPs, up to five times, until both pollers have read.
func TestBusyPollStream(t *testing.T) {
	a, z, _ := busyPair(t)
	const msgs, size, window, slots = 300, 9000, 32, 48
	fill := func(b []byte, i int) {
		for j := range b {
			b[j] = byte(i*7 + j)
		}
	}
	for s := range slots {
		_, err := z.qp.PostRecv(RecvWR{ID: uint64(s), SGList: []SGE{z.mr.SGE(s*size, size)}})
		require.NoError(t, err)
	}
	// stream sends the 300 messages, numbered from base for their bytes
	// (a slot a stream did not fill holds another's); z's receive WQEs are
	// posted again as they complete, so it can run again.
	stream := func(base int) {
		got := make(chan error, 1)
		go func() {
			wcs := make([]WC, 1)
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
			defer cancel()
			want := make([]byte, size)
			for i := range msgs {
				var err error
				if i%5 == 4 {
					_, err = z.cq.Wait(ctx, wcs)
				} else {
					_, err = busyWait(z.cq, wcs)
				}
				if err == nil && (wcs[0].Status != WCSuccess || wcs[0].ByteLen != size) {
					err = fmt.Errorf("receive %d: %v, %d bytes", i, wcs[0].Status, wcs[0].ByteLen)
				}
				if err == nil {
					s := int(wcs[0].ID)
					fill(want, base+i)
					if string(z.buf[s*size:(s+1)*size]) != string(want) {
						err = fmt.Errorf("receive %d (slot %d): wrong data", i, s)
					}
					if _, perr := z.qp.PostRecv(RecvWR{ID: uint64(s), SGList: []SGE{z.mr.SGE(s*size, size)}}); err == nil {
						err = perr
					}
				}
				if err != nil {
					got <- err
					return
				}
			}
			got <- nil
		}()
		wcs := make([]WC, 8)
		received := false // got has delivered
		for sent, done := 0, 0; done < msgs; {
			select {
			case err := <-got:
				require.NoError(t, err) // fail at once, not when the sends stall
				received = true
			default:
			}
			for sent < msgs && sent-done < window && sent-done < slots-window {
				off := sent % window * size
				fill(a.buf[off:off+size], base+sent)
				_, err := a.qp.PostSend(SendWR{ID: uint64(sent), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(off, size)}})
				require.NoError(t, err)
				sent++
			}
			n, err := busyWait(a.cq, wcs)
			require.NoError(t, err)
			for _, wc := range wcs[:n] {
				require.Equal(t, WCSuccess, wc.Status)
				require.Equal(t, uint64(done), wc.ID, "send completions in order")
				done++
			}
		}
		if !received {
			require.NoError(t, <-got)
		}
	}
	for try := 1; ; try++ {
		stream(try * msgs)
		require.Zero(t, z.qp.Counters().Responder.OutOfSeqRequest)
		if polled(a) > 0 && polled(z) > 0 {
			break
		}
		require.Less(t, try, 5, "in five streams a poller never read its socket itself: polled a %d, z %d", polled(a), polled(z))
	}
}

// TestBusyPollOtherVector checks that busy-polling a send CQ on another
// vector than the QP's (its receive CQ's) reads the QP's socket: with a
// socket per vector (Listen), the ACKs that complete a's SENDs arrive on
// the socket of a's receive CQ's vector, and a, busy-polling only its send
// CQ, reads them there itself. z only receives, through its receive
// goroutine.
func TestBusyPollOtherVector(t *testing.T) {
	var devs [2]*Device
	for i, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		// Port 0 in Listen means 4791: bind an ephemeral port instead.
		conns, err := netdev.ListenUDPGroup(netip.MustParseAddrPort(addr), 2, SocketOptions(Options{}))
		require.NoError(t, err)
		cs := []netdev.Conn{conns[0], conns[1]}
		d, err := OpenConns(cs, Options{Name: fmt.Sprintf("rxe-%d", i), LinkMTU: 9000, OwnConn: true})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	ends := [2]*end{}
	for i, d := range devs {
		e := newEnd(t, d, 1<<16)
		rcq, err := d.CreateCQ(256, 1) // z never polls it
		require.NoError(t, err)
		scq, err := d.CreateCQ(64, 0)
		require.NoError(t, err)
		e.qp, err = e.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: scq, RecvCQ: rcq,
			Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
		e.cq = scq
		ends[i] = e
	}
	a, z := ends[0], ends[1]
	connect(t, a, z, MTU4096)
	require.Equal(t, 1, a.dev.vecs[1].reader.served[0].id)
	const msgs = 100
	for range msgs {
		_, err := z.qp.PostRecv(RecvWR{SGList: []SGE{z.mr.SGE(0, 8)}})
		require.NoError(t, err)
	}
	wcs := make([]WC, 1)
	for i := range msgs {
		_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		_, err = busyWait(a.cq, wcs)
		require.NoError(t, err)
		require.Equal(t, WCSuccess, wcs[0].Status)
		require.Equal(t, uint64(i), wcs[0].ID)
	}
	require.Positive(t, a.dev.vecs[1].reader.polledPkts.Load(), "the ACKs were read by the poller on vector 1's socket")
	require.True(t, a.cq.PollsSocket())
	// Two sockets, a reader each: the device's counter sums both, once.
	require.Equal(t, a.dev.vecs[0].reader.polledPkts.Load()+a.dev.vecs[1].reader.polledPkts.Load(), a.dev.Counters().PolledPkts)
}

// TestBusyPollDeferredAck checks that the ACKs BusyPoll leaves queued
// reach the peer when the poller neither polls again nor posts: z
// busy-polls until each SEND's receive completion and then does nothing
// on that CQ, while a waits for its send completions in CQ.Wait. Each send
// completion needs z's ACK; the recovery timer's floor (1 s) and the ACK
// timeout (4.3 s) are far beyond the wait, so a completion that came
// through a retransmission shows as a retransmit and fails the test.
func TestBusyPollDeferredAck(t *testing.T) {
	a, z, _ := udpPair(t, Options{Recovery: RecoveryConfig{Floor: time.Second}})
	// udpPair's QPs are connected with the default ACK timeout: a second
	// pair gets the long one.
	qcap := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: qcap})
	require.NoError(t, err)
	qz, err := z.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: z.cq, RecvCQ: z.cq, Cap: qcap})
	require.NoError(t, err)
	ia, iz := qa.Info(3), qz.Info(4)
	require.NoError(t, qa.Connect(ia, iz, ConnectOptions{MTU: MTU4096, Timeout: 20}))
	require.NoError(t, qz.Connect(iz, ia, ConnectOptions{MTU: MTU4096, Timeout: 20}))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer cancel()
	wcs := make([]WC, 1)
	for i := range 20 {
		_, err := qz.PostRecv(RecvWR{SGList: []SGE{z.mr.SGE(0, 8)}})
		require.NoError(t, err)
		_, err = qa.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
		require.NoError(t, err)
		_, err = busyWait(z.cq, wcs)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, WCRecv, wcs[0].Opcode)
		_, err = a.cq.Wait(ctx, wcs)
		require.NoError(t, err, "send completion %d", i)
		require.Equal(t, WCSuccess, wcs[0].Status)
	}
	require.Positive(t, polled(z), "z's poller read nothing: the test tests nothing")
	require.Zero(t, qa.Counters().Requester.Retransmits, "an ACK left by BusyPoll was not sent")
}

// TestCountVector feeds a receive batch's per-vector count runs of
// packets for two vectors: every packet is counted once, on its vector,
// by the end of the batch.
func TestCountVector(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seq   string // a or b per packet
		wantA uint64
		wantB uint64
	}{
		{"empty batch", "", 0, 0},
		{"one packet", "a", 1, 0},
		{"one run", "aaaa", 4, 0},
		{"alternating", "abab", 2, 2},
		{"runs", "aabbba", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			va, vb := new(vector), new(vector)
			var r connReader
			for round := uint64(1); round <= 2; round++ { // two batches
				for _, c := range tc.seq {
					v := va
					if c == 'b' {
						v = vb
					}
					r.countVector(v)
				}
				r.countVector(nil)
				require.Equal(t, round*tc.wantA, va.rcvdPkts.Load())
				require.Equal(t, round*tc.wantB, vb.rcvdPkts.Load())
			}
		})
	}
}
