package oob

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// TestOOBErrorMessages: a failed step says what happened in the terms of
// the exchange: the peer closing or resetting the connection is
// ErrPeerClosed, our own close an interruption, a deadline a silent peer.
func TestOOBErrorMessages(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		closed bool
		want   string
	}{
		{"EOF", io.EOF, true, ""},
		{"short read", io.ErrUnexpectedEOF, true, ""},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true, ""},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true, ""},
		{"closed by us", &net.OpError{Op: "read", Err: net.ErrClosed}, false, "step: interrupted"},
		{"deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false,
			"step: the peer sent nothing in time (is it rxectl or perftest, running the same test?)"},
		{"other", errors.New("boom"), false, "step: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := oobError("step", tc.err, false)
			require.Equal(t, tc.closed, errors.Is(err, ErrPeerClosed), "%v", err)
			if tc.closed {
				require.Equal(t, "step: "+ErrPeerClosed.Error(), err.Error())
				return
			}
			require.Equal(t, tc.want, err.Error())
		})
	}
}

// finishPipe records what Finish was asked.
type finishPipe struct {
	pipeOf
	finished []bool
}

func (p *finishPipe) Finish(done bool) error { p.finished = append(p.finished, done); return nil }

// TestCloseConnectionSendsDone: ctx_close_connection is a last key
// exchange, then "done" (perftest_communication.c), so CloseConnection
// finishes the pipe with done after the handshake.
func TestCloseConnectionSendsDone(t *testing.T) {
	my, rem := KeyMsg{QPN: 1}, KeyMsg{QPN: 2}
	p := &finishPipe{pipeOf: pipeOf{peer: [][]byte{rem.Marshal()}}}
	require.NoError(t, NewConn(p, true).CloseConnection(my))
	require.Equal(t, [][]byte{my.Marshal()}, p.sent)
	require.Equal(t, []bool{true}, p.finished)
}

// TestTCPPipeFinish: Finish(true) writes "done" with its NUL and reads
// the peer's, Finish(false) writes nothing; both then half-close, so the
// peer reads the end of the stream, and return only once the peer has
// closed its side.
func TestTCPPipeFinish(t *testing.T) {
	for _, done := range []bool{true, false} {
		t.Run(fmt.Sprint("done=", done), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			type result struct {
				got []byte
				err error
			}
			peer := make(chan result, 1)
			release := make(chan struct{})
			go func() {
				c, err := ln.Accept()
				if err != nil {
					peer <- result{err: err}
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if done {
					c.Write(doneMsg)
				}
				got, err := io.ReadAll(c) // to our half-close
				peer <- result{got, err}
				<-release
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			finished := make(chan error, 1)
			go func() { finished <- NewTCPPipe(c).Finish(done) }()

			r := <-peer
			require.NoError(t, r.err)
			want := []byte{}
			if done {
				want = doneMsg
			}
			require.Equal(t, want, append([]byte{}, r.got...))
			select {
			case err := <-finished:
				t.Fatalf("Finish returned (%v) before the peer closed", err)
			case <-time.After(5 * time.Millisecond):
			}
			close(release)
			select {
			case err := <-finished:
				require.NoError(t, err)
			case <-time.After(2 * finishTimeout):
				t.Fatal("Finish did not return after the peer closed")
			}
		})
	}
}

// TestExchangeReportsDecodes: xchg_bw_reports sends size and iterations
// as 64-bit big-endian integers and the peak, average and message rate
// as big-endian doubles, in that order; ExchangeReports returns the
// peer's values as it sent them.
func TestExchangeReportsDecodes(t *testing.T) {
	peer := report.BW{Size: 65536, Iters: 1000, Peak: 1234.5, Avg: 1200.25, MsgRate: 0.0183}
	p := &pipeOf{peer: [][]byte{Uint64Msg(peer.Size), Uint64Msg(peer.Iters), DoubleMsg(peer.Peak), DoubleMsg(peer.Avg), DoubleMsg(peer.MsgRate)}}
	got, err := NewConn(p, false).ExchangeReports(report.BW{Size: 2, Iters: 3, Peak: 4, Avg: 5, MsgRate: 6})
	require.NoError(t, err)
	require.Equal(t, peer, got)
	require.Equal(t, [][]byte{Uint64Msg(2), Uint64Msg(3), DoubleMsg(4), DoubleMsg(5), DoubleMsg(6)}, p.sent)
}

// TestHandshakeRejectsForeignKeys: a key message that does not parse
// fails the step, with a hint at the peer's mode: the TCP text message
// read over rdma_cm, or a binary one over TCP.
func TestHandshakeRejectsForeignKeys(t *testing.T) {
	my := KeyMsg{QPN: 1}
	binary := make([]byte, KeyMsgSize) // all zeros: no NUL-terminated text
	_, err := NewConn(&pipeOf{peer: [][]byte{binary}}, true).Handshake("keys", my)
	require.ErrorContains(t, err, "keys: key message")
	require.ErrorContains(t, err, "in Ethernet exchange mode, without -R/-z?")

	text := KeyMsg{QPN: 2}.Marshal()[:CMKeyMsgSize] // "0000:0000:...": LID 0x30303030
	_, err = NewCMConn(&pipeOf{peer: [][]byte{text}}, true, 0).Handshake("keys", my)
	require.ErrorContains(t, err, "keys: rdma_cm key message")
	require.ErrorContains(t, err, "(does the peer run with -R too?)")
}

// TestTCPPipeFinishBounded: a peer that reads our "done" but neither
// answers nor closes holds Finish for finishTimeout, not for ever.
func TestTCPPipeFinishBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ours, theirs := net.Pipe()
		go func() {
			buf := make([]byte, len(doneMsg))
			io.ReadFull(theirs, buf)
			io.Copy(io.Discard, theirs) // until Finish closes
			theirs.Close()
		}()
		start := time.Now()
		require.NoError(t, NewTCPPipe(ours).Finish(true))
		require.Equal(t, finishTimeout, time.Since(start))
	})
}

// closedPipe is a Pipe whose peer has closed: every Recv finds io.EOF.
type closedPipe struct{ pipeOf }

func (closedPipe) Recv([]byte) error { return io.EOF }

// TestPeerClosedByStage: a peer that closes before the run started (the
// first exchanges) probably runs a different test or options, and the
// step's error says so (ErrPeerClosed); one that closes once the run
// started (RunStarted) ended, failed, killed or interrupted, and the
// error says that instead (ErrPeerEnded, which is ErrPeerClosed too).
func TestPeerClosedByStage(t *testing.T) {
	for _, started := range []bool{false, true} {
		t.Run(fmt.Sprint("started=", started), func(t *testing.T) {
			o := NewConn(&closedPipe{}, false)
			if started {
				o.RunStarted()
			}
			err := o.Exchange("step", []byte{1}, make([]byte, 1))
			require.ErrorIs(t, err, ErrPeerClosed)
			if !started {
				require.Equal(t, "step: "+ErrPeerClosed.Error(), err.Error())
				require.Contains(t, err.Error(), "different test or options")
				return
			}
			require.ErrorIs(t, err, ErrPeerEnded)
			require.Equal(t, "step: "+ErrPeerEnded.Error(), err.Error())
			require.NotContains(t, err.Error(), "different test or options")
			require.Contains(t, err.Error(), "failed, was killed or interrupted")
		})
	}
}
