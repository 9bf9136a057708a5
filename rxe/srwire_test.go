package rxe

import (
	"bytes"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// recConn records every datagram that passes through it, in the order
// the device writes and reads them, each prefixed with 'w' or 'r'.
type recConn struct {
	netdev.Conn
	mu   sync.Mutex
	pkts [][]byte
}

func (c *recConn) record(dir byte, msgs []netdev.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.pkts = append(c.pkts, append([]byte{dir}, m.Buf[:m.N]...))
	}
}

// direction returns the datagrams of one direction, 'w' or 'r', in order.
func direction(pkts [][]byte, dir byte) [][]byte {
	var out [][]byte
	for _, p := range pkts {
		if p[0] == dir {
			out = append(out, p)
		}
	}
	return out
}

func (c *recConn) ReadBatch(msgs []netdev.Message) (int, error) {
	n, err := c.Conn.ReadBatch(msgs)
	c.record('r', msgs[:n])
	return n, err
}

// WriteBatch records before writing: once the peer has the datagrams, the
// test may look at the record.
func (c *recConn) WriteBatch(msgs []netdev.Message) (int, error) {
	c.mu.Lock()
	mark := len(c.pkts)
	c.mu.Unlock()
	c.record('w', msgs)
	n, err := c.Conn.WriteBatch(msgs)
	if n < len(msgs) {
		c.mu.Lock()
		c.pkts = append(c.pkts[:mark+n], c.pkts[mark+len(msgs):]...)
		c.mu.Unlock()
	}
	return n, err
}

// normalize zeroes what differs between two runs by construction: the
// R_Key of RETHs and AtomicETHs (its key byte is random) and with it the
// ICRC. The direction byte stays.
func normalize(t *testing.T, d []byte) []byte {
	d = bytes.Clone(d)
	p, err := packet.Parse(d[1:])
	require.NoError(t, err)
	for _, h := range []packet.Hdr{packet.HdrRETH, packet.HdrAtomicETH} {
		if b := p.Header(h); len(b) >= 12 {
			clear(b[8:12])
		}
	}
	clear(d[len(d)-4:])
	return d
}

// holeReports counts the selective-repeat hole reports among pkts.
func holeReports(t *testing.T, pkts [][]byte) int {
	n := 0
	for _, d := range pkts {
		p, err := packet.Parse(d[1:])
		require.NoError(t, err)
		if a := p.AETH(); a != nil && a.Syndrome() == packet.NAKSyndrome(packet.NAKSelectiveRepeat) {
			n++
		}
	}
	return n
}

// splitACKs separates the plain positive acknowledgements (RC
// Acknowledge packets with an ACK syndrome) from the other datagrams of
// one direction. How many ACKs a responder sends depends on how the
// goroutines meet: the requests it acknowledges at once are those it read
// in one batch (rxe coalesces ACKs the same way, IBA 9.7.5.1.3 allows one
// ACK to cover many requests). Everything else is decided by the verbs
// calls and the PSNs alone.
func splitACKs(t *testing.T, pkts [][]byte) (acks, rest [][]byte) {
	t.Helper()
	for _, d := range pkts {
		p, err := packet.Parse(d[1:])
		require.NoError(t, err)
		if a := p.AETH(); p.Opcode() == packet.RCAcknowledge && a != nil && a.Syndrome().IsACK() {
			acks = append(acks, d)
			continue
		}
		rest = append(rest, d)
	}
	return acks, rest
}

// sameStream requires two streams of datagrams to be equal after
// normalize, except for how many plain ACKs they carry: those each
// stream must have in increasing PSN order, and both streams must end
// with the same one (the last ACK covers every request of the run).
func sameStream(t *testing.T, x, y [][]byte, what string) {
	t.Helper()
	xa, xr := splitACKs(t, x)
	ya, yr := splitACKs(t, y)
	require.NotEmpty(t, xr, "%s: nothing but ACKs to compare", what)
	require.Equal(t, len(xr), len(yr), "%s: counts of datagrams other than ACKs differ", what)
	for i := range xr {
		l, n := normalize(t, xr[i]), normalize(t, yr[i])
		require.True(t, bytes.Equal(l, n), "%s: datagram %d differs:\n%x\n%x", what, i, l[:min(len(l), 48)], n[:min(len(n), 48)])
	}
	require.Equal(t, len(xa) == 0, len(ya) == 0, "%s: one stream has ACKs, the other none", what)
	for _, acks := range [][][]byte{xa, ya} {
		for i := 1; i < len(acks); i++ {
			prev, err := packet.Parse(acks[i-1][1:])
			require.NoError(t, err)
			cur, err := packet.Parse(acks[i][1:])
			require.NoError(t, err)
			require.True(t, cur.PSN().After(prev.PSN()), "%s: ACK %d (PSN %#x) does not follow ACK %d (PSN %#x)", what, i, cur.PSN(), i-1, prev.PSN())
		}
	}
	if len(xa) > 0 {
		l, n := normalize(t, xa[len(xa)-1]), normalize(t, ya[len(ya)-1])
		require.True(t, bytes.Equal(l, n), "%s: the last ACKs differ:\n%x\n%x", what, l, n)
	}
}

// connectHow brings two ends' QPs to RTS.
type connectHow func(t *testing.T, a, b *end)

