package rxe

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestDestroyWhileSendBlocked: a PostSend that sends on its caller's
// goroutine (a busy-polled CQ) can block in a netdev write that waits for
// room (a pipe with BlockWhenFull whose peer reads nothing). QP.Destroy
// meanwhile returns at once (the write holds no lock of the QP), and
// Device.Close, which closes the netdev it owns, ends the write: every
// PostSend returns and no goroutine is left.
func TestDestroyWhileSendBlocked(t *testing.T) {
	checkGoroutines(t)
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
	defer cb.Close()
	d, err := Open(ca, Options{LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	defer d.Close()
	e := smallEnd(t, d, nil, qpOpts{})
	qp := e.qp
	require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessLocalWrite},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	peer := cb.LocalAddr()
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: peer.Addr(), UDPPort: peer.Port()}, PathMTU: MTU1024,
		DestQPN: 0x99, MaxDestRdAtomic: 1, MinRNRTimer: 1},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	e.cq.BusyPoll(make([]WC, 1)) // PostSend now sends on its caller's goroutine

	const posters = 4
	posted := make(chan error, posters)
	for i := range posters {
		go func() {
			_, err := qp.PostSend(SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{e.mr.SGE(0, 512)}})
			posted <- err
		}()
	}
	require.Eventually(t, func() bool { return ca.Stats().PacketsSent >= 1 }, testutil.Bound(), time.Millisecond,
		"the pipe is full")
	t.Logf("PostSends returned before Destroy: %d of %d", len(posted), posters)
	destroyed := make(chan error, 1)
	go func() { destroyed <- qp.Destroy() }()
	select {
	case err := <-destroyed:
		require.NoError(t, err)
	case <-time.After(testutil.Bound()):
		t.Fatal("Destroy blocked behind a blocked send")
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(testutil.Bound()):
		t.Fatal("Device.Close blocked behind a blocked send")
	}
	for i := range posters {
		select {
		case err := <-posted:
			if err != nil {
				require.ErrorIs(t, err, ErrClosed, "PostSend %d", i)
			}
		case <-time.After(testutil.Bound()):
			t.Fatalf("PostSend %d still blocked after Close", i)
		}
	}
}

// TestCloseRacesVerbs: Device.Close while other goroutines are in the
// verbs (posting, polling, waiting, busy-polling, arming, modifying,
// creating objects, reading Events and a completion channel) panics
// nowhere (-race), and each goroutine sees ErrClosed (or its wait end)
// within a bound once Close has returned.
func TestCloseRacesVerbs(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			da, db := newDevices(t, kind)
			ch := NewCompChannel(64)
			cq, err := da.CreateCQWith(CQAttr{CQE: 4096, Vector: -1, Channel: ch})
			require.NoError(t, err)
			a := smallEnd(t, da, nil, qpOpts{cq: cq, sendWR: 256, recvWR: 256})
			b := smallEnd(t, db, nil, qpOpts{sendWR: 256, recvWR: 256})
			link(t, a, b, qpOpts{}, qpOpts{})
			srq, err := a.pd.CreateSRQ(SRQAttr{MaxWR: 64, MaxSGE: 1, Limit: 1})
			require.NoError(t, err)
			for i := range 64 {
				_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{b.mr.SGE(0, 64)}})
				if err != nil {
					break
				}
			}

			ctx := testutil.Context(t)
			// Each loop runs its verb until it fails with ErrClosed (or
			// its wait ends); anything else than nil, ErrClosed or a full
			// queue is reported.
			loops := map[string]func() error{
				"PostSend": func() error {
					_, err := a.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
					return err
				},
				"PostRecv": func() error {
					_, err := a.qp.PostRecv(RecvWR{SGList: []SGE{a.mr.SGE(0, 64)}})
					return err
				},
				"SRQ.PostRecv": func() error {
					_, err := srq.PostRecv(RecvWR{SGList: []SGE{a.mr.SGE(0, 64)}})
					return err
				},
				"SRQ.SetLimit": func() error { return srq.SetLimit(1) },
				"Wait": func() error {
					_, err := cq.Wait(ctx, make([]WC, 8))
					return err
				},
				"BusyPoll": func() error {
					cq.BusyPoll(make([]WC, 8))
					if da.closed.Load() {
						return ErrClosed
					}
					return nil
				},
				"ReqNotify": func() error { return cq.ReqNotify(false) },
				"Get": func() error {
					_, err := ch.Get(ctx)
					return err
				},
				"Modify": func() error {
					return a.qp.Modify(&QPAttr{MinRNRTimer: 1, AccessFlags: AccessLocalWrite | AccessRemoteWrite},
						QPAttrMinRNRTimer|QPAttrAccessFlags)
				},
				"CreateDestroyQP": func() error {
					qp, err := a.pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
					if err != nil {
						return err
					}
					return qp.Destroy()
				},
				"CreateDestroyCQ": func() error {
					c, err := da.CreateCQ(4, -1)
					if err != nil {
						return err
					}
					return c.Destroy()
				},
				"RegDereg": func() error {
					mr, err := a.pd.RegMR(make([]byte, 64), AccessLocalWrite)
					if err != nil {
						return err
					}
					return mr.Dereg()
				},
				"AllocDealloc": func() error {
					pd, err := da.AllocPD()
					if err != nil {
						return err
					}
					return pd.Dealloc()
				},
				"CreateDestroySRQ": func() error {
					s, err := a.pd.CreateSRQ(SRQAttr{MaxWR: 2, MaxSGE: 1})
					if err != nil {
						return err
					}
					return s.Destroy()
				},
				"ListenCMClose": func() error {
					l, err := da.ListenCM(77, CMOptions{PD: a.pd, SendCQ: cq})
					if err != nil {
						return err
					}
					return l.Close()
				},
				"QueryCounters": func() error {
					a.qp.Query()
					a.qp.Counters()
					da.Counters()
					da.GSICounters()
					if da.closed.Load() {
						return ErrClosed
					}
					return nil
				},
				"Events": func() error {
					select {
					case _, ok := <-da.Events():
						if !ok {
							return ErrClosed
						}
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				},
			}
			var wg sync.WaitGroup
			errs := runLoops(&wg, loops)
			time.Sleep(20 * time.Millisecond) // the loops are under way
			require.NoError(t, da.Close())
			waitWithin(t, &wg, time.Minute, "the loops after Close")
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func fmtErr(name string, err error) error { return errors.Join(errors.New(name), err) }

// waitWithin waits for wg for at most d; if its goroutines have not all
// returned by then, the test fails with every goroutine's stack instead of
// hanging until the test binary's timeout.
func waitWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s did not end within %v:\n%s", what, d, buf[:runtime.Stack(buf, true)])
	}
}

