package rxe

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestAcceptServesNextAfterPeerFailure: a request that fails by the peer's
// doing after Accept took it — its REJ after our REP, its DREQ before its
// RTU, an RTU that never comes — is counted and skipped, and the same
// Accept call returns the next request's connection. Accept used to
// return each as its error (a *RejectError, ErrCMTimeout), which an
// accept loop could not tell from the listener's end.
func TestAcceptServesNextAfterPeerFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(p *rawCM, req *packet.REQ, rep *packet.REP)
		want CMListenerCounters
	}{
		{"REJ after REP", func(p *rawCM, req *packet.REQ, rep *packet.REP) {
			p.send(9, &packet.REJ{LocalCommID: req.LocalCommID, RemoteCommID: rep.LocalCommID,
				MessageRejected: packet.MsgREP, Reason: packet.RejConsumerReject})
		}, CMListenerCounters{Accepted: 1, Withdrawn: 1}},
		{"DREQ before RTU", func(p *rawCM, req *packet.REQ, rep *packet.REP) {
			p.send(9, &packet.DREQ{LocalCommID: req.LocalCommID, RemoteCommID: rep.LocalCommID, RemoteQPN: rep.LocalQPN})
		}, CMListenerCounters{Accepted: 1, Withdrawn: 1}},
		{"no RTU", func(p *rawCM, req *packet.REQ, rep *packet.REP) {
			var rej packet.REJ
			p.recv(packet.AttrREJ, &rej) // the REP's retries ran out
			require.Equal(t, packet.RejTimeout, rej.Reason)
		}, CMListenerCounters{Accepted: 1, TimedOut: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const port = 31
			p, l := rawListener(t, port, CMOptions{})
			ctx := testutil.Context(t)
			acc := async(func() (*CMConn, error) { return l.Accept(ctx) })

			// The first request: the RTU waits are short (4.096 µs · 2^8
			// plus twice the packet life time, one retry), for "no RTU".
			first := p.req(port, 0x51)
			first.LocalCMResponseTimeout, first.MaxCMRetries = 8, 1
			p.send(1, first)
			var rep packet.REP
			p.recv(packet.AttrREP, &rep)
			tc.fail(p, first, &rep)

			second := p.req(port, 0x52)
			p.send(2, second)
			p.recv(packet.AttrREP, &rep)
			require.Equal(t, second.LocalCommID, rep.RemoteCommID)
			p.send(3, rtuFor(&rep))
			c := awaitConn(ctx, t, acc, "Accept", "Accept returns the second request's connection")
			require.Equal(t, second.LocalQPN, c.Remote.QPN)
			require.Equal(t, tc.want, l.Counters())
		})
	}
}