// connectLegacy is the bring-up that knows nothing of selective repeat:
// the INIT, RTR and RTS steps without QPAttrSelectiveRepeat, as a verbs
// program written for any RoCE device does it.
func connectLegacy(t *testing.T, a, b *end) {
	for _, p := range []struct {
		e          *end
		sq, rq     uint32
		remoteQPN  uint32
		remotePort uint16
		remoteGID  *Device
	}{{a, 0xFFFF00, 0xFFFFF0, b.qp.QPN(), b.dev.port, b.dev}, {b, 0xFFFFF0, 0xFFFF00, a.qp.QPN(), a.dev.port, a.dev}} {
		qp := p.e.qp
		require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic},
			QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		require.NoError(t, qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: p.remoteGID.GID(), UDPPort: p.remotePort, HopLimit: 64}, PathMTU: MTU1024,
			DestQPN: p.remoteQPN, RQPSN: p.rq, MaxDestRdAtomic: 16, MinRNRTimer: 12},
			QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
		require.NoError(t, qp.Modify(&QPAttr{State: QPSRTS, SQPSN: p.sq, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	}
}

// connectOffers connects with Connect, b's ConnInfo offering selective
// repeat or not (offerB false: what a peer that knows nothing of it sends).
func connectOffers(offerB bool) connectHow {
	return func(t *testing.T, a, b *end) {
		ia, ib := a.qp.Info(0xFFFF00), b.qp.Info(0xFFFFF0)
		if !offerB {
			ib = ConnInfo{GID: ib.GID, UDPPort: ib.UDPPort, QPN: ib.QPN, PSN: ib.PSN, MTU: ib.MTU, MaxRdAtomic: ib.MaxRdAtomic}
		}
		o := ConnectOptions{MTU: MTU1024, Timeout: 10, RetryCnt: 7, RNRRetry: 7}
		require.NoError(t, a.qp.Connect(ia, ib, o))
		require.NoError(t, b.qp.Connect(ib, ia, o))
	}
}

// wireRun runs a fixed workload of every operation over a seeded lossy
// link on virtual time and returns the datagrams a's side saw.
func wireRun(t *testing.T, how connectHow, rules []string) [][]byte {
	var pkts [][]byte
	var dropped uint64
	synctest.Test(t, func(t *testing.T) {
		pa, pb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
		rec := &recConn{Conn: pa}
		fa := faults.Wrap(rec, faults.Config{Seed: 7, Rules: parseRules(t, rules...)})
		da, err := Open(fa, Options{Name: "wire-a", LinkMTU: 9000, OwnConn: true})
		require.NoError(t, err)
		db, err := Open(pb, Options{Name: "wire-b", LinkMTU: 9000, OwnConn: true})
		require.NoError(t, err)
		defer db.Close()
		defer da.Close()
		a, b := newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
		// Registered again at fixed addresses, so that the RETHs of one
		// run are those of the next.
		for i, e := range []*end{a, b} {
			iova := uint64(0x10000000 * (i + 1))
			mr, err := e.pd.RegMRWith(e.buf, MRAttr{Access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic, IOVA: &iova})
			require.NoError(t, err)
			e.mr = mr
		}
		how(t, a, b)
		for i, op := range []WROpcode{WRRDMAWrite, WRSend, WRRDMARead, WRRDMAWriteWithImm, WRRDMARead, WRSend} {
			soakOne(t, a, b, op, 30000+i, uint64(i))
		}
		synctest.Wait() // every goroutine idle: the record is complete
		rec.mu.Lock()
		pkts = rec.pkts
		rec.mu.Unlock()
		st := fa.Stats()
		dropped = st.Send.Dropped + st.Recv.Dropped
	})
	if len(rules) > 0 {
		require.Positive(t, dropped, "the lossy run lost nothing")
	}
	return pkts
}

// seqNAKs counts the PSN Sequence Error NAKs among pkts: go-back-N's
// report of a gap, which a responder under selective repeat never sends.
func seqNAKs(t *testing.T, pkts [][]byte) int {
	n := 0
	for _, d := range pkts {
		p, err := packet.Parse(d[1:])
		require.NoError(t, err)
		if a := p.AETH(); a != nil && a.Syndrome() == packet.NAKSyndrome(packet.NAKPSNSeqError) {
			n++
		}
	}
	return n
}

// TestWireWithoutOffer: against a peer that offers nothing, the packets
// on the wire are byte for byte those of a connection brought up without
// any knowledge of selective repeat. On a clean link the run is
// reproducible and compared byte for byte, but for how many plain ACKs
// cover the requests (sameStream). On a lossy one it is not: the
// packets each direction carries depend on how the goroutines met (how
// many requests one ACK covers decides which packet the seeded injector
// drops next), so two legacy runs differ too. What is checked there is the
// mode: the responder reports gaps with go-back-N's PSN Sequence Error NAKs
// and no hole report, while with both offers the same lossy run reports
// holes and no sequence error.
func TestWireWithoutOffer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
	}{{"clean", nil}, {"lossy", []string{"drop=3%"}}} {
		t.Run(tc.name, func(t *testing.T) {
			none := wireRun(t, connectOffers(false), tc.rules)
			require.NotEmpty(t, none)
			require.Zero(t, holeReports(t, none))
			if tc.rules == nil {
				legacy := wireRun(t, connectLegacy, nil)
				again := wireRun(t, connectLegacy, nil)
				// Each direction is compared on its own: how the two
				// interleave at a's socket depends on the scheduling.
				for _, dir := range []byte{'w', 'r'} {
					sameStream(t, direction(legacy, dir), direction(again, dir), "two clean legacy runs")
					sameStream(t, direction(legacy, dir), direction(none, dir), "the legacy run and the run without an offer")
				}
			}
			if tc.rules != nil {
				require.Positive(t, seqNAKs(t, none), "without an offer, gaps are reported by go-back-N NAKs")
				// The control: with both offers the same lossy run
				// reports holes instead, so the checks above can tell.
				sr := wireRun(t, connectOffers(true), tc.rules)
				require.Positive(t, holeReports(t, sr))
				require.Zero(t, seqNAKs(t, sr))
			}
		})
	}
}
