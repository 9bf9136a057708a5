package rxe

import (
	"testing"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// burstConn hands its reader datagrams in batches of at least min, as a
// socket that recvmmsg reads after a burst has queued: each ReadBatch waits
// until that many have arrived.
type burstConn struct {
	netdev.Conn
	min int
}

func (c *burstConn) ReadBatch(msgs []netdev.Message) (int, error) {
	n := 0
	for n < min(c.min, len(msgs)) {
		k, err := c.Conn.ReadBatch(msgs[n:])
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// TestACKWithinBatch: two 64 KiB WRITEs, each asking for an ACK with its
// last packet, reach the responder's device in one batch of 32 datagrams.
// The receive goroutine runs a transmit pass after the first 64 KiB of the
// batch (connReader.dispatch, flushBytes), so the first WRITE's ACK leaves
// before the second WRITE is handled: two ACKs, where one transmit pass
// at the end of the batch would have sent one coalesced ACK and the
// requester would have heard nothing until its whole burst was handled.
func TestACKWithinBatch(t *testing.T) {
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	const pkts = 32
	da, err := Open(ca, Options{Name: "burst-a", LinkMTU: 9000, OwnConn: true, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { da.Close() })
	db, err := Open(&burstConn{Conn: cb, min: pkts}, Options{Name: "burst-b", LinkMTU: 9000, OwnConn: true, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	a, b := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
	// A local ACK timeout of 4.3 s (timeout 20): no recovery probe or
	// retransmission adds packets on a loaded machine.
	ia, ib := a.qp.Info(1), b.qp.Info(2)
	require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096, Timeout: 20}))
	require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU4096, Timeout: 20}))
	fill(a.buf, 5)

	// The receive goroutine's pass can find the transmit path busy (the
	// transmit goroutine in a pass of its own), and the ACK then waits for
	// that goroutine and may coalesce with the second: count the rounds
	// with two ACKs, of five. Without the pass within the batch there are
	// none.
	const size, rounds = 64 << 10, 5
	two := 0
	for r := range rounds {
		sentA, sentB := da.Counters().SentPkts, db.Counters().SentPkts
		for i := range 2 {
			_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGList: []SGE{a.mr.SGE(i*size, size)}, RemoteAddr: b.mr.Addr() + uint64(i*size), RKey: b.mr.RKey()})
			require.NoError(t, err)
		}
		for range 2 {
			wc := waitWC(t, a.cq)
			require.Equal(t, WCSuccess, wc.Status)
		}
		syncMem(a, b)
		require.Equal(t, a.buf[:2*size], b.buf[:2*size], "round %d: the WRITEs landed", r)
		require.Equal(t, uint64(pkts), da.Counters().SentPkts-sentA, "round %d: two 64 KiB WRITEs of 4 KiB packets", r)
		acks := db.Counters().SentPkts - sentB
		require.LessOrEqual(t, acks, uint64(2), "round %d", r)
		if acks == 2 {
			two++
		}
	}
	t.Logf("%d of %d rounds with an ACK per WRITE", two, rounds)
	require.Positive(t, two, "the first WRITE's ACK never left before the second WRITE was handled")
}
