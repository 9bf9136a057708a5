package rxe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestReceiveSpin checks Options.ReceiveSpin over loopback UDP. A spin
// longer than the test, once on, reads every WRITE after the first: the
// WRITE reaches the responder while its receive goroutine still spins
// after the previous batch (Counters.SpinPkts). It is on when the
// device's receive buffer is too small for a 128-PSN window and after a
// sign of loss; it reads nothing in a loss-free run with a large buffer,
// with the spin off, or once a CQ of the device is busy-polled (its
// caller reads the socket itself).
func TestReceiveSpin(t *testing.T) {
	const writes = 20
	for _, tc := range []struct {
		name      string
		spin      time.Duration
		recvBuf   int  // Options.RecvBuffer: 0 is the default 64 MiB
		loss      bool // a loss signal (Device.noteLoss) before the WRITEs
		busyPoll  bool // busy-poll the responder's CQ once before the WRITEs
		spinsSeen bool
	}{
		{name: "small buffer", spin: time.Minute, recvBuf: 128 << 10, spinsSeen: true},
		{name: "after a loss", spin: time.Minute, loss: true, spinsSeen: true},
		{name: "loss-free", spin: time.Minute},
		{name: "off", spin: -1, recvBuf: 128 << 10, loss: true},
		{name: "busy-polled", spin: time.Minute, recvBuf: 128 << 10, loss: true, busyPoll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, z, _ := udpPair(t, Options{ReceiveSpin: tc.spin, RecvBuffer: tc.recvBuf})
			if tc.name == "loss-free" && z.dev.spinBound.Load() {
				t.Skip("the kernel capped the 64 MiB receive buffer (net.core.rmem_max, no CAP_NET_ADMIN): the device spins as for a small buffer")
			}
			if tc.loss {
				z.dev.noteLoss(time.Now().Add(time.Minute)) // outlasts the test
			}
			if tc.busyPoll {
				require.Zero(t, z.cq.BusyPoll(make([]WC, 1)))
			}
			for i := range writes {
				_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGList: []SGE{a.mr.SGE(0, 64)}, RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()})
				require.NoError(t, err)
				wc := waitWC(t, a.cq)
				require.Equal(t, WCSuccess, wc.Status)
			}
			got := z.dev.Counters().SpinPkts
			if tc.name == "loss-free" {
				// A recovery timer's probe or a WRITE sent again on a
				// loaded machine is a sign of loss too, after which the
				// spin may read the WRITEs: the run was not loss-free.
				if resent := a.qp.Counters().Requester.Retransmits + z.qp.Counters().Responder.DuplicateRequest; resent > 0 {
					t.Skipf("%d request packets were sent or received again (a loaded machine): not a loss-free run", resent)
				}
			}
			if tc.spinsSeen {
				// Every packet z receives is a WRITE or one a's requester
				// sent again (a recovery timer's probe on a loaded
				// machine), so the spin reads at most that many.
				resent := a.qp.Counters().Requester.Retransmits
				require.GreaterOrEqual(t, got, uint64(writes/2), "WRITEs the responder's spin read")
				require.LessOrEqual(t, got, uint64(writes)+resent, "WRITEs and resent packets (%d) the responder's spin read", resent)
			} else {
				require.Zero(t, got, "WRITEs the responder's spin read")
			}
		})
	}
}

// TestReceiveSpinDefault checks ReceiveSpin's zero value and its off
// switch.
func TestReceiveSpinDefault(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{0, DefaultReceiveSpin},
		{-1, 0},
		{5 * time.Microsecond, 5 * time.Microsecond},
	} {
		require.Equal(t, tc.want, Options{ReceiveSpin: tc.in}.receiveSpin(), "ReceiveSpin %v", tc.in)
	}
}

// TestNoteLossHold checks how long a sign of loss keeps the spin on
// (lossSpinHold), and that a later sign extends it while an earlier one
// does not shorten it.
func TestNoteLossHold(t *testing.T) {
	now := time.Now()
	d := &Device{epoch: now.Add(-time.Second)}
	require.False(t, d.wantSpin(now), "no sign of loss")
	d.noteLoss(now)
	require.True(t, d.wantSpin(now), "a sign of loss")
	require.True(t, d.wantSpin(now.Add(lossSpinHold-time.Nanosecond)), "within the hold")
	require.False(t, d.wantSpin(now.Add(lossSpinHold)), "after the hold")
	d.noteLoss(now.Add(time.Second))
	d.noteLoss(now) // late: leaves the later hold alone
	require.True(t, d.wantSpin(now.Add(time.Second+lossSpinHold-time.Nanosecond)), "the later sign's hold")
	d.spinBound.Store(true)
	require.True(t, d.wantSpin(now.Add(time.Hour)), "a small buffer: for good")
}

