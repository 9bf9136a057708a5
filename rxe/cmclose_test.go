package rxe

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
	"github.com/stretchr/testify/require"
)

// returnsWithin waits up to 2 s for ch's error and returns it.
func returnsWithin(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(2 * time.Second):
		t.Fatalf("%s did not return after Device.Close", what)
		return nil
	}
}

// cmAgentState reports connection id's state in d's CM agent.
func cmAgentState(d *Device, id cm.ID) cm.State {
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.agent.State(id)
}

// waitCMConns waits up to testutil.Bound() until d's CM agent holds n connections.
func waitCMConns(t *testing.T, d *Device, n int, what string) {
	t.Helper()
	g := d.gsiOf()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.agent.Len() == n
	}, testutil.Bound(), time.Millisecond, what)
}

// TestAcceptEndsOnDeviceClose: an Accept without a deadline returns
// ErrClosed when its device closes.
func TestAcceptEndsOnDeviceClose(t *testing.T) {
	s := listenCM(t, 20, CMOptions{})
	db, l := s.db, s.l
	res := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		res <- err
	}()
	time.Sleep(10 * time.Millisecond) // most often Accept waits by now; if not, it finds the device closed
	require.NoError(t, db.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Accept"), ErrClosed)
	_, err := l.Accept(context.Background())
	require.ErrorIs(t, err, ErrClosed)
}

// TestDialEndsOnDeviceClose: a Dial without a deadline whose REQ is
// unanswered returns ErrClosed when its device closes (the CM's timers run
// no more).
func TestDialEndsOnDeviceClose(t *testing.T) {
	da, _ := cmDevices(t, "pipe")
	client := newCMEnd(t, da)
	res := make(chan error, 1)
	go func() {
		_, err := Dial(context.Background(), da, "127.0.0.9:9", CMOptions{PD: client.pd, SendCQ: client.cq})
		res <- err
	}()
	waitCMConns(t, da, 1, "the REQ goes out")
	require.NoError(t, da.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Dial"), ErrClosed)
}

// mutedConn is a netdev.Conn whose writes vanish while mute is set: a
// peer that has gone silent without closing anything.
type mutedConn struct {
	netdev.Conn
	mute atomic.Bool
}

func (c *mutedConn) WriteBatch(msgs []netdev.Message) (int, error) {
	if c.mute.Load() {
		return len(msgs), nil
	}
	return c.Conn.WriteBatch(msgs)
}

// mutedCMDevices opens two CM devices over a pipe; the second one's
// sends can be muted (a peer gone silent).
func mutedCMDevices(t *testing.T) (da, db *Device, mb *mutedConn) {
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	mb = &mutedConn{Conn: cb}
	da, db = cmDevicesOn(t, ca, mb)
	return da, db, mb
}

// cmPair connects a client on da to a server on db through a listener on
// port, and returns both ends' connections.
func cmPair(ctx context.Context, t *testing.T, da, db *Device, port uint16) (cc, sc *CMConn) {
	t.Helper()
	return cmPairWith(ctx, t, da, db, port, CMOptions{})
}

// cmPairWith is cmPair with the client's CM timeouts and retries from
// opts (its CMResponseTimeout and MaxCMRetries; the server's follow them,
// as they come in the REQ).
func cmPairWith(ctx context.Context, t *testing.T, da, db *Device, port uint16, opts CMOptions) (cc, sc *CMConn) {
	t.Helper()
	return listenOn(t, da, db, port, CMOptions{}).connect(ctx, t, CMOptions{CMResponseTimeout: opts.CMResponseTimeout, MaxCMRetries: opts.MaxCMRetries})
}

// unansweredDisconnect mutes the peer behind mb (its DREP never comes),
// starts cc.Disconnect(ctx) on its own goroutine and waits until the DREQ
// is out (da's agent in DREQ sent); Disconnect's result comes on the
// channel.
func unansweredDisconnect(ctx context.Context, t *testing.T, da *Device, mb *mutedConn, cc *CMConn) <-chan error {
	t.Helper()
	mb.mute.Store(true)
	res := make(chan error, 1)
	go func() { res <- cc.Disconnect(ctx) }()
	require.Eventually(t, func() bool { return cmAgentState(da, cc.id) == cm.StateDREQSent }, testutil.Bound(), time.Millisecond)
	return res
}

// closedWithin requires that done closes within 2 s. For some callers
// the 2 s is what they check, not only a bound on a hang: a connection
// whose DREQ goes unanswered ends too once the DREQ's retries run out
// (CMOptions' defaults: 16 tries of about 4.3 s), so
// TestDisconnectTimeoutEndsWatch tells an end that comes at once from
// that one by it.
func closedWithin(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("%s is still open", what)
	}
}

