package rxe

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// cmDevices returns two devices on the same UDP port (as RoCE peers are:
// CM MADs go to the device's own port): over the pipe, 127.0.0.1:4791 and
// 127.0.0.2:4791; over loopback UDP, two addresses of 127.0.13.0/24 on a
// port of this test's own.
func cmDevices(t *testing.T, kind string) (*Device, *Device) {
	var ca, cb netdev.Conn
	switch kind {
	case "pipe":
		ca, cb = netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	case "udp":
		var err error
		for port := 24791; port < 24891; port++ {
			if ca, err = netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.13.1"), uint16(port)), netdev.Options{BlockingWrite: true}); err != nil {
				continue
			}
			if cb, err = netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.13.2"), uint16(port)), netdev.Options{BlockingWrite: true}); err != nil {
				ca.Close()
				continue
			}
			break
		}
		require.NoError(t, err)
	}
	return cmDevicesOn(t, ca, cb)
}

// cmDevicesOn opens the two devices of cmDevices on ca and cb.
func cmDevicesOn(t *testing.T, ca, cb netdev.Conn) (*Device, *Device) {
	return openPairWith(t, ca, cb, Options{LinkMTU: 9000}, "cm-a", "cm-b")
}

type cmEnd struct {
	pd  *PD
	cq  *CQ
	mr  *MR
	buf []byte
}

func newCMEnd(t *testing.T, d *Device) *cmEnd {
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(256, -1)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	require.NoError(t, err)
	return &cmEnd{pd, cq, mr, buf}
}

// cmListening is a listener on one device, with a cmEnd on it that serves
// the accepted QPs and one on a second device that dials.
type cmListening struct {
	da, db         *Device
	client, server *cmEnd
	l              *CMListener
}

// listenCM opens the two devices of cmDevices(t, "pipe") and listens on
// the second's port with listen's options (listenOn).
func listenCM(t *testing.T, port uint16, listen CMOptions) *cmListening {
	t.Helper()
	da, db := cmDevices(t, "pipe")
	return listenOn(t, da, db, port, listen)
}

// listenOn makes a cmEnd on da and on db and listens on db's port with
// listen's options, its PD and SendCQ db's end's (listenEnd).
func listenOn(t *testing.T, da, db *Device, port uint16, listen CMOptions) *cmListening {
	t.Helper()
	s := &cmListening{da: da, db: db, client: newCMEnd(t, da), server: newCMEnd(t, db)}
	s.l = listenEnd(t, db, s.server, port, listen)
	return s
}

// listenEnd listens on d's port with listen's options, its PD and SendCQ
// e's; the listener is closed at the test's end.
func listenEnd(t *testing.T, d *Device, e *cmEnd, port uint16, listen CMOptions) *CMListener {
	t.Helper()
	listen.PD, listen.SendCQ = e.pd, e.cq
	l, err := d.ListenCM(port, listen)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() }) // ErrClosed when the test closed it
	return l
}

// addr is the listener's address as Dial takes it.
func (s *cmListening) addr() string { return s.l.Addr().String() }

// dial dials the listener from da with dial's options, its PD and SendCQ
// the client end's.
func (s *cmListening) dial(ctx context.Context, dial CMOptions) (*CMConn, error) {
	dial.PD, dial.SendCQ = s.client.pd, s.client.cq
	return Dial(ctx, s.da, s.addr(), dial)
}

// dialAsync is dial on its own goroutine; its result comes on the
// channel.
func (s *cmListening) dialAsync(ctx context.Context, dial CMOptions) <-chan connResult {
	return async(func() (*CMConn, error) { return s.dial(ctx, dial) })
}

// connect dials the listener (dial) while an Accept waits, requires both
// to succeed before ctx ends, and returns the dialing and the accepted
// connection.
func (s *cmListening) connect(ctx context.Context, t *testing.T, dial CMOptions) (cc, sc *CMConn) {
	t.Helper()
	acc := async(func() (*CMConn, error) { return s.l.Accept(ctx) })
	cc, err := s.dial(ctx, dial)
	require.NoError(t, err)
	return cc, awaitConn(ctx, t, acc, "Accept")
}

