package rxe

import (
	"sync"
	"testing"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// aethTap is a netdev.Conn that records the syndromes of the ACK-type
// AETHs (ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, READ RESPONSE FIRST/LAST/ONLY)
// its device sends: what the peer learns about end-to-end credits.
type aethTap struct {
	netdev.Conn
	mu   sync.Mutex
	seen map[packet.Syndrome]int
}

func (c *aethTap) WriteBatch(msgs []netdev.Message) (int, error) {
	c.mu.Lock()
	for i := range msgs {
		p, err := packet.Parse(msgs[i].Buf[:msgs[i].N])
		if err != nil {
			continue // the device only sends valid packets; the peer would count it
		}
		if a := p.AETH(); a != nil && a.Syndrome().IsACK() {
			c.seen[a.Syndrome()]++
		}
	}
	c.mu.Unlock()
	return c.Conn.WriteBatch(msgs)
}

// syndromes returns a copy of the syndromes seen, with their counts.
func (c *aethTap) syndromes() map[packet.Syndrome]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[packet.Syndrome]int, len(c.seen))
	for s, n := range c.seen {
		out[s] = n
	}
	return out
}

// creditDevices returns two devices joined by kind ("pipe" or "udp"),
// with Options.Credits credA and credB, one completion vector each (set
// explicitly: the default is changing), and b's conn tapped.
func creditDevices(t testing.TB, kind string, credA, credB bool) (*Device, *Device, *aethTap) {
	t.Helper()
	ca, cb := connPair(t, kind)
	tap := &aethTap{Conn: cb, seen: map[packet.Syndrome]int{}}
	da, err := Open(ca, Options{Name: "rxe-a", LinkMTU: 9000, OwnConn: true, Credits: credA, CompVectors: 1})
	require.NoError(t, err)
	db, err := Open(tap, Options{Name: "rxe-b", LinkMTU: 9000, OwnConn: true, Credits: credB, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		da.Close()
		db.Close()
	})
	return da, db, tap
}

// TestCreditsSlowReceiver sends 24 SENDs to a receiver that posts its
// receive WQEs 4 at a time, after the previous 4 were used, with every
// combination of Options.Credits on the two devices. A device with
// credits off behaves like kernel rxe: its ACKs say "unlimited" (credit
// code 31) and its requester ignores credits, relying on RNR NAKs; so the
// combinations with one side off are interop with kernel rxe.
//
// With credits on both sides no RNR NAK is ever drawn and the requester
// never needs its probe after the first message: each stall ends with the
// responder's credit update when the receiver posts (the requester's
// timeout, hence its probe wait, is 4.3 s, and waitWCs gives up after 5).
// Most of its length is the table of the four combinations and what each
// must show, which reads best next to the loop that checks it.
func TestCreditsSlowReceiver(t *testing.T) {
	const (
		batch = 4
		msgs  = 24
	)
	for _, kind := range []string{"pipe", "udp"} {
		for _, tc := range []struct {
			name       string
			reqCredits bool // device a: the sender
			rspCredits bool // device b: the receiver
			prepost    bool // all receive WQEs posted before the SENDs
		}{
			{"credits", true, true, false},
			{"credits_preposted", true, true, true},
			{"rxe_responder", true, false, false},
			{"rxe_responder_preposted", true, false, true},
			{"rxe_requester", false, true, false},
			{"off", false, false, false},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				da, db, tap := creditDevices(t, kind, tc.reqCredits, tc.rspCredits)
				o := qpOpts{timeout: 20, sendWR: msgs, recvWR: msgs}
				a := smallEnd(t, da, nil, o)
				b := smallEnd(t, db, nil, o)
				link(t, a, b, o, o)

				next := 0
				post := func(n int) {
					for range n {
						_, err := b.qp.PostRecv(RecvWR{ID: uint64(next), SGList: []SGE{b.mr.SGE(64*next, 64)}})
						require.NoError(t, err)
						next++
					}
				}
				if tc.prepost {
					post(msgs)
				} else {
					post(batch)
				}
				for i := range msgs {
					a.buf[16*i] = byte(i + 1)
				}
				for i := range msgs {
					_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled,
						SGList: []SGE{a.mr.SGE(16*i, 16)}})
					require.NoError(t, err)
				}
				for got := 0; got < msgs; got += batch {
					for _, wc := range waitWCs(t, b.cq, batch) {
						require.Equal(t, WCSuccess, wc.Status)
						require.Equal(t, WCRecv, wc.Opcode)
						require.Equal(t, uint32(16), wc.ByteLen)
					}
					if !tc.prepost && next < msgs {
						post(batch)
					}
				}
				for i, wc := range waitWCs(t, a.cq, msgs) {
					require.Equal(t, wcBrief{uint64(i), WCSuccess, WCSend}, wcBrief{wc.ID, wc.Status, wc.Opcode})
				}
				syncMem(a, b)
				for i := range msgs {
					require.Equal(t, byte(i+1), b.buf[64*i], "message %d", i)
				}

				req, rsp := a.qp.Counters().Requester, b.qp.Counters().Responder
				syn := tap.syndromes()
				require.NotEmpty(t, syn)
				if tc.rspCredits {
					require.NotContains(t, syn, packet.SyndromeACKUnlimited, "real credits in every ACK")
				} else {
					require.Equal(t, map[packet.Syndrome]int{packet.SyndromeACKUnlimited: syn[packet.SyndromeACKUnlimited]}, syn,
						"like kernel rxe: unlimited in every ACK")
				}
				switch {
				case tc.reqCredits && tc.rspCredits:
					require.Zero(t, req.RcvdRNRErr, "no RNR NAK with credits")
					require.Zero(t, rsp.SendRNRErr)
					require.Equal(t, uint64(1), req.CreditProbes, "only the first message goes before any credit is known")
				case tc.reqCredits:
					// The peer said unlimited in its first ACK: credits never
					// held anything back.
					require.Zero(t, req.CreditStalls)
					require.Equal(t, uint64(1), req.CreditProbes)
				default:
					require.Zero(t, req.CreditStalls+req.CreditProbes+req.CreditUpdates, "credits ignored")
				}
				if tc.prepost {
					require.Zero(t, req.RcvdRNRErr)
				}
			})
		}
	}
}