// TestDeviceCloseTellsCMPeers: a device that closes tells the peers of its
// connections (cm.Agent.Shutdown, as kernel ib_cm when a device goes
// away): an established connection's peer gets a DREQ and its connection
// ends at once; a Dial whose REQ waits for the consumer's Accept is
// rejected (consumer reject) instead of timing out. Over UDP: a pipe whose
// one end closes stops both.
func TestDeviceCloseTellsCMPeers(t *testing.T) {
	ctx := testutil.Context(t)

	da, db := cmDevices(t, "udp")
	cc, sc := cmPair(ctx, t, da, db, 22)
	require.NoError(t, db.Close())
	closedWithin(t, sc.Done(), "the closed device's connection")
	require.ErrorIs(t, sc.Disconnect(context.Background()), ErrClosed)
	closedWithin(t, cc.Done(), "the peer's connection")
	require.Equal(t, QPSErr, cc.QP.State())

	da, db = cmDevices(t, "udp")
	s := listenOn(t, da, db, 23, CMOptions{}) // nobody calls Accept
	res := make(chan error, 1)
	go func() {
		_, err := s.dial(ctx, CMOptions{})
		res <- err
	}()
	waitCMConns(t, db, 1, "the REQ arrives")
	require.NoError(t, db.Close())
	var rej *RejectError
	require.ErrorAs(t, returnsWithin(t, res, "Dial"), &rej)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
}

// TestDisconnectEndsOnDeviceClose: a Disconnect without a deadline whose
// DREQ is unanswered (the peer went silent) returns ErrClosed when its
// device closes, and Done is closed.
func TestDisconnectEndsOnDeviceClose(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx := testutil.Context(t)
	cc, _ := cmPair(ctx, t, da, db, 21)

	res := unansweredDisconnect(context.Background(), t, da, mb, cc)
	require.NoError(t, da.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Disconnect"), ErrClosed)
	select {
	case <-cc.Done():
	default:
		t.Fatal("Done is open after Disconnect returned")
	}
}

// TestAcceptSkipsWithdrawnREQ: a REQ whose Dial gave up while it waited in
// the listener's queue (the client's REJ withdraws it) is not what Accept
// returns: it takes the next one.
func TestAcceptSkipsWithdrawnREQ(t *testing.T) {
	s := listenCM(t, 24, CMOptions{})
	db := s.db
	ctx := testutil.Context(t)
	short, cancelShort := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := s.dial(short, CMOptions{})
		res <- err
	}()
	waitCMConns(t, db, 1, "the REQ arrives")
	cancelShort()
	require.ErrorIs(t, returnsWithin(t, res, "Dial"), context.Canceled)
	waitCMConns(t, db, 0, "the REJ withdraws the REQ")

	cc, sc := s.connect(ctx, t, CMOptions{})
	require.Equal(t, cc.QP.QPN(), sc.Remote.QPN, "Accept took the second REQ")
}

// cmWatchers counts the goroutines following CM connections
// (CMConn.watch).
func cmWatchers() int {
	n := 0
	for _, g := range gorxeGoroutines() {
		if strings.Contains(g, "(*CMConn).watch") {
			n++
		}
	}
	return n
}

// TestDisconnectTimeoutEndsWatch: a Disconnect whose DREQ is unanswered
// and whose context ends first ends the connection (Done closes), and
// with it the goroutine that followed the connection's events: that
// goroutine used to wait for an event nobody would send any more, until
// the device closed, one per connection so abandoned.
func TestDisconnectTimeoutEndsWatch(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx := testutil.Context(t)
	// The connections of earlier tests end with their devices' Close.
	require.Eventually(t, func() bool { return cmWatchers() == 0 }, testutil.Bound(), time.Millisecond)
	before := 0
	cc, sc := cmPair(ctx, t, da, db, 25)
	// Each end's watch goroutine starts as its connection is established,
	// maybe just after cmPair returns.
	require.Eventually(t, func() bool { return cmWatchers() == before+2 }, testutil.Bound(), time.Millisecond,
		"each end follows its connection")

	mb.mute.Store(true) // the server's DREP never comes
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, cc.Disconnect(short), context.DeadlineExceeded)
	closedWithin(t, cc.Done(), "the client's connection")
	closedWithin(t, sc.Done(), "the server's connection (it got the DREQ)")
	// 2 s, not testutil.Bound(): the DREQ's retries, run out after some
	// 70 s, would end the goroutine too.
	require.Eventually(t, func() bool { return cmWatchers() == before }, 2*time.Second, time.Millisecond,
		"a connection's watch goroutine outlives it")
}
