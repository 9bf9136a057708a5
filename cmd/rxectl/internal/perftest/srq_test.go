package perftest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/stretchr/testify/require"
)

// TestUseSRQ: with --use-srq the ends that receive (send-bw's server,
// both ends of send-lat and of send-bw -b) create one SRQ and their QPs
// take their receives from it (created without a receive queue of their
// own), every message arrives, and the header says "Using SRQ : ON".
func TestUseSRQ(t *testing.T) {
	tests := []struct {
		cmd             string
		args            []string
		client, server  bool // which ends have the SRQ
		clientRx, srvRx int  // their QPs' own receive depth
	}{
		{"send-bw", []string{"-q", "3", "-n", "300", "-s", "4096"}, false, true, 0, 0},
		{"send-bw", []string{"-q", "2", "-n", "200", "-b", "-s", "4096"}, true, true, 0, 0},
		{"send-lat", []string{"-n", "200"}, true, true, 0, 0},
		{"send-bw", []string{"-q", "2", "-n", "200", "-c", "UD", "-s", "1024"}, false, true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.cmd+strings.Join(tc.args, ""), func(t *testing.T) {
			cs, ss := loopbackSessions(t, tc.cmd, append(tc.args, "--use-srq")...)
			for _, e := range []struct {
				s      *session
				hasSRQ bool
			}{{cs, tc.client}, {ss, tc.server}} {
				require.Equal(t, e.hasSRQ, e.s.srq != nil)
				if e.hasSRQ {
					// One receive CQ, so one vector's goroutine, writes
					// the buffers the SRQ's WQEs name (createCQs).
					require.Len(t, e.s.rset.cqs, 1)
				}
				for _, qp := range e.s.qps {
					if e.hasSRQ {
						require.Zero(t, qp.Cap().MaxRecvWR, "a QP on the SRQ has no receive queue of its own")
					}
				}
			}
			if tc.cmd == "send-bw" && !strings.Contains(strings.Join(tc.args, " "), "UD") {
				// The server counts what arrived as it does without the
				// SRQ. (With UD a message that finds the SRQ empty is
				// dropped, as with a QP's own queue: -r receives for
				// all the QPs lose some; only the SRQ's use is checked.)
				_, plain := loopbackSessions(t, tc.cmd, tc.args...)
				require.Nil(t, plain.srq)
				require.Len(t, ss.bwResults, 1)
				require.Len(t, plain.bwResults, 1)
				require.Equal(t, plain.bwResults[0].Iters, ss.bwResults[0].Iters, "every message arrived")
				require.Positive(t, ss.bwResults[0].Iters)
			}
		})
	}
	// With -R the rdma_cm connections' QPs are created on the SRQ too.
	_, ss := loopbackCMSessions(t, "send-bw", "-q", "2", "-n", "200", "-s", "4096", "--use-srq")
	require.NotNil(t, ss.srq)
	require.Len(t, ss.qps, 2)
	for _, qp := range ss.qps {
		require.Zero(t, qp.Cap().MaxRecvWR)
	}
	require.Equal(t, uint64(400), ss.bwResults[0].Iters)
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-q", "2", "-n", "100", "--use-srq")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "Using SRQ      : ON\n")
	out, errs, code = runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-n", "100")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "Using SRQ      : OFF\n")
}

// TestUseSRQErrors: --use-srq outside the SEND tests, and an SRQ smaller
// than the QPs.
func TestUseSRQErrors(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"write-bw", "--use-srq"}, "--use-srq is for the SEND tests"},
		{[]string{"read-lat", "--use-srq"}, "--use-srq is for the SEND tests"},
		{[]string{"send-bw", "--use-srq", "-q", "8", "-n", "5"}, "--use-srq: the receive depth 5, the SRQ's size, is less than the QPs -q 8"},
		{[]string{"send-bw", "--use-srq", "-q", "3", "-r", "2"}, "--use-srq: the receive depth 2, the SRQ's size, is less than the QPs -q 3"},
		// force_dependecies checks the depth before it makes an odd one
		// even: -r 3 is refused for 4 QPs, though 4 receives are posted.
		{[]string{"send-bw", "--use-srq", "-q", "4", "-r", "3"}, "--use-srq: the receive depth 3, the SRQ's size, is less than the QPs -q 4"},
	})
}

