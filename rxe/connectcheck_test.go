package rxe

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConnectRefusesBeforeModify: Connect checks its QP's type and state,
// the peer's ConnInfo and its options before it modifies the QP, so a
// refused Connect leaves the QP in the state it was in (RESET), and a
// Connect with the mistake corrected then connects it. Each bad value is
// one that a step after RESET→INIT takes (the path MTU and the peer's
// GID and QPN at INIT→RTR, the ACK timeout and RNR retry count at
// RTR→RTS): refused by that step's Modify, they left the QP in INIT or
// RTR, from where no later Connect could start.
func TestConnectRefusesBeforeModify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote func(ConnInfo) ConnInfo
		opts   ConnectOptions
	}{
		{name: "zero remote", remote: func(ConnInfo) ConnInfo { return ConnInfo{} }},
		{name: "remote QPN 0", remote: func(c ConnInfo) ConnInfo { c.QPN = 0; return c }},
		{name: "remote GID of the other family", remote: func(c ConnInfo) ConnInfo {
			c.GID = netip.MustParseAddr("2001:db8::1") // the devices are on IPv4
			return c
		}},
		{name: "path MTU beyond the port's", opts: ConnectOptions{MTU: MTU4096 + 1}},
		{name: "timeout beyond 31", opts: ConnectOptions{Timeout: 32}},
		{name: "rnr_retry beyond 7", opts: ConnectOptions{RNRRetry: 8}},
		{name: "min_rnr_timer beyond 31", opts: ConnectOptions{MinRNRTimer: 32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db, _, _ := pipeDevices(t)
			a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
			ia, ib := a.qp.Info(100), b.qp.Info(200)
			bad := ib
			if tc.remote != nil {
				bad = tc.remote(ib)
			}
			err := a.qp.Connect(ia, bad, tc.opts)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Equal(t, QPSReset, a.qp.State(), "a refused Connect leaves the QP as it was")

			require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{}), "Connect again, corrected")
			require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{}))
			require.Equal(t, QPSRTS, a.qp.State())
		})
	}
}

// TestConnectRCOnly: Connect brings up RC QPs only (its steps carry the
// RC attributes of perftest's connection); a UC or UD QP is refused with
// ErrInvalidArgument before anything changes, where the UC QP was left
// in INIT by the INIT→RTR step's refusal of the RNR timer and responder
// resources.
func TestConnectRCOnly(t *testing.T) {
	for _, typ := range []QPType{QPTypeUC, QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			da, db, _, _ := pipeDevices(t)
			a, b := newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
			err := a.qp.Connect(a.qp.Info(1), b.qp.Info(2), ConnectOptions{})
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorContains(t, err, "RC")
			require.Equal(t, QPSReset, a.qp.State())
		})
	}
}

// TestConnectLocalIsThisQP: Connect's local is this QP's own ConnInfo
// (QP.Info), the half given to the peer; one with another QPN, such as
// the peer's half passed with the arguments swapped, is refused with
// ErrInvalidArgument and the QP stays in RESET. Accepted, the swap
// connected the QP to itself (the remote was its own half) with the
// peer's PSN as its send PSN.
func TestConnectLocalIsThisQP(t *testing.T) {
	da, db, _, _ := pipeDevices(t)
	a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
	ia, ib := a.qp.Info(100), b.qp.Info(200)
	err := a.qp.Connect(ib, ia, ConnectOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "local")
	require.Equal(t, QPSReset, a.qp.State())
	require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{}))
}