// TestAcceptErrorIsPerRequest: a request whose QP this side cannot create
// (here its QP creation is made to fail) is rejected with "consumer
// reject", as rdma_cm's application rejects it (rdma_reject, or
// rdma_destroy_id's cm_destroy_id: IB_CM_REJ_CONSUMER_DEFINED), and
// reported as an *AcceptError that
// names the requester and wraps the cause, and is neither ErrClosed nor a
// context error: the listener still serves.
func TestAcceptErrorIsPerRequest(t *testing.T) {
	const port = 32
	p, l := rawListener(t, port, CMOptions{})
	ctx := testutil.Context(t)
	l.newQP = func(*CMOptions) (*QP, error) {
		return nil, fmt.Errorf("%w: this side cannot create the QP", ErrInvalidArgument)
	}

	req := p.req(port, 0x61)
	p.send(1, req)
	_, err := l.Accept(ctx)
	var ae *AcceptError
	require.ErrorAs(t, err, &ae)
	require.NotErrorIs(t, err, ErrClosed)
	require.Equal(t, p.addr(), ae.Remote.Addr())
	require.Equal(t, uint16(40000), ae.Remote.Port())
	require.ErrorIs(t, err, ErrInvalidArgument, "CreateQP's error")
	var rej packet.REJ
	p.recv(packet.AttrREJ, &rej)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Equal(t, CMListenerCounters{Failed: 1}, l.Counters())

	require.NoError(t, l.Close())
	_, err = l.Accept(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

// TestListenerCountsRefused: a request rejected before any Accept takes
// it (here, one without RDMA CM's IP header) is counted as refused.
func TestListenerCountsRefused(t *testing.T) {
	const port = 33
	p, l := rawListener(t, port, CMOptions{})
	req := p.req(port, 0x71)
	req.PrivateData = [packet.REQPrivateDataSize]byte{}
	p.send(1, req)
	var rej packet.REJ
	p.recv(packet.AttrREJ, &rej)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Equal(t, CMListenerCounters{Refused: 1}, l.Counters())
}

// TestListenCMDestination: a REQ whose RDMA CM IP header names another
// destination than the device's address, or names it in the other IP
// version, is rejected (consumer reject) in its transaction, counted as
// refused and never queued for Accept, as kernel rdma_cm finds no listener
// bound to that address (cma_ib_id_from_event → cma_find_listener →
// cma_match_private_data fails with -EINVAL) and ib_cm then rejects the
// REQ received with IB_CM_REJ_CONSUMER_DEFINED (cm_process_work →
// cm_destroy_id). One that names the device's address reaches Accept.
func TestListenCMDestination(t *testing.T) {
	const port = 39
	p, l := rawListener(t, port, CMOptions{})
	for i, dst := range []netip.Addr{
		netip.MustParseAddr("127.0.0.9"),        // another node's address
		netip.MustParseAddr("::ffff:127.0.0.1"), // an IPv6 header: the device has an IPv4 address
	} {
		req := p.req(port, uint32(0x80+i))
		(&packet.CMIPHeader{SrcPort: 40000, Src: p.addr(), Dst: dst}).Encode(req.PrivateData[:])
		if dst.Is4In6() { // Encode writes an IPv4 header when both addresses are IPv4 or mapped
			req.PrivateData[1] = 0x60
			src := p.addr().As16()
			copy(req.PrivateData[4:20], src[:])
			copy(req.PrivateData[20:36], dst.AsSlice())
		}
		var ip packet.CMIPHeader
		require.NoError(t, ip.Decode(req.PrivateData[:]))
		require.Equal(t, dst, ip.Dst)
		tid := uint64(0x0000000a00000000) | uint64(i)
		p.send(tid, req)
		var rej packet.REJ
		require.Equal(t, tid, p.recv(packet.AttrREJ, &rej), "in the REQ's transaction")
		require.Equal(t, req.LocalCommID, rej.RemoteCommID)
		require.Equal(t, uint8(packet.MsgREQ), rej.MessageRejected)
		require.Equal(t, packet.RejConsumerReject, rej.Reason, "destination %v", dst)
	}
	require.Zero(t, len(l.reqs), "nothing for Accept")
	require.Zero(t, cmAgentLen(p.dev))
	require.Equal(t, CMListenerCounters{Refused: 2}, l.Counters())

	ctx := testutil.Context(t)
	acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
	req := p.req(port, 0x8f) // names the device's address
	p.send(0x0000000a000000ff, req)
	var rep packet.REP
	p.recv(packet.AttrREP, &rep)
	require.Equal(t, req.LocalCommID, rep.RemoteCommID)
	p.send(0x0000000a000000ff, rtuFor(&rep))
	c := awaitConn(ctx, t, acc, "Accept")
	defer c.Close()
	require.Equal(t, netip.AddrPortFrom(p.addr(), 40000), c.RemoteAddr)
}

// connResult is what Dial or Accept returned.
type connResult struct {
	c   *CMConn
	err error
}

// async runs f (a Dial or an Accept) on its own goroutine; its result
// comes on the channel.
func async(f func() (*CMConn, error)) <-chan connResult {
	ch := make(chan connResult, 1)
	go func() {
		c, err := f()
		ch <- connResult{c, err}
	}()
	return ch
}

// awaitConn waits, until ctx ends, for the Accept or Dial that ch reports
// (async), requires it to have succeeded and returns its connection; what
// names the call in the failure.
func awaitConn(ctx context.Context, t *testing.T, ch <-chan connResult, what string, msgAndArgs ...any) *CMConn {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err, msgAndArgs...)
		return r.c
	case <-ctx.Done():
		t.Fatal(what + " did not return")
		return nil
	}
}

