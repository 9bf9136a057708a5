package rxe

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// writeStep is one WriteBatch of a scriptConn: once armed, it waits for
// release (if not nil; entered is closed when it starts waiting), then
// writes at most write datagrams and refuses the next, as a local host
// with a full queue does (netdev.ErrLocalDrop), or with err if set; write
// -1 writes them all.
type writeStep struct {
	entered, release chan struct{}
	write            int
	err              error
	done             chan struct{} // closed once the step has returned, if not nil
}

// scriptConn runs each WriteBatch by the next step of its script, then,
// once the script is spent, by rest.
type scriptConn struct {
	netdev.Conn
	mu    sync.Mutex
	steps []writeStep
	rest  writeStep
}

func (c *scriptConn) WriteBatch(msgs []netdev.Message) (int, error) {
	c.mu.Lock()
	s := c.rest
	if len(c.steps) > 0 {
		s, c.steps = c.steps[0], c.steps[1:]
	}
	c.mu.Unlock()
	if s.done != nil {
		defer close(s.done)
	}
	if s.release != nil {
		close(s.entered)
		<-s.release
	}
	if s.write < 0 || s.write >= len(msgs) {
		return c.Conn.WriteBatch(msgs)
	}
	n, err := c.Conn.WriteBatch(msgs[:s.write])
	if err != nil {
		return n, err
	}
	if s.err != nil {
		return n, s.err
	}
	return n, netdev.DropError{Errno: syscall.ENOBUFS}
}

// TestResetDropsDatagramsOfWriteUnderWay: a QP reset while a transmit
// pass writes its datagrams, and brought up again (RESET→INIT→RTR→RTS)
// before the write returns, is a new connection: the old connection's
// datagrams that the write refused are not kept and sent on the new one,
// and their count is not taken for the new connection's work requests.
// Kernel rxe's reset (rxe_qp_reset) empties the send queue and the
// requester's state, so nothing the old incarnation queued is sent after
// it. The peer must receive the new connection's message only, in its
// first receive buffer, and the new work request completes with success
// only once its datagram has left.
func TestResetDropsDatagramsOfWriteUnderWay(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
		for _, tc := range []struct {
			name string
			// after is the script after the write refused during the
			// reset: rest, and whether the QP is moved to ERR once the
			// second write has returned.
			after writeStep
			toErr bool
		}{
			{"then-written", writeStep{write: -1}, false},
			{"then-written-in-part", writeStep{write: 1}, true},
		} {
			t.Run(typ.String()+"/"+tc.name, func(t *testing.T) {
				if typ == QPTypeRC && tc.toErr {
					t.Skip("an RC work request completes on its ACK, not on its write")
				}
				ca, cb := connPair(t, "pipe")
				entered, release, second := make(chan struct{}), make(chan struct{}), make(chan struct{})
				sc := &scriptConn{Conn: ca, rest: writeStep{write: -1}}
				da, db := openPair(t, sc, cb)
				var a, b *end
				if typ == QPTypeRC {
					a, b = newEnd(t, da, 1<<20), newEnd(t, db, 1<<20)
				} else {
					a, b = newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
				}
				var ah *AddrHandle
				up := func(peerToo bool) {
					switch typ {
					case QPTypeRC:
						ia, ib := a.qp.Info(0x100), b.qp.Info(0x200)
						require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU1024}))
						if peerToo {
							require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU1024}))
							postRecvs(t, b, 4, 256)
						}
					case QPTypeUC:
						aimUC(t, a, b)
					case QPTypeUD:
						readyUD(t, a, 3)
					}
				}
				switch typ {
				case QPTypeRC:
					up(true)
				case QPTypeUC:
					connectUC(t, a, b)
					postRecvs(t, b, 4, 256)
				case QPTypeUD:
					ah = aimUD(t, a, b, 3)
					postRecvs(t, b, 4, 256)
				}
				send := func(id uint64, fill byte) {
					off := int(id-1) * 64
					copy(a.buf[off:off+64], bytes.Repeat([]byte{fill}, 64))
					wr := SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(off, 64)}}
					if typ == QPTypeUD {
						wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, b.qp.QPN(), 3
					}
					_, err := a.qp.PostSend(wr)
					require.NoError(t, err)
				}

				sc.mu.Lock()
				sc.steps = []writeStep{{entered: entered, release: release, write: 0}, tc.after}
				sc.steps[1].done = second
				if tc.toErr {
					sc.rest = writeStep{write: 0}
				}
				sc.mu.Unlock()
				letGo := sync.OnceFunc(func() { close(release) })
				defer letGo()
				send(1, 'A') // the old connection's SEND
				select {
				case <-entered:
				case <-time.After(testutil.Bound()):
					t.Fatal("the old connection's datagram was never written")
				}
				// The write is under way: the QP is reset and brought up
				// again, as a new connection to the same peer.
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
				if typ == QPTypeRC {
					require.NoError(t, b.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
				}
				up(true)
				send(2, 'B') // the new connection's SEND
				letGo()      // the old datagram is refused
				select {
				case <-second:
				case <-time.After(testutil.Bound()):
					t.Fatal("the new connection's datagram was never written")
				}
				a.qp.vec.txMu.Lock() // the pass of the second write has ended
				a.qp.vec.txMu.Unlock()
				if tc.toErr {
					require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				}

				var got []WC
				wcs := make([]WC, 4)
				require.Eventually(t, func() bool {
					n := b.cq.Poll(wcs)
					got = append(got, wcs[:n]...)
					return len(got) > 0
				}, testutil.Bound(), 100*time.Microsecond, "the peer received nothing")
				require.Equal(t, uint64(1000), got[0].ID)
				at := 0
				if typ == QPTypeUD {
					at = GRHSize
				}
				require.Equal(t, bytes.Repeat([]byte{'B'}, 64), b.buf[at:at+64],
					"the peer's first receive does not hold the new connection's message")
				var sent []WC
				require.Eventually(t, func() bool {
					n := a.cq.Poll(wcs)
					sent = append(sent, wcs[:n]...)
					return len(sent) > 0
				}, testutil.Bound(), 100*time.Microsecond, "the new SEND never completed")
				require.Equal(t, []wcBrief{{2, WCSuccess, WCSend}}, briefs(sent))
				time.Sleep(2 * time.Millisecond) // a late second datagram
				got = append(got, pollAll(b.cq)...)
				require.Len(t, got, 1, "the peer received more than the new connection's message")
			})
		}
	}
}