// TestDuplicateRequestStartsSpin checks the responder's sign of a loss:
// a request that arrives again (a re-read of lost READ responses shows
// only so) starts the spin of the device that received it.
func TestDuplicateRequestStartsSpin(t *testing.T) {
	// No recovery timer and a 1 s ACK timeout: on a loaded host a probe
	// or a retransmission of the first WRITE would reach z as a duplicate
	// and start its spin before the test sends its own.
	a, z, _ := udpPairWith(t, Options{Recovery: RecoveryConfig{Off: true}},
		ConnectOptions{MTU: MTU4096, Timeout: testutil.QPTimeout, Explicit: QPAttrTimeout})
	if z.dev.spinBound.Load() {
		t.Skip("the kernel capped the 64 MiB receive buffer (net.core.rmem_max, no CAP_NET_ADMIN): the device spins as for a small buffer")
	}
	_, err := a.qp.PostSend(SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled,
		SGList: []SGE{a.mr.SGE(0, 64)}, RemoteAddr: z.mr.Addr(), RKey: z.mr.RKey()})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
	require.False(t, z.dev.wantSpin(time.Now()), "a loss-free WRITE")

	// The WRITE again, from another port of a's address (a responder
	// checks the peer's IP address only, rxe check_addr).
	c, err := netdev.ListenUDP(netip.AddrPortFrom(a.dev.addr, 0), netdev.Options{BlockingWrite: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	z.qp.mu.Lock()
	psn := z.qp.resp.EPSN().Add(-1)
	z.qp.mu.Unlock()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCRDMAWriteOnly, PKey: packet.DefaultPKey, DestQP: z.qp.qpn, PSN: psn, AckReq: true},
		RETH: packet.RETHFields{VA: z.mr.Addr(), RKey: z.mr.RKey(), DMALen: 64}}
	from := c.LocalAddr()
	ph := packet.PseudoHeader{Src: from.Addr(), Dst: z.dev.addr, SrcPort: from.Port(), DstPort: z.dev.port, IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, 256)
	n, err := packet.Build(buf, &h, make([]byte, 64), &ph)
	require.NoError(t, err)
	// The spin holds for lossSpinHold from the duplicate's arrival; a
	// loaded host may run this goroutine later than that, so the hold is
	// checked at a moment it must cover: just before the send (the spin
	// was off then, checked above, and only the duplicate can set it).
	sent := time.Now()
	_, err = c.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: z.dev.Addr()}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return z.qp.Counters().Responder.DuplicateRequest == 1 },
		testutil.Bound(), time.Millisecond, "the duplicate WRITE reaches the responder")
	require.True(t, z.dev.wantSpin(sent), "a request received again")
}

// TestWindowBoundSpinEndsWithTheQP: a QP whose peer announces a receive
// buffer too small for a 128-PSN window makes its device spin while the
// QP's requester lives; once the QP is destroyed or reset, a device whose
// own buffer is large stops spinning (it did for good before).
func TestWindowBoundSpinEndsWithTheQP(t *testing.T) {
	var devs [2]*Device
	for i, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		c, err := netdev.ListenUDP(netip.MustParseAddrPort(addr), SocketOptions(Options{}))
		require.NoError(t, err)
		d, err := Open(c, Options{Name: "wb", LinkMTU: 9000, OwnConn: true})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	if devs[0].spinBound.Load() {
		t.Skip("the kernel capped the 64 MiB receive buffer (net.core.rmem_max, no CAP_NET_ADMIN): the device spins for good")
	}
	connectSmall := func() *end {
		a, b := newEnd(t, devs[0], testBufSize), newEnd(t, devs[1], testBufSize)
		ia, ib := a.qp.Info(1), b.qp.Info(2)
		ib.RecvBuffer, ib.RecvSockets = 128<<10, 1 // a peer with a small buffer
		require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096}))
		return a
	}
	now := time.Now()
	require.False(t, devs[0].wantSpin(now))
	a := connectSmall()
	require.True(t, devs[0].wantSpin(now), "a QP bound by its peer's buffer")
	a2 := connectSmall()
	require.Equal(t, int32(2), devs[0].spinQPs.Load())
	require.NoError(t, a.qp.Destroy())
	require.True(t, devs[0].wantSpin(now), "the other QP still is")
	require.NoError(t, a2.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
	require.Zero(t, devs[0].spinQPs.Load())
	require.False(t, devs[0].wantSpin(now), "no QP bound by a buffer")
	require.NoError(t, a2.qp.Destroy())
	require.Zero(t, devs[0].spinQPs.Load(), "destroying a reset QP counts nothing twice")
}
