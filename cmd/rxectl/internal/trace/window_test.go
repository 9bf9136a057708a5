package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/ladder"
)

func psn(n uint32) *uint32 { return &n }

// TestFilterWindowInclusive: --time T1-T2 keeps the events at T1 and at
// T2 themselves, in the timeline and in the ladder.
func TestFilterWindowInclusive(t *testing.T) {
	evs := []Event{
		{T: 0.001, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(1)},
		{T: 0.002, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(2)},
		{T: 0.003, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(3)},
		{T: 0.004, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(4)},
	}
	f := Filter{From: 0.002, To: 0.003}
	var buf bytes.Buffer
	require.NoError(t, WriteTimeline(&buf, evs, f))
	require.Equal(t, "    0.002000  a                     QP 17    requester  → RC_SEND_ONLY PSN 2\n"+
		"    0.003000  a                     QP 17    requester  → RC_SEND_ONLY PSN 3\n", buf.String())
	d, err := Ladder(evs, f)
	require.NoError(t, err)
	require.Len(t, d.Items, 2)
	require.Equal(t, "SEND_ONLY 2", d.Items[0].Label)
	require.Equal(t, "SEND_ONLY 3", d.Items[1].Label)
}

// TestLadderResendOfPacketBeforeWindow: a packet sent again inside the
// window is drawn as a resend though its first transmission fell before
// the window.
func TestLadderResendOfPacketBeforeWindow(t *testing.T) {
	evs := []Event{
		{T: 0.001, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(5)},
		{T: 0.001, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(6)},
		{T: 0.010, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(5)},
		{T: 0.011, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_SEND_ONLY", PSN: psn(7)},
	}
	d, err := Ladder(evs, Filter{From: 0.005, To: 0.02})
	require.NoError(t, err)
	require.Len(t, d.Items, 2)
	require.Equal(t, ladder.Resent, d.Items[0].Kind)
	require.Equal(t, ladder.Request, d.Items[1].Kind)
}

// TestLadderCompleterPasses: a completer pass is written into the label
// of the response it processed, once; a second pass gets its own note.
// Only a MIDDLE response, which folds with its neighbours, carries the
// pass into its fold key. The retransmit timer is drawn as such; other
// timers say which they are and what follows.
func TestLadderCompleterPasses(t *testing.T) {
	evs := []Event{
		{T: 0.001, Dev: "a", QPN: 17, Ev: "send", Engine: "requester", Op: "RC_RDMA_READ_REQUEST", PSN: psn(1)},
		{T: 0.002, Dev: "a", QPN: 17, Ev: "recv", Engine: "completer", Op: "RC_RDMA_READ_RESPONSE_MIDDLE", PSN: psn(2)},
		{T: 0.002, Dev: "a", QPN: 17, Ev: "states", Engine: "completer", States: []string{"GET_ACK", "CHECK_PSN", "READ"}},
		{T: 0.003, Dev: "a", QPN: 17, Ev: "recv", Engine: "completer", Op: "RC_ACKNOWLEDGE", PSN: psn(3), Syndrome: "ACK", MSN: 1},
		{T: 0.003, Dev: "a", QPN: 17, Ev: "states", Engine: "completer", States: []string{"GET_ACK", "CHECK_ACK"}},
		{T: 0.003, Dev: "a", QPN: 17, Ev: "states", Engine: "completer", States: []string{"GET_WQE", "COMP_WQE"}},
		{T: 0.004, Dev: "a", QPN: 17, Ev: "timer_fire", Engine: "completer", Timer: "retransmit", Action: "go_back_n", PSN: psn(4)},
		{T: 0.005, Dev: "a", QPN: 17, Ev: "timer_fire", Engine: "completer", Timer: "rnr_wait", Action: "rnr", PSN: psn(4)},
	}
	d, err := Ladder(evs, Filter{})
	require.NoError(t, err)
	require.Len(t, d.Items, 6)
	require.Equal(t, "READ_RESPONSE_MIDDLE 2 | CHECK_PSN READ", d.Items[1].Label)
	require.Equal(t, "READ_RESPONSE_MIDDLE | CHECK_PSN READ", d.Items[1].Fold)
	require.Equal(t, "ACKNOWLEDGE 3 MSN 1 | CHECK_ACK", d.Items[2].Label)
	require.Empty(t, d.Items[2].Fold)
	require.Equal(t, "completer: COMP_WQE", d.Items[3].Label)
	require.Equal(t, ladder.Timeout, d.Items[4].Kind)
	require.Equal(t, "retransmission timer fired", d.Items[4].Label)
	require.Equal(t, "rnr_wait timer fired: RNR wait over, resend from PSN 4", d.Items[5].Label)
}

// TestFlagsRefuse: --qp takes a 24-bit QP number (IBTA 9.2: the BTH's
// DestQP field) and --time a window of positive length.
func TestFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"--qp", "0x1000000"},
		{"--time", "0.5-0.5"},
	} {
		var f Filter
		_, err := parseFlags(&f, args)
		require.Error(t, err, "%v", args)
	}
	var f Filter
	_, err := parseFlags(&f, []string{"--qp", "0xffffff", "--time", "0.5-0.6"})
	require.NoError(t, err)
	require.Equal(t, Filter{QPN: 0xffffff, HasQPN: true, From: 0.5, To: 0.6}, f)
}