func TestDialAccept(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			da, db := cmDevices(t, kind)
			s := listenOn(t, da, db, 7471, CMOptions{PrivateData: []byte("welcome")})
			client, server := s.client, s.server
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cc, sc := s.connect(ctx, t, CMOptions{PrivateData: []byte("hello")})
			require.Equal(t, QPSRTS, cc.QP.State())
			require.Equal(t, QPSRTS, sc.QP.State())
			require.Equal(t, sc.QP.QPN(), cc.Remote.QPN)
			require.Equal(t, cc.QP.QPN(), sc.Remote.QPN)
			require.Equal(t, cc.Local.PSN, sc.Remote.PSN)
			require.Equal(t, sc.Local.PSN, cc.Remote.PSN)
			require.Equal(t, []byte("welcome"), cc.PrivateData[:7])
			require.Equal(t, []byte("hello"), sc.PrivateData[:5])
			require.Equal(t, uint16(7471), cc.RemoteAddr.Port())
			require.Equal(t, cc.LocalAddr, sc.RemoteAddr)

			// A SEND from the client, an RDMA WRITE from the server.
			copy(client.buf, "ping")
			_, err := sc.QP.PostRecv(RecvWR{ID: 1, SGList: []SGE{{Addr: server.mr.Addr(), Length: 64, LKey: server.mr.LKey()}}})
			require.NoError(t, err)
			_, err = cc.QP.PostSend(SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: client.mr.Addr(), Length: 4, LKey: client.mr.LKey()}}})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, client.cq).Status)
			require.Equal(t, uint32(4), waitWC(t, server.cq).ByteLen)
			copy(server.buf[1024:], "pong")
			_, err = sc.QP.PostSend(SendWR{ID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: client.mr.Addr() + 512, RKey: client.mr.RKey(),
				SGList: []SGE{{Addr: server.mr.Addr() + 1024, Length: 4, LKey: server.mr.LKey()}}})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, server.cq).Status)
			cc.QP.Query()
			sc.QP.Query()
			require.Equal(t, "pong", string(client.buf[512:516]))
			require.Equal(t, "ping", string(server.buf[:4]))

			require.NoError(t, cc.Disconnect(ctx))
			select {
			case <-sc.Done():
			case <-ctx.Done():
				t.Fatal("the server did not see the disconnect")
			}
			require.Equal(t, QPSErr, sc.QP.State())
			require.Equal(t, QPSErr, cc.QP.State())
		})
	}
}

func TestDialErrors(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client, server := newCMEnd(t, da), newCMEnd(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := CMOptions{PD: client.pd, SendCQ: client.cq}

	// Nobody listens on the port: refused with "invalid service ID".
	_, err := Dial(ctx, da, "127.0.0.2:9", opts)
	var rej *RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, packet.RejInvalidServiceID, rej.Reason)

	// A listener that closes refuses too.
	l, err := db.ListenCM(9, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	_, err = db.ListenCM(9, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.ErrorIs(t, err, ErrInvalidArgument, "one listener per port")
	require.NoError(t, l.Close())
	_, err = l.Accept(ctx)
	require.ErrorIs(t, err, ErrClosed)
	_, err = Dial(ctx, da, "127.0.0.2:9", opts)
	require.ErrorAs(t, err, &rej)

	// No CM at that address: the REQ is never answered.
	fast := opts
	fast.CMResponseTimeout, fast.MaxCMRetries = 8, 1
	_, err = Dial(ctx, da, "127.0.0.9:9", fast)
	require.ErrorIs(t, err, ErrCMTimeout)
	short, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel2()
	_, err = Dial(short, da, "127.0.0.9:9", opts)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = Dial(ctx, da, "[2001:db8::1]:9", opts)
	require.ErrorIs(t, err, ErrUnreachable)
	_, err = Dial(ctx, da, "127.0.0.2", opts)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Dial(ctx, da, "127.0.0.2:9", CMOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)

	l, err = db.ListenCM(10, CMOptions{PD: server.pd, SendCQ: server.cq})
	require.NoError(t, err)
	short, cancel3 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel3()
	_, err = l.Accept(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, l.Close())
	require.True(t, errors.Is(l.Close(), ErrClosed))
	gc := db.GSICounters()
	require.NotZero(t, gc.RcvdMADs)
	require.Equal(t, uint64(2), gc.CM.RejectsSent, "two REQs for a port nobody listened on")
}

// TestServerDisconnects: the passive side's DREQ ends the client's
// connection: its Done closes and its QP is in ERR.
func TestServerDisconnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc, sc := listenCM(t, 1, CMOptions{}).connect(ctx, t, CMOptions{})
	require.NoError(t, sc.Disconnect(ctx))
	select {
	case <-cc.Done():
	case <-ctx.Done():
		t.Fatal("the client did not see the disconnect")
	}
	require.Equal(t, QPSErr, cc.QP.State())
}

// TestGSIDropsWrongQKey: QP1 takes only datagrams with the GSI Q_Key; a
// UD QP cannot send with it (it is controlled: the sender's own Q_Key goes
// out instead).
func TestGSIDropsWrongQKey(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	a := newTypedEnd(t, da, QPTypeUD)
	readyUD(t, a, 0x1234)
	ah, err := a.pd.CreateAH(AH{DGID: db.GID()})
	require.NoError(t, err)
	for _, qkey := range []uint32{0x1234, packet.GSIQKey} {
		_, err = a.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: packet.GSIQPN, RemoteQKey: qkey,
			SGList: []SGE{{Addr: a.mr.Addr(), Length: packet.MADSize, LKey: a.mr.LKey()}}})
		require.NoError(t, err)
		require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	}
	require.Eventually(t, func() bool { return db.GSICounters().BadQKey == 2 }, 5*time.Second, time.Millisecond)
	require.Zero(t, db.GSICounters().RcvdMADs)
}

