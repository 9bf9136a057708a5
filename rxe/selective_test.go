package rxe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/responder"
	"github.com/stretchr/testify/require"
)

func TestNegotiateSR(t *testing.T) {
	on := ConnInfo{SelectiveRepeat: true, OOOLimit: 1 << 20}
	off := ConnInfo{}
	for _, tc := range []struct {
		name          string
		local, remote ConnInfo
		refuse        bool
		want          bool
		err           bool
	}{
		{"both offer", on, on, false, true, false},
		{"peer offers nothing", on, off, false, false, false},
		{"we offer nothing", off, on, false, false, false},
		{"neither", off, off, false, false, false},
		{"refused, offer withdrawn", off, on, true, false, false},
		{"refused but still offered", on, on, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := negotiateSR(tc.local, tc.remote, tc.refuse)
			if tc.err {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, a.SelectiveRepeat)
			if tc.want {
				require.Equal(t, tc.local.OOOLimit, a.OOOLimit, "our responder's bound is the one we announced")
				require.Equal(t, tc.remote.OOOLimit, a.PeerOOOLimit, "our requester's bound is the one the peer announced")
			}
		})
	}
}

// TestConnectSelectiveRepeat: Connect turns selective repeat on only when
// both ConnInfos offer it, and both ends decide alike.
func TestConnectSelectiveRepeat(t *testing.T) {
	for _, tc := range []struct {
		name         string
		clearA       bool // a withdraws its offer (and refuses)
		kernelPeerB  bool // b's info is what a peer that knows nothing sends
		want         bool
		wantOOOLimit int
	}{
		{"gorxe to gorxe", false, false, true, responder.DefaultOOOLimit},
		{"one side off", true, false, false, 0},
		{"peer offers nothing", false, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			a, b := newEnd(t, da, 1<<16), newEnd(t, db, 1<<16)
			ia, ib := a.qp.Info(1), b.qp.Info(2)
			require.True(t, ia.SelectiveRepeat, "an RC QP offers selective repeat")
			require.Equal(t, responder.DefaultOOOLimit, ia.OOOLimit)
			oa := ConnectOptions{MTU: MTU1024}
			if tc.clearA {
				ia.SelectiveRepeat = false
				oa.NoSelectiveRepeat = true
			}
			if tc.kernelPeerB {
				ib = ConnInfo{GID: ib.GID, UDPPort: ib.UDPPort, QPN: ib.QPN, PSN: ib.PSN, MTU: ib.MTU, MaxRdAtomic: ib.MaxRdAtomic}
			}
			require.NoError(t, a.qp.Connect(ia, ib, oa))
			require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{MTU: MTU1024}))
			qa, qb := a.qp.Query(), b.qp.Query()
			require.Equal(t, tc.want, qa.SelectiveRepeat)
			require.Equal(t, tc.want, qb.SelectiveRepeat)
			require.Equal(t, tc.wantOOOLimit, qa.OOOLimit)
			// The connection works either way.
			copy(a.buf, "selective")
			_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{a.mr.SGE(0, 9)},
				RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
			syncMem(a, b)
			require.Equal(t, "selective", string(b.buf[100:109]))
		})
	}
}

// TestConnectRefusedButOffered: refusing while the info given to the peer
// still offers is an error, not a silent mismatch.
func TestConnectRefusedButOffered(t *testing.T) {
	da, db := newDevices(t, "pipe")
	a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
	err := a.qp.Connect(a.qp.Info(1), b.qp.Info(2), ConnectOptions{NoSelectiveRepeat: true})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "NoSelectiveRepeat")
	require.Equal(t, QPSReset, a.qp.State())
}

// TestModifySelectiveRepeat: the attribute is taken until RTR, checked,
// and returned by Query; UC QPs and later transitions refuse it.
func TestModifySelectiveRepeat(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	a := newEnd(t, da, 4096)
	init := QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite, SelectiveRepeat: true, OOOLimit: -1}
	mask := QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags | QPAttrSelectiveRepeat
	require.ErrorIs(t, a.qp.Modify(&init, mask), ErrInvalidArgument)
	init.OOOLimit = MaxOOOLimit + 1
	require.ErrorIs(t, a.qp.Modify(&init, mask), ErrInvalidArgument)
	init.OOOLimit = 1 << 20
	init.PeerOOOLimit = -1
	require.ErrorIs(t, a.qp.Modify(&init, mask), ErrInvalidArgument)
	init.PeerOOOLimit = 2 << 20
	require.NoError(t, a.qp.Modify(&init, mask))
	q := a.qp.Query()
	require.True(t, q.SelectiveRepeat)
	require.Equal(t, 1<<20, q.OOOLimit)
	require.Equal(t, 2<<20, q.PeerOOOLimit)
	require.Equal(t, 1<<20, a.qp.Info(0).OOOLimit, "Info announces the bound set")
	require.NoError(t, a.qp.Modify(&QPAttr{SelectiveRepeat: false}, QPAttrSelectiveRepeat), "INIT to INIT")
	require.False(t, a.qp.Query().SelectiveRepeat)
	require.Equal(t, "STATE|SELECTIVE_REPEAT", (QPAttrState | QPAttrSelectiveRepeat).String())

	pd, err := da.AllocPD()
	require.NoError(t, err)
	uc, err := pd.CreateQP(QPInitAttr{Type: QPTypeUC, SendCQ: a.cq, RecvCQ: a.cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	require.NoError(t, err)
	require.ErrorIs(t, uc.Modify(&QPAttr{State: QPSInit, Port: 1, SelectiveRepeat: true}, mask), ErrInvalidArgument)
	require.False(t, uc.Info(0).SelectiveRepeat, "a UC QP offers nothing")
}

// TestCMSelectiveRepeat: over the CM, selective repeat is used only when
// the application gives both offers (learned out of band); by default it
// is off.
func TestCMSelectiveRepeat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv, cli CMOptions
		want     bool
	}{
		{"default", CMOptions{}, CMOptions{}, false},
		{"both offered out of band", CMOptions{SelectiveRepeat: true, PeerSelectiveRepeat: true},
			CMOptions{SelectiveRepeat: true, PeerSelectiveRepeat: true}, true},
		{"the client does not offer", CMOptions{SelectiveRepeat: true, PeerSelectiveRepeat: false},
			CMOptions{SelectiveRepeat: false, PeerSelectiveRepeat: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cc, sc := listenCM(t, 7472, tc.srv).connect(ctx, t, tc.cli)
			require.Equal(t, tc.want, cc.QP.Query().SelectiveRepeat)
			require.Equal(t, tc.want, sc.QP.Query().SelectiveRepeat)
			require.Equal(t, tc.cli.SelectiveRepeat, cc.Local.SelectiveRepeat)
			require.Equal(t, tc.cli.PeerSelectiveRepeat, cc.Remote.SelectiveRepeat)
		})
	}
}

