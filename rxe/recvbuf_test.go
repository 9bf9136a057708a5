package rxe

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/requester"
	"github.com/stretchr/testify/require"
)

func TestWindowFor(t *testing.T) {
	tests := []struct {
		buf, pmtu int
		c         charge
		want      int
	}{
		{0, 4096, chargeLinear, 0},                                           // unknown: the default
		{2 * 212992, 4096, chargeLinear, 425984 * 3 / 4 / (8192 + 256)},      // stock rmem_max, linear truesize 8 KiB
		{2 * 212992, 4096, chargePaged, 425984 * 3 / 4 / (4096 + 96 + 1280)}, // paged: the datagram and 1280
		{2 * 212992, 4096, chargeRuns, 425984 * 3 / 4 / (4096 + 96 + 640)},   // runs of two share 1280
		{2 * 212992, 1024, chargeLinear, 425984 * 3 / 4 / (2048 + 256)},      // 138 fit: above rxe's 128
		{4 * 212992, 1024, chargeLinear, announcedWindow},                    // 277 fit: capped at 256
		{2 * 212992 / 4, 1024, chargeLinear, 106496 * 3 / 4 / (2048 + 256)},
		{2 * 212992 / 4, 1024, chargePaged, 106496 * 3 / 4 / (1024 + 96 + 1280)},
		{2 * 212992 / 4, 1024, chargeRuns, 106496 * 3 / 4 / (1024 + 96 + 640)},
		{4096, 4096, chargeLinear, 8}, // never below 8
		{4096, 4096, chargePaged, 8},
		{4096, 4096, chargeRuns, 8},
		{128 << 20, 4096, chargeLinear, announcedWindow},
		{0, 4096, chargeRuns, 0},
		// An absurd announcement (a hostile or buggy peer's ConnInfo)
		// absorbs everything: the cap, not a product that overflowed.
		{1 << 62, 4096, chargeLinear, announcedWindow},
		{math.MaxInt / 2, 1024, chargeRuns, announcedWindow},
		{math.MaxInt, 4096, chargePaged, announcedWindow},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, windowFor(tc.buf, tc.pmtu, tc.c), "%d bytes, PMTU %d, charge %d", tc.buf, tc.pmtu, tc.c)
	}
	// The stock buffer's windows at 4 KiB, as docs/recovery.md gives them.
	require.Equal(t, []int{37, 58, 66}, []int{windowFor(425984, 4096, chargeLinear),
		windowFor(425984, 4096, chargePaged), windowFor(425984, 4096, chargeRuns)})
}

// smallBufDevice opens a device on a socket that asks for a stock
// rmem_max-sized receive buffer without SO_RCVBUFFORCE, as a process
// without CAP_NET_ADMIN gets, with Listen's socket options otherwise
// (UDP GSO and GRO unless noGSO).
func smallBufDevice(t *testing.T, ip, name string, noGSO bool) (*Device, *netdev.UDPConn) {
	t.Helper()
	o := SocketOptions(Options{NoGSO: noGSO, RecvBuffer: 212992, NoForceBuffers: true})
	o.SendBuffer = 212992
	c, err := netdev.ListenUDP(netip.MustParseAddrPort(ip+":0"), o)
	require.NoError(t, err)
	d, err := Open(c, Options{Name: name, OwnConn: true, CompVectors: 1})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, c
}