// TestUseSRQReposts: with --use-srq the SRQ holds -r receives for all the
// QPs of an end, fewer than the messages of a run, so the receiving end
// re-posts one per completion, whichever QP took it (perftest's
// run_iter_bw_server and run_iter_bi post ctx->rwr[qp_index] again per
// completion, qp_index taken from the WR ID). Every message arrives, with
// RC (RNR NAKs make the sender wait for a re-posted receive) and with UD
// (a datagram that finds the SRQ empty is dropped, as on a NIC: nothing
// makes a UD sender wait, so the UD senders wait for the receiver in the
// test: udLockstep). The server's row counts them all; with -b each end's
// QPs completed them too.
//
// The server's exchange is held (sendGate) once it has written the
// message that lets the client send, until the client has sent everything:
// the receive loop must run from before that exchange (startReceiving). A
// loop that began after it re-posted nothing while the client sent, and
// the UD client, waiting for the re-posts, then never ends. The RC runs
// are about RNR NAKs and re-posts, not the ACK timeout's retry budget:
// they take loadProof's ACK timeout (-u testutil.QPTimeout).
func TestUseSRQReposts(t *testing.T) {
	for _, conn := range []string{"RC", "UD"} {
		for _, qps := range []int{1, 2, 4} {
			// RC: an SRQ of 16 receives, re-posted many times over. UD:
			// 64, at least udTxDepth for each QP (udLockstep), re-posted
			// many times over too.
			iters, rx := 200, 16
			if conn == "UD" {
				iters, rx = 400, 64
			}
			for _, bidir := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/q%d/b=%v", conn, qps, bidir), func(t *testing.T) {
					a := []string{"-c", conn, "-s", "4096", "-q", strconv.Itoa(qps), "--use-srq",
						"-n", strconv.Itoa(iters), "-r", strconv.Itoa(rx)}
					if bidir {
						a = append(a, "-b")
					}
					if conn == "RC" {
						a = append(a, "-u", testutil.QPTimeoutArg)
					}
					var lock *udLockstep
					if conn == "UD" {
						a = append(a, "-t", strconv.Itoa(udTxDepth))
						lock = &udLockstep{iters: iters}
					}
					cs, ss, gate := gatedSessions(t, 2*qps+2, lock.arm, a...)
					if lock != nil {
						require.NoError(t, lock.failed())
					}
					require.True(t, gate.held, "the exchange before the run was held")
					require.NoError(t, gate.err)
					want := uint64(qps * iters)
					ends := []*session{ss}
					if bidir {
						ends = append(ends, cs)
					}
					for _, e := range ends {
						require.NotNil(t, e.srq)
						require.Equal(t, rx, e.srq.Query().MaxWR, "the SRQ holds -r receives")
						var recvs, noWQE uint64
						for _, qp := range e.qps {
							c := qp.Counters()
							recvs += c.Responder.RDMARecvs + c.Unreliable.RDMARecvs
							noWQE += c.Unreliable.NoWQE
						}
						require.Zero(t, noWQE, "client=%v: no message found the SRQ empty", e.client)
						require.Equal(t, want, recvs, "client=%v: every message arrived", e.client)
						require.Len(t, e.bwResults, 1)
						require.Equal(t, want, e.bwResults[0].Iters, "client=%v: the row's #iterations", e.client)
					}
				})
			}
		}
	}
}

// sendGate is the server's exchange pipe in gatedSessions: once it has
// written its at-th key message (send-bw's "synchronising before the
// run", after 2q+1 key messages for q QPs; the server reads the client's
// before it writes its own, oob.Conn.Exchange), after which the client
// sends, it returns only when the client has written its next message or
// closed the connection, that is, once the client has sent all its
// messages, or after testutil.Bound(): the wait only stops a hang.
type sendGate struct {
	oob.TCPPipe
	c    net.Conn
	at   int
	n    int
	held bool  // the at-th message was held until the client stopped
	err  error // the wait's error
}