// TestDeviceLossTotals: a device's loss counters sum its QPs' and keep
// those of a QP once it is destroyed.
func TestDeviceLossTotals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := faultyPairSR(t, 3, []string{"drop=5%"}, false)
		for i := range 20 {
			soakOne(t, a, b, WRRDMAWrite, 20000, uint64(i))
		}
		qa := a.qp.Counters().Loss()
		// A go-back-N retry whose first packet went twice (RetryDoubled)
		// recovers a lost resend without a timer, so the timers need not
		// have fired; some recovery counter must have moved.
		require.Positive(t, qa.RTOExpiries+qa.IBTimeouts+qa.RetryDoubled, "the losses were recovered by a timer or a doubled retry")
		require.Equal(t, qa, a.dev.Counters().Loss, "one QP: the device's totals are its counters")
		require.NoError(t, a.qp.Destroy())
		got := a.dev.Counters().Loss
		qa.SRTT = 0
		require.Equal(t, qa, got, "a destroyed QP's counters stay in the totals")
	})
}

// TestOOOFloodBound: a hostile peer floods a QP with future PSNs; the
// responder's out-of-order buffer never holds more than the bound the QP
// announced, drops and counts the rest, and the QP stays up.
func TestOOOFloodBound(t *testing.T) {
	da, db, ca, cb := pipeDevices(t)
	a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
	const limit = 16 << 10
	ia, ib := a.qp.Info(100), b.qp.Info(200)
	ib.OOOLimit = limit
	o := ConnectOptions{MTU: MTU1024}
	require.NoError(t, a.qp.Connect(ia, ib, o))
	require.NoError(t, b.qp.Connect(ib, ia, o))
	require.True(t, b.qp.Query().SelectiveRepeat)
	require.Equal(t, limit, b.qp.Query().OOOLimit)
	require.Equal(t, limit, a.qp.Query().PeerOOOLimit, "a's requester knows b's bound")

	ph := packet.PseudoHeader{Src: ca.LocalAddr().Addr(), Dst: cb.LocalAddr().Addr(),
		SrcPort: ca.LocalAddr().Port(), DstPort: cb.LocalAddr().Port(), IPFlags: packet.IPv4FlagDF}
	const flood = 2000
	payload := make([]byte, 1024)
	buf := make([]byte, 2048)
	for i := range flood {
		// PSNs after the expected one (100), inside the 2^22 window:
		// each would be buffered if there were room.
		h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey,
			DestQP: b.qp.QPN(), PSN: packet.PSN(101 + i*7)}}
		n, err := packet.Build(buf, &h, payload, &ph)
		require.NoError(t, err)
		w, err := ca.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: cb.LocalAddr()}})
		require.NoError(t, err)
		require.Equal(t, 1, w)
	}
	require.Eventually(t, func() bool { return b.qp.Counters().RcvdPkts >= flood }, testutil.Bound(), time.Millisecond)
	rs := b.qp.Counters().Responder
	slots := uint64(limit / (1024 + 64))
	require.LessOrEqual(t, rs.OOOBytesPeak, uint64(limit), "the bytes held stay within the bound")
	require.LessOrEqual(t, rs.OOOPeak, slots)
	require.Positive(t, rs.OOOPeak)
	// A packet that finds the responder's output queue full (its hole
	// reports not yet sent) is dropped before any check (Dropped); the
	// rest are held or dropped by the out-of-order buffer.
	require.Equal(t, uint64(flood), rs.OOOBuffered+rs.OOODropped+rs.Dropped, "every packet is held or dropped and counted: %+v", rs)
	require.Equal(t, rs.OOODropped, db.Counters().Loss.OOODropped, "the device totals count them too")
	require.Equal(t, QPSRTS, b.qp.State())
}