// TestListenCMChecksCap: a listener whose QP capabilities the device
// cannot give is refused by ListenCM and Dial up front, not by each
// connection's CreateQP after the request came (an AcceptError for every
// request) or after the REQ was built.
func TestListenCMChecksCap(t *testing.T) {
	d, _ := newRawCM(t)
	server := newCMEnd(t, d)
	for _, c := range []QPCap{{MaxSendWR: 1 << 30}, {MaxRecvWR: 1 << 30}, {MaxSendSGE: 1 << 20}, {MaxInlineData: -1}} {
		_, err := d.ListenCM(34, CMOptions{PD: server.pd, SendCQ: server.cq, Cap: c})
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", c)
		_, err = Dial(context.Background(), d, "127.0.0.1:34", CMOptions{PD: server.pd, SendCQ: server.cq, Cap: c})
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", c)
	}
}

// rawListener returns a raw CM peer and a listener on port of the device
// it talks to, with listen's options and an end's PD and CQ (listenEnd).
func rawListener(t *testing.T, port uint16, listen CMOptions) (*rawCM, *CMListener) {
	t.Helper()
	d, p := newRawCM(t)
	return p, listenEnd(t, d, newCMEnd(t, d), port, listen)
}

// TestAcceptWithOwnCQs: AcceptWith gives each accepted connection the
// resources passed to it instead of the listener's: each server QP's
// completions go to its own CQ, the REP carries that call's private
// data, and options refused before a request is taken (a CQ of another
// device, no PD, private data longer than a REP's) leave the request
// queued for the next call.
func TestAcceptWithOwnCQs(t *testing.T) {
	s := listenCM(t, 7481, CMOptions{PrivateData: []byte("listener")})
	da, db, client, server, l := s.da, s.db, s.client, s.server, s.l
	ctx := testutil.Context(t)

	const n = 3
	cqs := make([]*CQ, n)
	for i := range cqs {
		var err error
		cqs[i], err = db.CreateCQ(16, -1)
		require.NoError(t, err)
	}
	dialed := make(chan connResult, n)
	for i := range n {
		go func() {
			c, err := s.dial(ctx, CMOptions{PrivateData: []byte{byte(i)}})
			dialed <- connResult{c, err}
		}()
	}
	require.Eventually(t, func() bool { return len(l.reqs) == n }, testutil.Bound(), time.Millisecond, "the requests are queued")
	other := newCMEnd(t, da) // resources of the client's device
	for name, o := range map[string]CMOptions{
		"CQ of another device": {PD: server.pd, SendCQ: other.cq},
		"no PD":                {SendCQ: server.cq},
		"long private data":    {PD: server.pd, SendCQ: server.cq, PrivateData: make([]byte, packet.REPPrivateDataSize+1)},
	} {
		_, err := l.AcceptWith(ctx, o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}

	require.Len(t, l.reqs, n, "the refused calls took no request")
	type accepted struct {
		sc *CMConn
		j  int // the AcceptWith call that returned it
	}
	byClient := map[uint32]accepted{} // by the client QP's QPN
	for i := range n {
		sc, err := l.AcceptWith(ctx, CMOptions{PD: server.pd, SendCQ: cqs[i], PrivateData: []byte{'s', byte(i)}})
		require.NoError(t, err)
		byClient[sc.Remote.QPN] = accepted{sc, i}
		_, err = sc.QP.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{{Addr: server.mr.Addr() + uint64(i)*64, Length: 64, LKey: server.mr.LKey()}}})
		require.NoError(t, err)
	}
	require.Equal(t, CMListenerCounters{Accepted: n}, l.Counters())
	for range n {
		r := <-dialed
		require.NoError(t, r.err)
		cc := r.c
		a, ok := byClient[cc.QP.QPN()]
		require.True(t, ok)
		sc, i := a.sc, a.j
		require.Equal(t, []byte{'s', byte(i)}, cc.PrivateData[:2], "the REP carries AcceptWith's private data")
		_, err := cc.QP.PostSend(SendWR{ID: 9, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: client.mr.Addr(), Length: 4, LKey: client.mr.LKey()}}})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitWC(t, client.cq).Status)
		wc := waitWC(t, cqs[i])
		require.Equal(t, WCSuccess, wc.Status)
		require.Equal(t, uint64(i), wc.ID, "the receive completes on the CQ AcceptWith gave its QP")
		require.Equal(t, sc.QP.QPN(), wc.QPNum)
	}
	require.Zero(t, server.cq.Poll(make([]WC, 4)), "nothing on the listener's CQ")
}

