package rxe

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestTimeoutReadsSocketFirst checks readBeforeTimeout: when a requester
// deadline comes while the answer it waits for lies unread in the socket,
// the QP reads the socket first, and the answer, not a timeout, completes
// the work request. The test keeps a's receive goroutine from reading
// a WRITE's ACK by holding the socket's gate while the ACK arrives: the
// goroutine finds the gate held and goes back to waiting, and when the
// test lets the gate go without reading, the ACK stays unread (no new
// arrival wakes the goroutine) until the recovery timer comes. Without
// readBeforeTimeout the expiry sends a tail-loss probe, whose ACK then
// completes the WRITE.
func TestTimeoutReadsSocketFirst(t *testing.T) {
	// The recovery floor is long enough that the test lets the gate go
	// well before the timer comes, even on a loaded host.
	const floor = 50 * time.Millisecond
	a, z, _ := udpPair(t, Options{Recovery: RecoveryConfig{Floor: floor}})
	r := a.dev.vecs[a.qp.vec.id].reader
	require.NotNil(t, r.shared, "the UDP netdev reads in turn")
	write := writer64(t, a, z)
	// A first WRITE gives the requester its RTT sample, so the recovery
	// timer runs at its floor, not at the IB timeout. On a loaded host
	// the test can hold the gate past the floor; the timer may then come
	// while the ACK cannot be read, which proves nothing: the test tries
	// again with the next WRITE.
	id := uint64(0)
	for try := 0; ; try++ {
		require.Less(t, try, 20, "the test never let the gate go within the recovery floor")
		for a.qp.Counters().Requester.Recovery.RTTSamples == 0 {
			require.Less(t, id, uint64(40), "no RTT sample")
			id++
			write(id)
			require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
		}
		before := a.qp.Counters().Requester.Recovery
		polledBefore := r.polledPkts.Load()
		id++
		posted := writeUnread(t, r, z, write, id)
		// Give the receive goroutine time to find the gate held.
		time.Sleep(time.Millisecond / 2)
		for r.gate.Unlock() {
			// Taken back for us because the receive goroutine found it
			// held: let it go again without reading.
		}
		late := time.Since(posted) >= floor
		wc := waitWC(t, a.cq)
		require.Equal(t, WCSuccess, wc.Status)
		require.Equal(t, id, wc.ID)
		if late {
			t.Logf("try %d: the gate was held past the recovery floor", try)
			continue
		}
		rec := a.qp.Counters().Requester.Recovery
		require.Equal(t, before.TailProbes, rec.TailProbes, "the ACK was read before the recovery timer acted")
		require.Equal(t, before.RTOExpiries, rec.RTOExpiries)
		// Normally the deadline's step read the ACK (polledPkts grew); on a
		// host so loaded that the ACK reached the socket only after the gate
		// was let go, the receive goroutine read it, which proves nothing
		// but is no failure either.
		if r.polledPkts.Load() == polledBefore {
			t.Log("the receive goroutine read the ACK itself")
		}
		return
	}
}

// TestFaultsReadInTurnUDP streams RDMA WRITEs and READs between two devices
// on UDP sockets (with GRO), the receives of one passing a fault injector
// that drops and corrupts: the injector reads in turn (netdev.SharedReader),
// so the receive goroutine, busy pollers and deadlines read its datagrams
// under the gate, with and without selective repeat. Every byte arrives,
// and the rules did act.
func TestFaultsReadInTurnUDP(t *testing.T) {
	for _, sr := range []bool{false, true} {
		t.Run(fmt.Sprintf("sr=%v", sr), func(t *testing.T) {
			var devs [2]*Device
			var fc *faults.Conn
			for i, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
				c, err := netdev.ListenUDP(netip.MustParseAddrPort(addr), SocketOptions(Options{}))
				require.NoError(t, err)
				var conn netdev.Conn = c
				if i == 0 {
					// The counted rules make sure that both actions act;
					// the random ones spread more faults.
					fc = faults.Wrap(c, faults.Config{Seed: 5, Rules: parseRules(t, "drop=0.02,dir=recv", "corrupt=0.01,dir=recv",
						"drop=RC_RDMA_READ_RESPONSE_MIDDLE#7,dir=recv", "corrupt=RC_RDMA_READ_RESPONSE_MIDDLE#20,dir=recv")})
					conn = fc
				}
				d, err := Open(conn, Options{Name: fmt.Sprintf("rxe-%d", i), LinkMTU: 9000, OwnConn: true})
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
				devs[i] = d
			}
			require.NotNil(t, devs[0].vecs[0].reader.shared, "the injector reads in turn")
			a, b := newEnd(t, devs[0], testBufSize), newEnd(t, devs[1], testBufSize)
			ia, ib := a.qp.Info(rand.Uint32()), b.qp.Info(rand.Uint32())
			ia.SelectiveRepeat, ib.SelectiveRepeat = sr, sr
			o := ConnectOptions{MTU: MTU4096, NoSelectiveRepeat: !sr}
			require.NoError(t, a.qp.Connect(ia, ib, o))
			require.NoError(t, b.qp.Connect(ib, ia, o))
			stream(t, a, b, WRRDMAWrite, 1)
			stream(t, a, b, WRRDMARead, 2)
			require.Equal(t, sr, a.qp.Query().SelectiveRepeat, "selective repeat as negotiated")
			st := fc.Stats().Recv
			require.Positive(t, st.Dropped)
			require.Positive(t, st.Corrupted)
		})
	}
}

