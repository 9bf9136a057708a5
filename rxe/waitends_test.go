package rxe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestBlockingCallsEnd: every call that blocks on a device — CQ.Wait,
// CompChannel.Get, CMListener.Accept, Dial with no answer, a range over
// Events — ends with ErrClosed (the range: by the channel's close) when
// the device closes, or with ctx's error when its deadline passes first.
// In a synctest bubble: synctest.Wait proves each is blocked before the
// close or the deadline, and that each has returned after it.
func TestBlockingCallsEnd(t *testing.T) {
	for _, byDeadline := range []bool{false, true} {
		name := map[bool]string{false: "device-close", true: "deadline"}[byDeadline]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ca, _ := netdev.NewPipe()
				d, err := Open(ca, Options{Name: "ends", OwnConn: true, CompVectors: 1})
				require.NoError(t, err)
				defer d.Close()
				pd, err := d.AllocPD()
				require.NoError(t, err)
				ch := NewCompChannel(1)
				cq, err := d.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
				require.NoError(t, err)
				l, err := d.ListenCM(30, CMOptions{PD: pd, SendCQ: cq})
				require.NoError(t, err)

				const deadline = time.Hour
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				type result struct {
					name string
					err  error
				}
				results := make(chan result, 8)
				calls := map[string]func() error{
					"CQ.Wait": func() error { _, err := cq.Wait(ctx, make([]WC, 1)); return err },
					"CompChannel.Get": func() error {
						_, err := ch.Get(ctx)
						return err
					},
					"Accept": func() error { _, err := l.Accept(ctx); return err },
					"Dial": func() error {
						// The REQ goes to a pipe address nobody answers; its
						// retries take far longer than the deadline.
						_, err := Dial(ctx, d, "192.0.2.9:9", CMOptions{PD: pd, SendCQ: cq, CMResponseTimeout: 31})
						return err
					},
				}
				for name, f := range calls {
					go func() { results <- result{name, f()} }()
				}
				ranged := make(chan struct{})
				go func() {
					for range d.Events() {
					}
					close(ranged)
				}()
				synctest.Wait()
				require.Empty(t, results, "a call returned before the close or the deadline")

				want := ErrClosed
				if byDeadline {
					time.Sleep(deadline)
					want = context.DeadlineExceeded
				} else {
					require.NoError(t, d.Close())
				}
				synctest.Wait()
				require.Len(t, results, len(calls), "calls still blocked")
				for range len(calls) {
					r := <-results
					require.ErrorIs(t, r.err, want, r.name)
				}
				if byDeadline {
					require.NoError(t, d.Close())
					synctest.Wait()
				}
				select {
				case <-ranged:
				default:
					t.Fatal("the range over Events did not end")
				}
			})
		})
	}
}
