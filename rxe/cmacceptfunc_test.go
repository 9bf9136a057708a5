package rxe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestAcceptFunc: AcceptFunc shows each request to its choose function
// (the dialer's address and RDMA CM port, private data, READ/atomic
// depths and retry counts) and answers it with what choose returns: the
// options of the accepted QP, or a REJ (consumer reject, with a
// *RejectError's private data) that reaches the dialer as its
// *RejectError while AcceptFunc reports an *AcceptError wrapping choose's
// error and the listener serves on.
func TestAcceptFunc(t *testing.T) {
	errNo := errors.New("not this one")
	for _, tc := range []struct {
		name string
		// answer is choose's answer, given the server's end.
		answer func(server *cmEnd) (CMOptions, error)
		// rejected: the request is refused, the dialer's REJ carrying
		// private data (its trailing zeros cut).
		rejected bool
		data     string
		// wantErr: what AcceptFunc's *AcceptError wraps (nil: accepted).
		wantErr  error
		counters CMListenerCounters
	}{
		{
			name: "accept",
			answer: func(s *cmEnd) (CMOptions, error) {
				return CMOptions{PD: s.pd, SendCQ: s.cq, PrivateData: []byte("chosen")}, nil
			},
			counters: CMListenerCounters{Accepted: 1},
		},
		{
			name: "reject with private data",
			answer: func(*cmEnd) (CMOptions, error) {
				return CMOptions{}, fmt.Errorf("refused: %w", &RejectError{PrivateData: []byte("go away")})
			},
			rejected: true, data: "go away",
			wantErr:  &RejectError{PrivateData: []byte("go away")},
			counters: CMListenerCounters{Declined: 1},
		},
		{
			name: "reject with the consumer reject reason given",
			answer: func(*cmEnd) (CMOptions, error) {
				return CMOptions{}, &RejectError{Reason: packet.RejConsumerReject, PrivateData: []byte("full")}
			},
			rejected: true, data: "full",
			counters: CMListenerCounters{Declined: 1},
		},
		{
			name:     "choose fails",
			answer:   func(*cmEnd) (CMOptions, error) { return CMOptions{}, errNo },
			rejected: true,
			wantErr:  errNo,
			counters: CMListenerCounters{Declined: 1},
		},
		{
			name: "private data a REJ cannot carry",
			answer: func(*cmEnd) (CMOptions, error) {
				return CMOptions{}, &RejectError{PrivateData: make([]byte, packet.REJPrivateDataSize+1)}
			},
			rejected: true,
			wantErr:  ErrInvalidArgument,
			counters: CMListenerCounters{Declined: 1},
		},
		{
			name: "a reason other than consumer reject",
			answer: func(*cmEnd) (CMOptions, error) {
				return CMOptions{}, &RejectError{Reason: packet.RejInvalidServiceID, PrivateData: []byte("x")}
			},
			rejected: true,
			wantErr:  ErrInvalidArgument,
			counters: CMListenerCounters{Declined: 1},
		},
		{
			name:     "options the device does not take",
			answer:   func(s *cmEnd) (CMOptions, error) { return CMOptions{SendCQ: s.cq}, nil }, // no PD
			rejected: true,
			wantErr:  ErrInvalidArgument,
			counters: CMListenerCounters{Failed: 1},
		},
		{
			name: "Prepare fails",
			answer: func(s *cmEnd) (CMOptions, error) {
				return CMOptions{PD: s.pd, SendCQ: s.cq, Prepare: func(*QP) error { return errNo }}, nil
			},
			rejected: true,
			wantErr:  errNo,
			counters: CMListenerCounters{Failed: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := listenCM(t, 7501, CMOptions{})
			da, server, l := s.da, s.server, s.l
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var seen *CMRequest
			acc := async(func() (*CMConn, error) {
				return l.AcceptFunc(ctx, func(r *CMRequest) (CMOptions, error) {
					seen = r
					return tc.answer(server)
				})
			})
			cc, derr := s.dial(ctx, CMOptions{PrivateData: []byte("asking"), ResponderResources: 3, InitiatorDepth: 5, RetryCnt: 6, RNRRetry: 4})
			r := <-acc
			require.NotNil(t, seen, "choose was called")
			require.Equal(t, netip.AddrPortFrom(da.Addr().Addr(), seen.Remote.Port()), seen.Remote)
			require.True(t, bytes.HasPrefix(seen.PrivateData, []byte("asking")))
			require.Len(t, seen.PrivateData, packet.REQPrivateDataSize-packet.CMIPHeaderSize)
			require.Equal(t, 3, seen.ResponderResources)
			require.Equal(t, 5, seen.InitiatorDepth)
			require.Equal(t, uint8(6), seen.RetryCount)
			require.Equal(t, uint8(4), seen.RNRRetryCount)
			if !tc.rejected {
				require.NoError(t, derr)
				require.NoError(t, r.err)
				require.Equal(t, seen.Remote, r.c.RemoteAddr)
				require.Equal(t, cc.LocalAddr, seen.Remote)
				require.True(t, bytes.HasPrefix(cc.PrivateData, []byte("chosen")), "the chosen options' REP")
				require.Equal(t, tc.counters, l.Counters())
				return
			}
			var rej *RejectError
			require.ErrorAs(t, derr, &rej)
			require.Equal(t, packet.RejConsumerReject, rej.Reason)
			require.Equal(t, tc.data, string(rej.PrivateData))
			var ae *AcceptError
			require.ErrorAs(t, r.err, &ae)
			require.Equal(t, seen.Remote, ae.Remote)
			if wantRej, ok := tc.wantErr.(*RejectError); ok {
				var got *RejectError
				require.ErrorAs(t, ae.Err, &got)
				require.Equal(t, wantRej.PrivateData, got.PrivateData)
			} else if tc.wantErr != nil {
				require.ErrorIs(t, r.err, tc.wantErr)
			}
			require.Equal(t, tc.counters, l.Counters())

			// The listener serves on: the next request is accepted.
			acc = async(func() (*CMConn, error) {
				return l.AcceptFunc(ctx, func(*CMRequest) (CMOptions, error) {
					return CMOptions{PD: server.pd, SendCQ: server.cq}, nil
				})
			})
			_, err := s.dial(ctx, CMOptions{})
			require.NoError(t, err)
			require.NoError(t, (<-acc).err)
		})
	}
}

