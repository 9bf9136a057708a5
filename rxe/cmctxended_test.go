package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"

	"github.com/stretchr/testify/require"
)

// TestAcceptWithEndedContextLeavesRequestQueued: an Accept or AcceptWith
// whose context has already ended returns its error without taking a
// queued request, which the next call with a live context connects (the
// peer's Dial succeeds instead of getting a REJ).
func TestAcceptWithEndedContextLeavesRequestQueued(t *testing.T) {
	s := listenCM(t, 7495, CMOptions{})
	server, l := s.server, s.l
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dialed := s.dialAsync(ctx, CMOptions{})
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, 10*time.Second, time.Millisecond, "the request is queued")
	ended, end := context.WithCancel(context.Background())
	end()
	for range 20 { // select picks among ready cases at random
		_, err := l.Accept(ended)
		require.ErrorIs(t, err, context.Canceled)
		_, err = l.AcceptWith(ended, CMOptions{PD: server.pd, SendCQ: server.cq})
		require.ErrorIs(t, err, context.Canceled)
	}
	require.Zero(t, l.Counters(), "no request was taken")
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	defer sc.Close()
	r := <-dialed
	require.NoError(t, r.err)
	defer r.c.Close()
}

// TestDialWithEndedContextSendsNothing: a Dial whose context has already
// ended returns its error before a REQ goes out: the peer sees neither a
// REQ nor the REJ withdrawing it.
func TestDialWithEndedContextSendsNothing(t *testing.T) {
	s := listenCM(t, 7496, CMOptions{})
	da := s.da
	ended, end := context.WithCancel(context.Background())
	end()
	_, err := s.dial(ended, CMOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, da.GSICounters().SentMADs, "no REQ (or REJ) went out")
}

// TestAcceptContextEndedBeforeREPRejects: an Accept whose context ends
// while it sets up the request's QP rejects the request (consumer
// reject) instead of sending the REP and, at once, the REJ that withdraws
// it: the peer is refused, not handed a connection that ends as it
// confirms it.
func TestAcceptContextEndedBeforeREPRejects(t *testing.T) {
	const port = 37
	p, l := rawListener(t, port, CMOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.newQP = func(o *CMOptions) (*QP, error) {
		cancel() // the context ends while the QP is set up
		return newCMQP(o)
	}
	p.send(1, p.req(port, 0x81))
	_, err := l.Accept(ctx)
	require.ErrorIs(t, err, context.Canceled)
	r := p.next()
	require.Equal(t, packet.AttrREJ, r.attr, "the first answer is a REJ, not a REP")
	var rej packet.REJ
	require.NoError(t, rej.Decode(r.msg))
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Equal(t, uint8(packet.MsgREQ), rej.MessageRejected)
	require.Equal(t, CMListenerCounters{Abandoned: 1}, l.Counters())
}
