package rxe

import (
	"context"
	"testing"
	"time"

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

// TestAcceptEndsOnDeviceClose: an Accept without a deadline returns
// ErrClosed when its device closes.
func TestAcceptEndsOnDeviceClose(t *testing.T) {
	_, db := cmDevices(t, "pipe")
	server := newCMEnd(t, db)
	l, err := db.ListenCM(20, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		res <- err
	}()
	time.Sleep(10 * time.Millisecond) // most often Accept waits by now; if not, it finds the device closed
	require.NoError(t, db.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Accept"), ErrClosed)
	_, err = l.Accept(context.Background())
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
	g := da.gsiOf()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.agent.Len() == 1
	}, 2*time.Second, time.Millisecond, "the REQ goes out")
	require.NoError(t, da.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Dial"), ErrClosed)
}

// TestDisconnectEndsOnDeviceClose: a Disconnect without a deadline whose
// DREQ is unanswered returns ErrClosed when its device closes, and Done is
// closed; so is the Done of a connection nobody disconnects.
func TestDisconnectEndsOnDeviceClose(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := db.ListenCM(21, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	acc := make(chan *CMConn, 1)
	go func() {
		c, _ := l.Accept(ctx)
		acc <- c
	}()
	cc, err := Dial(ctx, da, "127.0.0.2:21", CMOptions{PD: client.pd, SendCQ: client.cq})
	require.NoError(t, err)
	sc := <-acc
	require.NotNil(t, sc)

	// The server's device closes: its connection ends, nobody answers the
	// client's DREQ.
	require.NoError(t, db.Close())
	select {
	case <-sc.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done did not close after Device.Close")
	}
	require.ErrorIs(t, sc.Disconnect(context.Background()), ErrClosed)

	res := make(chan error, 1)
	go func() { res <- cc.Disconnect(context.Background()) }()
	require.Eventually(t, func() bool { return cmAgentState(da, cc.id) == cm.StateDREQSent }, 2*time.Second, time.Millisecond)
	require.NoError(t, da.Close())
	require.ErrorIs(t, returnsWithin(t, res, "Disconnect"), ErrClosed)
	select {
	case <-cc.Done():
	default:
		t.Fatal("Done is open after Disconnect returned")
	}
}