// TestAcceptFuncEnds: AcceptFunc waiting for a request returns ctx's
// error once ctx ends and ErrClosed once the listener closes, without
// calling choose; a ctx that ends while choose runs rejects the request
// (consumer reject) instead of answering it with a REP; a listener closed
// while choose runs still answers that request, and the next call
// returns ErrClosed; a request queued when the listener closes gets a
// REJ (invalid service ID) and is never shown to choose.
func TestAcceptFuncEnds(t *testing.T) {
	never := func(*CMRequest) (CMOptions, error) {
		panic("choose called without a request")
	}
	t.Run("ctx ends while waiting", func(t *testing.T) {
		l := listenCM(t, 7502, CMOptions{}).l
		ctx, cancel := context.WithCancel(context.Background())
		res := async(func() (*CMConn, error) { return l.AcceptFunc(ctx, never) })
		cancel()
		select {
		case r := <-res:
			require.ErrorIs(t, r.err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("AcceptFunc still waits after its ctx ended")
		}
	})
	t.Run("listener closes while waiting", func(t *testing.T) {
		l := listenCM(t, 7503, CMOptions{}).l
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res := async(func() (*CMConn, error) { return l.AcceptFunc(ctx, never) })
		require.NoError(t, l.Close())
		r := <-res
		require.ErrorIs(t, r.err, ErrClosed)
	})
	t.Run("ctx ends while choose runs", func(t *testing.T) {
		s := listenCM(t, 7504, CMOptions{})
		server, l := s.server, s.l
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		actx, acancel := context.WithCancel(dctx)
		res := async(func() (*CMConn, error) {
			return l.AcceptFunc(actx, func(*CMRequest) (CMOptions, error) {
				acancel()
				return CMOptions{PD: server.pd, SendCQ: server.cq}, nil
			})
		})
		_, err := s.dial(dctx, CMOptions{})
		var rej *RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, packet.RejConsumerReject, rej.Reason)
		require.ErrorIs(t, (<-res).err, context.Canceled)
		require.Equal(t, CMListenerCounters{Abandoned: 1}, l.Counters())
	})
	t.Run("listener closes while choose runs", func(t *testing.T) {
		s := listenCM(t, 7505, CMOptions{})
		server, l := s.server, s.l
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var closeErr error
		res := async(func() (*CMConn, error) {
			return l.AcceptFunc(ctx, func(*CMRequest) (CMOptions, error) {
				closeErr = l.Close()
				return CMOptions{PD: server.pd, SendCQ: server.cq}, nil
			})
		})
		_, err := s.dial(ctx, CMOptions{})
		require.NoError(t, err, "the request being answered is accepted")
		require.NoError(t, (<-res).err)
		require.NoError(t, closeErr)
		_, err = l.AcceptFunc(ctx, never)
		require.ErrorIs(t, err, ErrClosed)
	})
	t.Run("listener closes with a request queued", func(t *testing.T) {
		s := listenCM(t, 7506, CMOptions{})
		db, l := s.db, s.l
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dial := s.dialAsync(ctx, CMOptions{})
		require.Eventually(t, func() bool { return len(l.reqs) == 1 }, 5*time.Second, time.Millisecond, "the request is queued")
		require.NoError(t, l.Close())
		g := db.gsiOf()
		g.mu.Lock()
		indexed := len(g.backlog)
		g.mu.Unlock()
		require.Zero(t, indexed, "the rejected request leaves the backlog's index")
		var rej *RejectError
		require.ErrorAs(t, (<-dial).err, &rej)
		require.Equal(t, packet.RejInvalidServiceID, rej.Reason)
		_, err := l.AcceptFunc(ctx, never)
		require.ErrorIs(t, err, ErrClosed)
	})
	t.Run("no choose function", func(t *testing.T) {
		l := listenCM(t, 7507, CMOptions{}).l
		_, err := l.AcceptFunc(context.Background(), nil)
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}

// TestAcceptFuncOptionsByPeer: one listener, two peers on addresses of
// their own; choose gives selective repeat (and the peer's offer of it,
// learned out of band) and its REP private data to the one that made the
// offer, and plain options to the other, whose connection stays
// go-back-N: a gorxe listener with PeerSelectiveRepeat in its options
// for every request would have made both selective repeat, and the plain
// peer would get hole reports it does not know.
func TestAcceptFuncOptionsByPeer(t *testing.T) {
	devs := make([]*Device, 3) // the server, the peer that offered selective repeat, another
	for port := 25791; port < 25891; port++ {
		var conns []netdev.Conn
		for i := range devs {
			c, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("127.0.14.%d", i+1)), uint16(port)), netdev.Options{BlockingWrite: true})
			if err != nil {
				break
			}
			conns = append(conns, c)
		}
		if len(conns) < len(devs) {
			for _, c := range conns {
				c.Close()
			}
			continue
		}
		for i, c := range conns {
			d, err := Open(c, Options{Name: fmt.Sprintf("cm-%d", i), OwnConn: true})
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			devs[i] = d
		}
		break
	}
	require.NotNil(t, devs[2], "no UDP port free on 127.0.14.1-3")
	srv, offered, other := devs[0], devs[1], devs[2]
	server := newCMEnd(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := listenEnd(t, srv, server, 7508, CMOptions{})
	choose := func(r *CMRequest) (CMOptions, error) {
		o := CMOptions{PD: server.pd, SendCQ: server.cq, SelectiveRepeat: true, PrivateData: []byte("plain")}
		if r.Remote.Addr() == offered.Addr().Addr() {
			o.PeerSelectiveRepeat, o.PrivateData = true, []byte("selective")
		}
		return o, nil
	}
	for _, tc := range []struct {
		dev   *Device
		sr    bool // the connection's QPs use selective repeat
		reply string
	}{
		{offered, true, "selective"},
		{other, false, "plain"},
		{offered, true, "selective"},
	} {
		end := newCMEnd(t, tc.dev)
		acc := async(func() (*CMConn, error) { return l.AcceptFunc(ctx, choose) })
		cc, err := Dial(ctx, tc.dev, l.Addr().String(), CMOptions{PD: end.pd, SendCQ: end.cq,
			SelectiveRepeat: tc.sr, PeerSelectiveRepeat: tc.sr})
		require.NoError(t, err)
		r := <-acc
		require.NoError(t, r.err)
		require.True(t, bytes.HasPrefix(cc.PrivateData, []byte(tc.reply)), "%s: %q", tc.dev.Addr(), cc.PrivateData[:12])
		require.Equal(t, tc.sr, r.c.QP.Query().SelectiveRepeat, "the server's QP for %s", tc.dev.Addr())
		require.Equal(t, tc.sr, cc.QP.Query().SelectiveRepeat, "the QP of %s", tc.dev.Addr())
		// The connection carries data.
		_, err = cc.QP.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: server.mr.Addr(), RKey: server.mr.RKey(),
			SGList: []SGE{end.mr.SGE(0, 4096)}})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitWC(t, end.cq).Status)
		cc.Close()
	}
	require.Equal(t, uint64(3), l.Counters().Accepted)
}

