package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReceiveSpin checks Options.ReceiveSpin over loopback UDP: with a
// spin longer than the test, every WRITE after the first reaches the
// responder while its receive goroutine is still spinning after the
// previous batch, so the spin reads it (Counters.SpinPkts); with the spin
// off, or once a CQ of the device is busy-polled (its caller reads the
// socket itself), the spin reads nothing.
func TestReceiveSpin(t *testing.T) {
	const writes = 20
	for _, tc := range []struct {
		name     string
		spin     time.Duration
		busyPoll bool // busy-poll the responder's CQ once before the WRITEs
		min, max uint64
	}{
		{name: "spins", spin: time.Minute, min: writes / 2, max: writes},
		{name: "off", spin: -1, min: 0, max: 0},
		{name: "busy-polled", spin: time.Minute, busyPoll: true, min: 0, max: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, z, _ := udpPair(t, Options{ReceiveSpin: tc.spin})
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
			require.GreaterOrEqual(t, got, tc.min, "WRITEs the responder's spin read")
			require.LessOrEqual(t, got, tc.max, "WRITEs the responder's spin read")
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