// TestResetWrittenCountStaysWithItsIncarnation: one transmit pass can hold
// datagrams of two incarnations of a QP (it was reset and brought up again
// between two of its steps). The count the write takes of them goes to
// each incarnation's own send engine (vector.send: backoffSent,
// countSent): when the write takes only the old incarnation's datagram
// and refuses the new one's, the new connection's work request has not
// left and does not complete until its QP enters ERR (WR_FLUSH_ERR); when
// it takes both, the new work request completes with success.
func TestResetWrittenCountStaysWithItsIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  LocalDropMode
		write int // datagrams of the batch the write takes
		want  []wcBrief
	}{
		{"new-refused", LocalDropAdaptive, 1, nil},
		{"both-written", LocalDropAdaptive, -1, []wcBrief{{2, WCSuccess, WCSend}}},
		{"both-written-timeout-mode", LocalDropTimeout, -1, []wcBrief{{2, WCSuccess, WCSend}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, da, db := scriptedPair(t, tc.mode)
			a, b := newTypedEnd(t, da, QPTypeUC), newTypedEnd(t, db, QPTypeUC)
			connectUC(t, a, b)
			postRecvs(t, b, 4, 256)
			send := func(id uint64) {
				_, err := a.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 64)}})
				require.NoError(t, err)
			}
			v := a.qp.vec
			// The test is the vector's transmit pass: it holds txMu, so the
			// transmit goroutine stays out.
			v.txMu.Lock()
			defer v.txMu.Unlock()
			send(1)
			k, gen := a.qp.step(v.txMsgs, v.txOwners, 0)
			require.Equal(t, 1, k, "the old connection's datagram")
			v.txGens[0] = gen
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
			aimUC(t, a, b)
			send(2)
			k, gen = a.qp.step(v.txMsgs, v.txOwners, k)
			require.Equal(t, 2, k, "the new connection's datagram")
			v.txGens[1] = gen
			sc.mu.Lock()
			sc.steps = []writeStep{{write: tc.write}}
			sc.rest = writeStep{write: 0} // refused from now on
			sc.mu.Unlock()
			v.send(v.txMsgs[:k], v.txOwners[:k], v.txGens[:k])
			clear(v.txOwners[:k])
			require.Equal(t, tc.want, nilIfEmpty(briefs(pollAll(a.cq))), "the new SEND's completion once the write returned")
			if tc.want == nil {
				require.NoError(t, a.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				require.Equal(t, []wcBrief{{2, WCWRFlushErr, WCSend}}, briefs(pollAll(a.cq)),
					"the new SEND, whose datagram never left, once the QP is in ERR")
			}
		})
	}
}

// nilIfEmpty returns nil for an empty list, for comparisons with a nil
// expectation.
func nilIfEmpty(b []wcBrief) []wcBrief {
	if len(b) == 0 {
		return nil
	}
	return b
}