// TestCMPrepare: CMOptions.Prepare runs on the QP in INIT before the REQ
// or the REP goes out, so the receives it posts are there for the peer's
// first SEND, sent the moment Dial returns (before the RTU may have
// reached the accepting side): the SEND meets no RNR NAK, and a SEND from
// the accepting side as soon as its Accept returns finds the dialer's
// receive too. A Prepare error ends a Dial before any REQ goes out.
func TestCMPrepare(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prepare := func(e *cmEnd, id uint64) func(*QP) error {
		return func(qp *QP) error {
			if s := qp.State(); s != QPSInit {
				return fmt.Errorf("Prepare called in %v", s)
			}
			_, err := qp.PostRecv(RecvWR{ID: id, SGList: []SGE{e.mr.SGE(8192, 64)}})
			return err
		}
	}
	l := listenEnd(t, db, server, 7509, CMOptions{Prepare: prepare(server, 10)})
	acc := async(func() (*CMConn, error) { return l.Accept(ctx) })
	cc, err := Dial(ctx, da, l.Addr().String(), CMOptions{PD: client.pd, SendCQ: client.cq, Prepare: prepare(client, 20)})
	require.NoError(t, err)
	_, err = cc.QP.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{client.mr.SGE(0, 8)}})
	require.NoError(t, err)
	r := <-acc
	require.NoError(t, r.err)
	sc := r.c
	_, err = sc.QP.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{server.mr.SGE(0, 8)}})
	require.NoError(t, err)
	ids := map[uint64]WCStatus{}
	for range 2 {
		wc := waitWC(t, client.cq)
		ids[wc.ID] = wc.Status
	}
	for range 2 {
		wc := waitWC(t, server.cq)
		ids[wc.ID] = wc.Status
	}
	require.Equal(t, map[uint64]WCStatus{1: WCSuccess, 2: WCSuccess, 10: WCSuccess, 20: WCSuccess}, ids)
	require.Zero(t, cc.QP.Counters().Requester.RcvdRNRErr, "the client's SEND met no RNR NAK")
	require.Zero(t, sc.QP.Counters().Requester.RcvdRNRErr, "the server's SEND met no RNR NAK")

	// A Prepare error: no REQ.
	sent := da.GSICounters().SentMADs
	errNo := errors.New("no receives")
	_, err = Dial(ctx, da, l.Addr().String(), CMOptions{PD: client.pd, SendCQ: client.cq,
		Prepare: func(*QP) error { return errNo }})
	require.ErrorIs(t, err, errNo)
	require.Equal(t, sent, da.GSICounters().SentMADs, "no REQ went out")
}