// TestCMOtherDevicesResources: Dial and ListenCM refuse a PD, CQ or SRQ of
// another device (the QP would live there while the CM announces this
// device's GID).
func TestCMOtherDevicesResources(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	a, b := newCMEnd(t, da), newCMEnd(t, db)
	srqB, err := b.pd.CreateSRQ(SRQAttr{MaxWR: 16, MaxSGE: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for name, o := range map[string]CMOptions{
		"PD":      {PD: b.pd, SendCQ: b.cq},
		"send CQ": {PD: a.pd, SendCQ: b.cq},
		"recv CQ": {PD: a.pd, SendCQ: a.cq, RecvCQ: b.cq},
		"SRQ":     {PD: a.pd, SendCQ: a.cq, SRQ: srqB},
	} {
		_, err := Dial(ctx, da, "127.0.0.2:9", o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = da.ListenCM(9, o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	require.Zero(t, da.GSICounters().SentMADs, "no REQ went out")
	l, err := da.ListenCM(9, CMOptions{PD: a.pd, SendCQ: a.cq})
	require.NoError(t, err, "the refused listeners took no port")
	require.NoError(t, l.Close())
}

// TestAcceptGivesUpAfterREP: an Accept whose ctx ends while it waits for
// the RTU (the client's RTU is lost) rejects the connection, so the
// client's Dial, which already succeeded, sees its connection end.
func TestAcceptGivesUpAfterREP(t *testing.T) {
	ca, cb := connPair(t, "pipe")
	lc := &lossyConn{Conn: ca, drop: func(b []byte) bool {
		p, err := packet.Parse(b)
		if err != nil || p.BTH().DestQP() != packet.GSIQPN || len(p.Payload()) < packet.MADSize {
			return false
		}
		h, _, err := packet.DecodeCMHeader(p.Payload())
		return err == nil && packet.CMAttr(h.AttrID) == packet.AttrRTU
	}}
	da, db := openPair(t, lc, cb)
	s := listenOn(t, da, db, 22, CMOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	acc := make(chan error, 1)
	go func() {
		_, err := s.l.Accept(actx)
		acc <- err
	}()
	cc, err := s.dial(ctx, CMOptions{})
	require.NoError(t, err, "the client sent its RTU (lost) and is up")
	acancel() // the server has sent its REP and waits for the RTU
	require.ErrorIs(t, <-acc, context.Canceled)
	select {
	case <-cc.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the client's connection did not end")
	}
	require.Equal(t, QPSErr, cc.QP.State())
}
