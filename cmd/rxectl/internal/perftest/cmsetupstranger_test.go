package perftest

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// TestCMSetupWatchHearsOnlyThePeer: the silence watch of a wait outside
// the exchange (watchCMSetup) counts the CM MADs of the exchange's peer
// only. A stranger whose connection requests keep reaching the server
// (each refused: nobody listens on its port) does not keep the wait
// going past the silence bound, while the peer's own requests do.
func TestCMSetupWatchHearsOnlyThePeer(t *testing.T) {
	const silence = time.Second
	for _, tc := range []struct {
		name     string
		stranger bool // the requests come from a third host, not the peer
	}{
		{"stranger", true},
		{"peer", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := sharedUDPPort(t)
			p, err := strconv.Atoi(port)
			require.NoError(t, err)
			open := func(name, addr string) *rxe.Device {
				conn, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(p)), netdev.Options{})
				require.NoError(t, err)
				d, err := rxe.Open(conn, rxe.Options{Name: name, OwnConn: true})
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
				return d
			}
			srv, cli, other := open("srv", "127.0.0.1"), open("cli", "127.0.0.2"), open("stranger", "127.0.0.3")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			so := watchCMOptions(t, srv)
			l, err := srv.ListenCM(7492, so)
			require.NoError(t, err)
			dialed := make(chan *rxe.CMConn, 1)
			go func() {
				c, err := rxe.Dial(ctx, cli, "127.0.0.1:7492", watchCMOptions(t, cli))
				if err != nil {
					t.Errorf("dial: %v", err)
				}
				dialed <- c
			}()
			conn, err := l.Accept(ctx)
			require.NoError(t, err)
			l.Close()
			require.NotNil(t, <-dialed)

			st := &cmState{stop: ctx, silence: silence}
			st.pipe = &cmPipe{st: st, conn: conn, rcq: so.RecvCQ}
			s := &session{dev: srv, cm: st}
			wctx, release := s.watchCMSetup()
			defer release()

			// The requester asks for a connection on a port nobody
			// listens on, again and again, until stopped: each REQ is
			// answered with a REJ (invalid service ID).
			from := cli
			if tc.stranger {
				from = other
			}
			before := srv.GSICounters().RcvdMADs
			rctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := watchCMOptions(t, from)
				for rctx.Err() == nil {
					if c, err := rxe.Dial(rctx, from, "127.0.0.1:7499", o); err == nil {
						t.Errorf("a request to a port nobody listens on was accepted: %v", c.RemoteAddr)
					}
					select {
					case <-rctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			defer func() {
				stop()
				wg.Wait()
			}()

			if tc.stranger {
				select {
				case <-wctx.Done():
				case <-time.After(8 * silence):
					t.Fatal("the stranger's requests kept the wait going past the silence bound")
				}
				require.Equal(t, errPeerSilent{silence}, setupCause(wctx))
				require.Greater(t, srv.GSICounters().RcvdMADs-before, uint64(4), "the stranger's requests did not reach the server: the test tests nothing")
				return
			}
			select {
			case <-wctx.Done():
				t.Fatalf("the watch ended while the peer kept sending requests: %v", context.Cause(wctx))
			case <-time.After(3 * silence):
			}
			stop()
			wg.Wait()
			select {
			case <-wctx.Done():
			case <-time.After(8 * silence):
				t.Fatal("the watch did not end once the peer was silent")
			}
			require.Equal(t, errPeerSilent{silence}, setupCause(wctx))
		})
	}
}