// Send implements oob.Pipe.
func (g *sendGate) Send(b []byte) error {
	if err := g.TCPPipe.Send(b); err != nil {
		return err
	}
	if len(b) != oob.KeyMsgSize {
		return nil
	}
	if g.n++; g.n != g.at {
		return nil
	}
	rc := rawConn(g.c)
	if rc == nil {
		g.err = errors.New("no raw connection to wait on")
		return nil
	}
	bound := testutil.Bound()
	g.c.SetReadDeadline(time.Now().Add(bound))
	g.held = waitReadable(rc)
	g.c.SetReadDeadline(time.Time{})
	if !g.held {
		g.err = fmt.Errorf("the client did not finish sending within %v", bound)
	}
	return nil
}

// udTxDepth is the tx depth (-t) of TestUseSRQReposts' UD runs: the most
// messages a QP's sender has posted and not seen complete, so the most it
// posts between two waits of its loop (runBWClient).
const udTxDepth = 16

// udLockstep keeps the UD senders of a run (the client, and with -b the
// server too) from outrunning the receives their peer has posted. Nothing
// else does: a UD datagram that finds the SRQ empty is dropped, as a NIC
// drops it, and the receiving loop re-posts only when the Go scheduler
// runs it, which on a loaded machine can be tens of milliseconds after
// the device took the WQE. After each wait of its bandwidth loop
// (hooks.sent) a sender waits until the peer's QPs have taken every
// datagram it sent (received, or dropped for want of a WQE) and the peer's
// SRQ holds a WQE for each datagram its next posts may add: udTxDepth per
// QP, fewer near the end. The receiver re-posts one per completion (up to
// -n per QP) on top of -r / -q to begin with, so each QP's share of -r
// must be at least udTxDepth for the wait to end. A wait that does not end
// within testutil.Bound() (a datagram lost before the QP, or a receiver
// that re-posts nothing) gives up and is reported by failed.
type udLockstep struct {
	iters int // -n
	// client and server are the ends' sessions, set once connected
	// (hooks.connected).
	client, server atomic.Pointer[session]
	mu             sync.Mutex
	err            error
}

// arm sets the hooks of the server so and the client co; nil arms
// nothing.
func (l *udLockstep) arm(so, co *options) {
	if l == nil {
		return
	}
	so.hooks.connected = func(s *session) { l.server.Store(s) }
	co.hooks.connected = func(s *session) { l.client.Store(s) }
	so.hooks.sent = func(int) { l.wait(l.server.Load(), l.client.Load()) }
	co.hooks.sent = func(int) { l.wait(l.client.Load(), l.server.Load()) }
}

// wait waits until from's datagrams so far have all reached to's QPs and
// to's SRQ holds a WQE for each datagram from may post next.
func (l *udLockstep) wait(from, to *session) {
	deadline := time.Now().Add(testutil.Bound())
	for {
		var sent, taken uint64
		need := 0
		for _, qp := range from.qps {
			n := qp.Counters().SentPkts
			sent += n
			need += min(udTxDepth, l.iters-int(n))
		}
		for _, qp := range to.qps {
			c := qp.Counters().Unreliable
			taken += c.RDMARecvs + c.NoWQE
		}
		have := to.srq.Len()
		if taken == sent && have >= need {
			return
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.err == nil {
				l.err = fmt.Errorf("client=%v: %d datagrams sent, %d reached the peer's QPs, and its SRQ holds %d WQEs of the %d the next posts need, after %v",
					from.client, sent, taken, have, need, testutil.Bound())
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// failed returns the first wait that gave up.
func (l *udLockstep) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// gatedSessions is loopbackSessions with the server's exchange held by a
// sendGate at its at-th key message, after arm (if set) has been given
// the server's and the client's options.
func gatedSessions(t *testing.T, at int, arm func(so, co *options), args ...string) (client, server *session, gate *sendGate) {
	t.Helper()
	pt, so, co := loopbackEnds(t, "send-bw", "0", args, &client, &server)
	if arm != nil {
		arm(&so, &co)
	}
	gate = &sendGate{at: at}
	so.hooks.pipe = func(c net.Conn) oob.Pipe {
		gate.c, gate.TCPPipe = c, oob.NewTCPPipe(c)
		return gate
	}
	runEnds(t, pt, &so, &co)
	require.NotNil(t, client)
	require.NotNil(t, server)
	return client, server, gate
}