// TestSmallReceiveBufferPaced: two devices whose sockets got a stock
// 208 KiB receive buffer announce it in ConnInfo; each requester keeps its
// PSN window (and its READ parts) within what the peer's buffer and its
// own absorb, so 1 MiB WRITEs and READs arrive whole, and the sockets drop
// nothing that the requesters did not send twice.
func TestSmallReceiveBufferPaced(t *testing.T) {
	for _, tc := range []struct {
		op    WROpcode
		noGSO bool
	}{{WRRDMAWrite, false}, {WRRDMARead, false}, {WRRDMAWrite, true}, {WRRDMARead, true}} {
		op := tc.op
		t.Run(op.String()+map[bool]string{false: "/gso", true: "/nogso"}[tc.noGSO], func(t *testing.T) {
			da, ca := smallBufDevice(t, "127.0.0.1", "small-a", tc.noGSO)
			db, cb := smallBufDevice(t, "127.0.0.2", "small-b", tc.noGSO)
			a, b := newEnd(t, da, testBufSize), newEnd(t, db, testBufSize)
			ia, ib := a.qp.Info(1000), b.qp.Info(2000)
			require.Equal(t, ca.BufferSizes().Recv, ia.RecvBuffer)
			require.Equal(t, 1, ia.RecvSockets)
			require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096}))
			require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU4096}))
			// Loopback: the devices page their datagrams (in GSO runs
			// where the kernel has UDP GSO and GRO), and the window
			// counts packets at that size.
			c := da.chargeTo(netip.MustParseAddr("127.0.0.2"))
			require.NotEqual(t, chargeLinear, c, "sends to the peer paged")
			require.Equal(t, chargeLinear, da.chargeTo(netip.MustParseAddr("192.0.2.1")), "pages only on the loopback path")
			if ca.RunsTo(netip.MustParseAddr("127.0.0.2")) && ca.GRO() {
				require.Equal(t, chargeRuns, c, "GSO runs, received whole")
			} else {
				require.Equal(t, chargePaged, c)
			}
			if tc.noGSO {
				require.Equal(t, chargePaged, c, "without GSO every datagram is paged alone")
			}
			want := windowFor(min(ia.RecvBuffer, ib.RecvBuffer), 4096, c)
			require.Greater(t, want, windowFor(min(ia.RecvBuffer, ib.RecvBuffer), 4096, chargeLinear))
			require.Less(t, want, requester.DefaultWindow, "the test needs a buffer smaller than a full window")
			a.qp.mu.Lock()
			window, parts := a.qp.bufferLimits(4096)
			a.qp.mu.Unlock()
			require.Equal(t, want, window)
			require.Equal(t, want/2, parts, "READ parts of half the window: two in flight")

			src, dst := a, b
			if op == WRRDMARead {
				src, dst = b, a
			}
			fill(src.buf, 77)
			syncMem(a, b)
			const size, n = 1 << 20, 16
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range n {
				off := i % 8 * size
				_, err := a.qp.PostSend(SendWR{ID: uint64(i), Opcode: op, Flags: SendSignaled,
					SGList: []SGE{a.mr.SGE(off, size)}, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()})
				require.NoError(t, err)
				wc := make([]WC, 1)
				_, err = a.cq.Wait(ctx, wc)
				require.NoError(t, err)
				require.Equal(t, WCSuccess, wc[0].Status)
			}
			syncMem(a, b)
			require.True(t, bytes.Equal(src.buf[:8*size], dst.buf[:8*size]), "data differs")
			rc := a.qp.Counters().Requester
			require.LessOrEqual(t, rc.Recovery.Window, want)
			over := ca.Stats().RecvOverflows + cb.Stats().RecvOverflows
			t.Logf("window %d (bound %d), socket overflows %d, retransmits %d", rc.Recovery.Window, want, over, rc.Retransmits)
			// Each packet sent twice (a WRITE packet, a READ request asking
			// for up to a window of responses again) may meet its first copy
			// still in the buffer; nothing else may overflow it.
			require.LessOrEqual(t, over, rc.Retransmits*uint64(want), "the sockets overflowed beyond what was sent twice")
		})
	}
}

// TestPeerAnnouncingNothing: toward a peer that announces no receive
// buffer (a kernel rxe or perftest peer) the requester keeps the default
// window and sends every READ as one request: the wire is as before.
func TestPeerAnnouncingNothing(t *testing.T) {
	da, _ := smallBufDevice(t, "127.0.0.1", "quiet-a", false)
	db, _ := smallBufDevice(t, "127.0.0.2", "quiet-b", false)
	a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
	ia, ib := a.qp.Info(1), b.qp.Info(2)
	ib.RecvBuffer, ib.RecvSockets = 0, 0
	require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096}))
	a.qp.mu.Lock()
	window, parts := a.qp.bufferLimits(4096)
	a.qp.mu.Unlock()
	require.Zero(t, window, "default window")
	require.Zero(t, parts, "READs in one request")
	require.Equal(t, requester.DefaultWindow, a.qp.Counters().Requester.Recovery.Window)
	require.ErrorIs(t, a.qp.SetPeerReceiveBuffer(1<<20, 1), ErrInvalidState, "fixed once in RTS")
}