// TestTimeoutReadOfMADDoesNotDeadlock checks that a QP whose requester
// deadline reads the socket (readBeforeTimeout) can hand a CM MAD it finds
// there to QP1. The step runs under its vector's txMu; QP1 answers a REQ
// for a port nobody listens on with a REJ at once, and it used to write
// that REJ under vector 0's txMu, which the step of a QP of vector 0 holds:
// the transmit goroutine then waited for itself, QP1's lock stayed held,
// and Device.Close hung in the CM's shutdown. As in
// TestTimeoutReadsSocketFirst, the test keeps the receive goroutine from
// reading by holding the socket's gate while the WRITE's ACK and the REQ
// arrive.
func TestTimeoutReadOfMADDoesNotDeadlock(t *testing.T) {
	a, z, _ := udpPair(t, Options{CompVectors: 1, Recovery: RecoveryConfig{Floor: 50 * time.Millisecond}})
	r := a.dev.vecs[0].reader
	require.NotNil(t, r.shared, "the UDP netdev reads in turn")
	write := writer64(t, a, z)
	write(1)
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)

	// A peer that sends a REQ for a service nobody listens on, from the
	// device's port (QP1 answers there).
	probe, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), a.dev.port), netdev.Options{})
	require.NoError(t, err)
	defer probe.Close()
	var mad [packet.MADSize]byte
	packet.EncodeCM(mad[:], 7, &packet.REQ{LocalCommID: 0x1234, ServiceID: 0x0106_0000_0000_1d4c,
		LocalQPN: 0x99, TransportServiceType: packet.CMTransportRC})
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN},
		DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
	ph := packet.PseudoHeader{Src: probe.LocalAddr().Addr(), Dst: a.dev.addr, SrcPort: probe.LocalAddr().Port(),
		DstPort: a.dev.port, IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, maxPacket)
	n, err := packet.Build(buf, &h, mad[:], &ph)
	require.NoError(t, err)

	writeUnread(t, r, z, write, 2)
	_, err = probe.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: a.dev.Addr()}})
	require.NoError(t, err)
	time.Sleep(time.Millisecond / 2)
	for r.gate.Unlock() {
	}

	// The REJ comes back, and the device closes.
	got := make(chan bool, 1)
	go func() {
		msgs := []netdev.Message{{Buf: make([]byte, rxBufSize)}}
		k, err := probe.ReadBatch(msgs)
		got <- err == nil && k == 1
	}()
	select {
	case ok := <-got:
		require.True(t, ok, "reading QP1's answer")
	case <-time.After(testutil.Bound()):
		t.Fatal("QP1 never answered the REQ: its send waits for the transmit path the reading step holds")
	}
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	closed := make(chan struct{})
	go func() { a.dev.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testutil.Bound()):
		t.Fatal("Device.Close hangs")
	}
}

// writer64 returns a function that posts a signaled 64-byte RDMA WRITE
// from a's region to the start of z's, with the given WR ID.
func writer64(t *testing.T, a, z *end) func(id uint64) {
	return func(id uint64) {
		t.Helper()
		_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGList:     []SGE{a.mr.SGE(0, 64)},
			RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()})
		require.NoError(t, err)
	}
}

// writeUnread takes reader r's socket gate from the receive goroutine
// (waiting while it handles a batch), posts WRITE id with write and waits
// until z has executed it (z's MSN moved) and a datagram sits unread in
// r's socket: z's ACK, which the gate keeps there, or one z sent before
// (it answers an earlier request, as TestGateWaitRetryWork's other QPs'),
// behind which the ACK is on its way. The caller releases the gate. It
// returns when the WRITE was posted.
//
// It watches z's responder and the socket, not z's count of packets
// sent: a device counts a batch once its sendmmsg returns, and over
// loopback the batch is in the peer's socket, and can be read and
// completed there, before that; the count of an earlier WRITE's ACK can
// thus rise after this WRITE was posted and before it left.
func writeUnread(t *testing.T, r *connReader, z *end, write func(id uint64), id uint64) time.Time {
	t.Helper()
	zMSN := func() uint32 {
		z.qp.mu.Lock()
		defer z.qp.mu.Unlock()
		return z.qp.resp.MSN()
	}
	deadline := time.Now().Add(testutil.Bound())
	for !r.gate.TryLock() { // the receive goroutine is handling a batch
		require.True(t, time.Now().Before(deadline), "the socket's gate stays held")
		time.Sleep(20 * time.Microsecond)
	}
	msn := zMSN()
	posted := time.Now()
	write(id)
	testutil.Until(t, func() bool { return zMSN() != msn }, "z never executed the WRITE")
	testutil.Until(t, func() bool { return socketHoldsDatagram(t, r.conn) }, "z executed the WRITE but its ACK never reached the socket")
	return posted
}