// TestCMExplicitNoRdAtomic: with QPAttrMaxDestRdAtomic and
// QPAttrMaxQPRdAtomic in CMOptions.Explicit, zero responder resources
// and initiator depth are the values 0, as perftest's WRITE and SEND
// tests connect: the REQ and the REP carry 0/0, both QPs have
// max_rd_atomic and max_dest_rd_atomic 0, and WRITEs and SENDs run.
// Without them the zeros are the default 16.
func TestCMExplicitNoRdAtomic(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(fmt.Sprint("explicit=", explicit), func(t *testing.T) {
			s := listenCM(t, 7510, CMOptions{})
			client, server, l := s.client, s.server, s.l
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mask QPAttrMask
			want := 16
			if explicit {
				mask, want = QPAttrMaxDestRdAtomic|QPAttrMaxQPRdAtomic, 0
			}
			var req *CMRequest
			acc := async(func() (*CMConn, error) {
				return l.AcceptFunc(ctx, func(r *CMRequest) (CMOptions, error) {
					req = r
					return CMOptions{PD: server.pd, SendCQ: server.cq, Explicit: mask}, nil
				})
			})
			cc, err := s.dial(ctx, CMOptions{Explicit: mask})
			require.NoError(t, err)
			r := <-acc
			require.NoError(t, r.err)
			sc := r.c
			require.Equal(t, want, req.ResponderResources, "the REQ's responder resources")
			require.Equal(t, want, req.InitiatorDepth, "the REQ's initiator depth")
			for _, a := range []QPAttr{cc.QP.Query(), sc.QP.Query()} {
				require.Equal(t, want, a.MaxRdAtomic)
				require.Equal(t, want, a.MaxDestRdAtomic)
			}
			_, err = sc.QP.PostRecv(RecvWR{ID: 3, SGList: []SGE{server.mr.SGE(0, 4096)}})
			require.NoError(t, err)
			_, err = cc.QP.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: server.mr.Addr() + 8192, RKey: server.mr.RKey(),
				SGList: []SGE{client.mr.SGE(0, 4096)}})
			require.NoError(t, err)
			_, err = cc.QP.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{client.mr.SGE(0, 2048)}})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, client.cq).Status)
			require.Equal(t, WCSuccess, waitWC(t, client.cq).Status)
			wc := waitWC(t, server.cq)
			require.Equal(t, WCSuccess, wc.Status)
			require.Equal(t, uint32(2048), wc.ByteLen)
		})
	}
}
