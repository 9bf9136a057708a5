package rxe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCountMADs: a MADCount counts the MADs QP1 takes from its address
// (given IPv4-mapped or not), none from another, and nothing after Stop,
// while GSICounters.RcvdMADs counts them all.
func TestCountMADs(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	client := newCMEnd(t, da)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := da.Addr().Addr()
	fromA := db.CountMADs(netip.AddrFrom16(a.As16())) // IPv4-mapped
	fromOther := db.CountMADs(netip.MustParseAddr("127.0.0.9"))
	defer fromOther.Stop()
	refused := func() {
		// Nobody listens on port 9: db answers the REQ with a REJ.
		_, err := Dial(ctx, da, db.Addr().Addr().String()+":9", CMOptions{PD: client.pd, SendCQ: client.cq})
		var rej *RejectError
		require.ErrorAs(t, err, &rej)
	}
	before := db.GSICounters().RcvdMADs
	refused()
	got := db.GSICounters().RcvdMADs - before
	require.NotZero(t, got)
	require.Equal(t, got, fromA.Load(), "the MADs from a")
	require.Zero(t, fromOther.Load(), "MADs from another address")

	fromA.Stop()
	refused()
	require.Greater(t, db.GSICounters().RcvdMADs-before, got)
	require.Equal(t, got, fromA.Load(), "counted after Stop")
}
