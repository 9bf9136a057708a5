package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNamedDeviceCounters: each device counter appears once, under its
// own name and with its own value (rxe's names where rxe_hw_counters.c
// has one, in its order first).
func TestNamedDeviceCounters(t *testing.T) {
	c := Counters{SentPkts: 1, RcvdPkts: 2, SendErr: 3, BadICRC: 4, ICRCRecovered: 5, Malformed: 6, UnknownQP: 7,
		CNPs: 8, LocalDrops: 9, QPErrors: 10, EventsDropped: 11, NotifyDropped: 12, ReceiveErrors: 13,
		PinErrors: 14, PolledPkts: 15, SpinPkts: 16, HeldDropped: 17}
	want := []NamedCounter{{"sent_pkts", 1}, {"rcvd_pkts", 2}, {"send_err", 3}, {"bad_icrc", 4}, {"icrc_recovered", 5},
		{"malformed_pkts", 6}, {"unknown_qp_pkts", 7}, {"cnp_pkts", 8}, {"local_drops", 9}, {"held_dropped", 17}, {"qp_errors", 10},
		{"events_dropped", 11}, {"notify_dropped", 12}, {"receive_errors", 13}, {"pin_errors", 14},
		{"polled_pkts", 15}, {"spin_pkts", 16}}
	got := c.Named()
	require.GreaterOrEqual(t, len(got), len(want))
	require.Equal(t, want, got[:len(want)])
}