// runLoops runs each of loops in a goroutine of wg, calling it until it
// returns ErrClosed; any error but ErrNoResources ends that loop and goes
// to the returned channel (close it after wg.Wait).
func runLoops(wg *sync.WaitGroup, loops map[string]func() error) chan error {
	errs := make(chan error, len(loops))
	for name, f := range loops {
		wg.Go(func() {
			for {
				err := f()
				switch {
				case errors.Is(err, ErrClosed):
					return
				case err == nil, errors.Is(err, ErrNoResources):
				default:
					errs <- fmtErr(name, err)
					return
				}
			}
		})
	}
	return errs
}

// TestAcceptEndsOnListenerOrDeviceClose: Accepts waiting for a request,
// with and without a deadline, return ErrClosed when the listener closes,
// when the device closes, or when both race; a listener closed twice says
// ErrClosed the second time, and nothing panics.
func TestAcceptEndsOnListenerOrDeviceClose(t *testing.T) {
	cases := []struct {
		name  string
		close func(l *CMListener, d *Device)
	}{
		{"listener", func(l *CMListener, _ *Device) { require.NoError(t, l.Close()) }},
		{"device", func(_ *CMListener, d *Device) { require.NoError(t, d.Close()) }},
		{"both", func(l *CMListener, d *Device) {
			var wg sync.WaitGroup
			wg.Go(func() { l.Close() })
			wg.Go(func() { d.Close() })
			wg.Wait()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			_, db := cmDevices(t, "pipe")
			server := newCMEnd(t, db)
			l, err := db.ListenCM(21, CMOptions{PD: server.pd, SendCQ: server.cq})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res := make(chan error, 2)
			for _, ctx := range []context.Context{context.Background(), ctx} {
				go func() {
					_, err := l.Accept(ctx)
					res <- err
				}()
			}
			time.Sleep(10 * time.Millisecond) // most often both wait by now; if not, they find it closed
			c.close(l, db)
			for i := range 2 {
				select {
				case err := <-res:
					require.ErrorIs(t, err, ErrClosed, "Accept %d", i)
				case <-time.After(2 * time.Second):
					t.Fatalf("Accept %d did not return after the close", i)
				}
			}
			_, err = l.AcceptWith(context.Background(), CMOptions{PD: server.pd, SendCQ: server.cq})
			require.ErrorIs(t, err, ErrClosed)
			if c.name == "listener" {
				require.ErrorIs(t, l.Close(), ErrClosed)
			}
		})
	}
}

// TestDestroyRacesQPVerbs: QP.Destroy while other goroutines post to the
// QP, modify and query it, and wait on its CQ: nothing panics (-race), the
// QP's verbs fail with ErrClosed from then on, and the device goes on
// (its other QP still works).
func TestDestroyRacesQPVerbs(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := smallPair(t, kind, qpOpts{sendWR: 256, recvWR: 256}, qpOpts{sendWR: 256, recvWR: 256})
			for range 64 {
				if _, err := b.qp.PostRecv(RecvWR{SGList: []SGE{b.mr.SGE(0, 64)}}); err != nil {
					break
				}
			}
			qp := a.qp
			loops := map[string]func() error{
				"PostSend": func() error {
					_, err := qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 8)}})
					return err
				},
				"PostRecv": func() error {
					_, err := qp.PostRecv(RecvWR{SGList: []SGE{a.mr.SGE(0, 64)}})
					return err
				},
				"Modify": func() error {
					return qp.Modify(&QPAttr{MinRNRTimer: 2}, QPAttrMinRNRTimer)
				},
				"Query": func() error {
					qp.Query()
					qp.Counters()
					if qp.State() == QPSReset {
						return ErrClosed // Destroy leaves it in RESET
					}
					return nil
				},
			}
			var wg sync.WaitGroup
			errs := runLoops(&wg, loops)
			wg.Go(func() { // the CQ stays: its completions are polled
				for qp.State() != QPSReset {
					a.cq.Poll(make([]WC, 16))
				}
			})
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, qp.Destroy())
			waitWithin(t, &wg, time.Minute, "the loops after Destroy")
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			require.ErrorIs(t, qp.Destroy(), ErrClosed)
		})
	}
}
