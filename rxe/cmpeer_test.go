package rxe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestDisconnectUnansweredIsTimeout: a Disconnect whose DREQ the peer
// never answers (it went silent) ends once the DREQ's retries run out,
// with ErrCMTimeout, the connection ended all the same (Done closed, the
// QP in ERR), as kernel rdma_cm reports a DREQ that timed out
// (RDMA_CM_EVENT_DISCONNECTED with -ETIMEDOUT). It used to return nil,
// as if the peer had answered.
func TestDisconnectUnansweredIsTimeout(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// 4.096 µs · 2^8 ≈ 1 ms plus twice the packet life time, twice.
	cc, sc := cmPairWith(ctx, t, da, db, 27, CMOptions{CMResponseTimeout: 8, MaxCMRetries: 1})

	mb.mute.Store(true) // the server's DREP never comes
	start := time.Now()
	require.ErrorIs(t, cc.Disconnect(ctx), ErrCMTimeout)
	require.Less(t, time.Since(start), 5*time.Second)
	closedWithin(t, cc.Done(), "the client's connection")
	require.Equal(t, QPSErr, cc.QP.State())
	closedWithin(t, sc.Done(), "the server's connection (it got the DREQ)")
}

// TestCMOptionsOutOfRange: Dial and ListenCM refuse options wider than the
// REQ's or the QP's fields, before anything goes out. Dial used to send a
// REQ with them cut to their bits (a MaxCMRetries of 16 said 0 at the
// peer, while this side retried 16 times; a retry count of 8 said 0), or
// fail after the REQ with the QP's Modify, or blame missing resources.
func TestCMOptionsOutOfRange(t *testing.T) {
	da, _ := cmDevices(t, "pipe")
	a := newCMEnd(t, da)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for name, mut := range map[string]func(*CMOptions){
		"Timeout 32":            func(o *CMOptions) { o.Timeout = 32 },
		"CMResponseTimeout 32":  func(o *CMOptions) { o.CMResponseTimeout = 32 },
		"MaxCMRetries 16":       func(o *CMOptions) { o.MaxCMRetries = 16 },
		"RetryCnt 8":            func(o *CMOptions) { o.RetryCnt = 8 },
		"RNRRetry 8":            func(o *CMOptions) { o.RNRRetry = 8 },
		"ResponderResources -1": func(o *CMOptions) { o.ResponderResources = -1 },
		"InitiatorDepth -1":     func(o *CMOptions) { o.InitiatorDepth = -1 },
		"Explicit PATH_MTU":     func(o *CMOptions) { o.Explicit = QPAttrTimeout | QPAttrPathMTU },
		"Explicit MIN_RNR":      func(o *CMOptions) { o.Explicit = QPAttrMinRNRTimer },
	} {
		o := CMOptions{PD: a.pd, SendCQ: a.cq}
		mut(&o)
		_, err := Dial(ctx, da, "127.0.0.2:9", o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = da.ListenCM(9, o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	require.Zero(t, da.GSICounters().SentMADs, "no REQ went out")
}

// TestCMOptionsExplicitZero: with CMOptions.Explicit a zero Timeout,
// RetryCnt and RNRRetry are the values 0 (no local ACK timeout, no retry)
// in the REQ, at the dialing QP and, through the REQ and REP, at the
// accepted one; without it the same zeros are the defaults 14, 7 and 7.
func TestCMOptionsExplicitZero(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(fmt.Sprint("explicit=", explicit), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mask QPAttrMask
			if explicit {
				mask = QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry
			}
			s := listenCM(t, 31, CMOptions{Explicit: mask})
			client, server := s.client, s.server
			cc, sc := s.connect(ctx, t, CMOptions{Explicit: mask})
			timeout, retry := uint8(14), uint8(7)
			if explicit {
				timeout, retry = 0, 0
			}
			ca, sa := cc.QP.Query(), sc.QP.Query()
			require.Equal(t, timeout, ca.Timeout, "the dialing QP's local ACK timeout")
			require.Equal(t, retry, ca.RetryCnt, "the dialing QP's retry count")
			require.Equal(t, retry, ca.RNRRetry, "the dialing QP's RNR retry count, from the REP")
			require.Equal(t, timeout, sa.Timeout, "the listener's own timeout")
			require.Equal(t, retry, sa.RetryCnt, "the accepted QP's retry count, from the REQ")
			require.Equal(t, retry, sa.RNRRetry, "the accepted QP's RNR retry count, from the REQ")
			// The connection works with them: a WRITE completes.
			_, err := cc.QP.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: server.mr.Addr(), RKey: server.mr.RKey(),
				SGList: []SGE{{Addr: client.mr.Addr(), Length: 64, LKey: client.mr.LKey()}}})
			require.NoError(t, err)
			wc := waitWC(t, client.cq)
			require.Equal(t, WCSuccess, wc.Status)
		})
	}
}