// TestPeerAnnouncingLargeBuffer: toward a gorxe peer whose announced
// buffer and ours absorb more than rxe's 128 PSNs, the window under
// selective repeat is what they absorb, up to announcedWindow; under
// go-back-N it stays 128. READs go whole in both.
func TestPeerAnnouncingLargeBuffer(t *testing.T) {
	for _, sr := range []bool{true, false} {
		t.Run(fmt.Sprintf("sr=%v", sr), func(t *testing.T) {
			a, b, _ := udpPair(t, Options{})
			if !sr {
				a, b = newEnd(t, a.dev, 1<<16), newEnd(t, b.dev, 1<<16)
				ia, ib := a.qp.Info(3), b.qp.Info(4)
				ia.SelectiveRepeat, ib.SelectiveRepeat = false, false
				require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096, NoSelectiveRepeat: true}))
				require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU4096, NoSelectiveRepeat: true}))
			}
			ia := a.qp.Info(1)
			c := a.dev.chargeTo(netip.MustParseAddr("127.0.0.2"))
			absorb := min(windowFor(ia.RecvBuffer, 4096, c), windowFor(b.qp.Info(2).RecvBuffer, 4096, c))
			if absorb < announcedWindow {
				t.Skipf("the receive buffers (%d bytes) absorb %d PSNs, fewer than %d: raise net.core.rmem_max or run as root", ia.RecvBuffer, absorb, announcedWindow)
			}
			want := requester.DefaultWindow
			if sr {
				want = announcedWindow
			}
			a.qp.mu.Lock()
			srOn := a.qp.selectiveRepeat().on
			window, parts := a.qp.bufferLimits(4096)
			a.qp.mu.Unlock()
			require.Equal(t, sr, srOn)
			require.Equal(t, want, window)
			require.Zero(t, parts, "READs in one request")
			require.Equal(t, want, a.qp.Counters().Requester.Recovery.Window)
		})
	}
}

// TestBufferCapWarning asks for more receive buffer than rmem_max allows,
// without forcing: the device says so once, naming the sysctl and the
// capability that lift the cap.
func TestBufferCapWarning(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	require.NoError(t, err)
	rmax, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	var got []string
	warnf := func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) }
	addr := netip.MustParseAddrPort("127.0.0.9:0") // Listen's port 0 is 4791
	d, err := Listen(addr, Options{Name: "capped", CompVectors: 2, RecvBuffer: 2*rmax + 4096, NoForceBuffers: true, Warnf: warnf})
	if err != nil {
		t.Skipf("cannot bind %v:4791 (in use by another test process?): %v", addr.Addr(), err)
	}
	defer d.Close()
	w := d.BufferCapWarning()
	require.Contains(t, w, "net.core.rmem_max")
	require.Contains(t, w, "CAP_NET_ADMIN")
	require.Equal(t, []string{w}, got, "Listen warned once")
	b, ok := d.SocketBuffers()
	require.True(t, ok)
	require.True(t, b.RecvCapped())
	require.Equal(t, 2*rmax, d.qpInfoBuffer())

	small, _ := smallBufDevice(t, "127.0.0.1", "small", false)
	require.Empty(t, small.BufferCapWarning(), "a request below the cap is no warning")
}

// qpInfoBuffer is the receive buffer Info announces.
func (d *Device) qpInfoBuffer() int {
	n, _ := d.recvBufferInfo()
	return n
}

// TestPeerBufferEndsWithReset: the receive buffer a peer announced belongs
// to that connection. A QP reset and brought up again with the plain verbs
// steps (toward a kernel rxe or NIC peer, which announces nothing) keeps
// the default window and whole READs, and its device no longer spins for
// it, as Options.ReceiveSpin says ("until it is reset").
func TestPeerBufferEndsWithReset(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
	ia, ib := a.qp.Info(1), b.qp.Info(2)
	ib.RecvBuffer, ib.RecvSockets = 64<<10, 1
	require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{MTU: MTU4096}))
	a.qp.mu.Lock()
	window, _ := a.qp.bufferLimits(4096)
	a.qp.mu.Unlock()
	require.Less(t, window, requester.DefaultWindow, "the test needs a window bound by the announced buffer")
	require.Equal(t, int32(1), da.spinQPs.Load())

	require.NoError(t, a.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
	require.Zero(t, da.spinQPs.Load())
	qp := a.qp
	require.NoError(t, qp.Modify(&QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite | AccessRemoteRead},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTR, AH: AH{DGID: ib.GID, UDPPort: ib.UDPPort, HopLimit: 64}, PathMTU: MTU4096,
		DestQPN: ib.QPN, RQPSN: ib.PSN, MaxDestRdAtomic: 16, MinRNRTimer: 12},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	require.NoError(t, qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
		QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	qp.mu.Lock()
	window, parts := qp.bufferLimits(4096)
	qp.mu.Unlock()
	require.Zero(t, window, "default window: the new peer announced nothing")
	require.Zero(t, parts, "READs in one request")
	require.Equal(t, requester.DefaultWindow, qp.Counters().Requester.Recovery.Window)
	require.Zero(t, da.spinQPs.Load(), "no QP bound by an announced buffer")
}