// TestCMOptionsChecksOffers: the selective-repeat bound and the peer's
// announced buffer in CMOptions are checked as QPAttr.OOOLimit and
// QP.SetPeerReceiveBuffer check them, by ListenCM, AcceptWith and Dial
// before anything goes out: a bad one no longer takes a queued request
// only to reject it (AcceptWith), or sends a REQ only to reject the REP
// (Dial).
func TestCMOptionsChecksOffers(t *testing.T) {
	s := listenCM(t, 7490, CMOptions{SelectiveRepeat: true, PeerSelectiveRepeat: true})
	db, server, l := s.db, s.server, s.l
	bad := map[string]CMOptions{
		"out-of-order buffer above MaxOOOLimit": {SelectiveRepeat: true, PeerSelectiveRepeat: true, OOOLimit: MaxOOOLimit + 1},
		"negative out-of-order buffer":          {SelectiveRepeat: true, PeerSelectiveRepeat: true, OOOLimit: -1},
		"negative peer receive buffer":          {PeerRecvBuffer: -1},
		"negative peer socket count":            {PeerRecvBuffer: 1 << 20, PeerRecvSockets: -1},
	}
	for name, o := range bad {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		so := o
		so.PD, so.SendCQ = server.pd, server.cq
		_, err := db.ListenCM(7491, so)
		require.ErrorIs(t, err, ErrInvalidArgument, "ListenCM: %s", name)
		_, err = l.AcceptWith(ctx, so)
		require.ErrorIs(t, err, ErrInvalidArgument, "AcceptWith: %s", name)
		_, err = s.dial(ctx, o)
		require.ErrorIs(t, err, ErrInvalidArgument, "Dial: %s", name)
		cancel()
	}
	require.Zero(t, l.Counters(), "no request was taken")

	// A request queued while AcceptWith is given a bad bound stays queued
	// for the next call, which connects it.
	ctx := testutil.Context(t)
	dialed := s.dialAsync(ctx, CMOptions{SelectiveRepeat: true, PeerSelectiveRepeat: true})
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, testutil.Bound(), time.Millisecond, "the request is queued")
	so := bad["out-of-order buffer above MaxOOOLimit"]
	so.PD, so.SendCQ = server.pd, server.cq
	_, err := l.AcceptWith(ctx, so)
	require.ErrorIs(t, err, ErrInvalidArgument)
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	r := <-dialed
	require.NoError(t, r.err)
	require.True(t, sc.QP.Query().SelectiveRepeat)
	require.True(t, r.c.QP.Query().SelectiveRepeat)
}