func parseFlags(f *Filter, args []string) (string, error) {
	var out string
	return out, flags(f, &out).Parse(args)
}

// TestNoQPErrorFlagsParse: the flags the "no QP" error names are ones
// rxectl trace takes back, small and large times included.
func TestNoQPErrorFlagsParse(t *testing.T) {
	for _, want := range []Filter{
		{From: 0.00001, To: 0.00002},
		{From: 0, To: 1234567.5},
		{QPN: 18, HasQPN: true, From: 0.01, To: 0.02},
	} {
		_, err := Ladder(nil, want)
		require.ErrorIs(t, err, ErrNoQP)
		_, fl, ok := strings.Cut(err.Error(), " matching ")
		require.True(t, ok, err.Error())
		var got Filter
		_, perr := parseFlags(&got, strings.Fields(fl))
		require.NoError(t, perr, fl)
		require.Equal(t, want, got, fl)
	}
}

// TestDescribeTimerActions: each action rxe's timer_fire names
// (rxe.TraceEvent.Action) and each kind of resend a send is
// (rxe.TraceEvent.Resend) is said in words, with the PSN it starts from.
func TestDescribeTimerActions(t *testing.T) {
	tests := []struct {
		ev   Event
		want string
	}{
		{Event{Ev: "timer_fire", Timer: "retransmit", Action: "go_back_n", PSN: psn(7)}, "timer fired (retransmit): go back N from PSN 7"},
		{Event{Ev: "timer_fire", Timer: "credit_probe", Action: "credit_probe"}, "timer fired (credit_probe): the credit probe may go"},
		{Event{Ev: "timer_fire", Timer: "recovery", Action: "double", PSN: psn(9)}, "timer fired (recovery): second copy from PSN 9"},
		{Event{Ev: "timer_fire", Timer: "sr_hold", Action: "none"}, "timer fired (sr_hold): nothing to send"},
		{Event{Ev: "send", Op: "RC_SEND_ONLY", PSN: psn(9), Resend: "double"}, "→ RC_SEND_ONLY PSN 9  [resend: second copy]"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, describe(&tc.ev))
	}
}

// TestReadLongLine: a line too long to be a trace event is an error that
// names its line, as any other line Read cannot take.
func TestReadLongLine(t *testing.T) {
	in := "{\"t\":0,\"ev\":\"send\"}\n{\"t\":0,\"ev\":\"" + strings.Repeat("x", 2<<20) + "\"}\n"
	evs, err := Read(strings.NewReader(in))
	require.ErrorContains(t, err, "line 2")
	require.Len(t, evs, 1)
}

// TestTimeFlagExponents: --time takes times in exponent form, as %g
// writes them, with the range's '-' told apart from an exponent's sign.
func TestTimeFlagExponents(t *testing.T) {
	var got Filter
	_, err := parseFlags(&got, []string{"--time", "1e-05-2.5e-05"})
	require.NoError(t, err)
	require.Equal(t, Filter{From: 1e-05, To: 2.5e-05}, got)
}