// TestDisconnectRacingClose: a Disconnect that finds the device open and
// then its connection manager shut down (Device.Close ran in between: it
// sets closed, then shuts the CM down, which forgets every connection)
// returns ErrClosed, as it does when the device is closed before it; it
// used to take the forgotten connection for one the peer had ended and
// return nil.
func TestDisconnectRacingClose(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, _ := cmPair(ctx, t, da, db, 28)
	// The part of Close that Disconnect can meet after its check of
	// closed: the CM is shut down.
	da.gsiOf().shutdown()
	require.ErrorIs(t, cc.Disconnect(ctx), ErrClosed)
	closedWithin(t, cc.Done(), "the connection")
}

// TestDialAfterCMShutdown: a Dial or DialUD that finds the device open
// and then its connection manager shut down (Device.Close ran in
// between) returns ErrClosed before anything is sent, as it does once
// the device is closed: no REQ or SIDR_REQ leaves a device that is
// closing, and the agent, shut down, keeps nothing of the attempt.
func TestDialAfterCMShutdown(t *testing.T) {
	s := listenCM(t, 39, CMOptions{})
	da, client := s.da, s.client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	da.gsiOf().shutdown()
	sent := da.GSICounters().SentMADs
	_, err := s.dial(ctx, CMOptions{})
	require.ErrorIs(t, err, ErrClosed)
	_, err = DialUD(ctx, da, s.addr(), UDOptions{PD: client.pd})
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, sent, da.GSICounters().SentMADs, "no REQ or SIDR_REQ went out")
	require.Zero(t, cmAgentLen(da))
}

// sendMAD writes a CM MAD from QP1 of device from to QP1 of device to, as
// from's GSI would (the test's own MAD, beside from's CM).
func sendMAD(t *testing.T, from, to *Device, tid uint64, m packet.CMMessage) {
	t.Helper()
	var mad [packet.MADSize]byte
	packet.EncodeCM(mad[:], tid, m)
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN},
		DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
	ph := packet.PseudoHeader{Src: from.addr, Dst: to.addr, SrcPort: from.port, DstPort: to.port, IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, maxPacket)
	n, err := packet.Build(buf, &h, mad[:], &ph)
	require.NoError(t, err)
	_, err = from.vecs[0].conn.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: to.Addr(), Local: from.addr}})
	require.NoError(t, err)
}

// TestAcceptSkipsMalformedREQ: a REQ that RDMA CM cannot take — no valid
// IP header in its private data, or a transport other than RC for a
// listener of the TCP port space — is rejected (consumer reject, as
// kernel rdma_cm's cma_ib_req_handler refuses it before any consumer sees
// it) and never reaches Accept. Accept used to return it: an error for a
// missing IP header, which ends an accept loop, and for a UC REQ an RC QP
// and a REP, then a wait for an RTU that the RC-less peer would not send.
func TestAcceptSkipsMalformedREQ(t *testing.T) {
	const port = 29
	s := listenCM(t, port, CMOptions{})
	da, db, client, l := s.da, s.db, s.client, s.l
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ip := make([]byte, packet.CMIPHeaderSize)
	(&packet.CMIPHeader{SrcPort: 40000, Src: da.addr, Dst: db.addr}).Encode(ip)
	bad := []packet.REQ{
		{LocalCommID: 0x70, LocalQPN: 0x700}, // no IP header: its private data is zero
		{LocalCommID: 0x71, LocalQPN: 0x701, TransportServiceType: packet.CMTransportUC},
	}
	copy(bad[1].PrivateData[:], ip)
	for i := range bad {
		r := &bad[i]
		r.ServiceID, r.LocalCAGUID = packet.RDMACMServiceID(packet.RDMACMProtoTCP, port), 0xBAD
		r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries = 8, 8, 0
		sendMAD(t, da, db, uint64(0x70+i), r)
	}
	require.Eventually(t, func() bool { return db.GSICounters().RcvdMADs >= 2 }, 2*time.Second, time.Millisecond)

	dialed := make(chan *CMConn, 1)
	go func() {
		cc, err := Dial(ctx, da, fmt.Sprintf("%v:%d", db.Addr().Addr(), port), CMOptions{PD: client.pd, SendCQ: client.cq})
		if err != nil {
			t.Errorf("Dial: %v", err)
		}
		dialed <- cc
	}()
	sc, err := l.Accept(ctx)
	require.NoError(t, err, "Accept returns the good REQ's connection")
	cc := <-dialed
	require.NotNil(t, cc)
	require.Equal(t, cc.QP.QPN(), sc.Remote.QPN)
	require.Empty(t, l.reqs)
	waitCMConns(t, db, 1, "the malformed REQs left nothing behind")
}
