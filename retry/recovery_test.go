package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecoveryTimerOnExpiry(t *testing.T) {
	var r RTT
	r.Sample(100*us, false) // the timeout is the 2 ms floor
	due := at(10 * time.Millisecond)
	tests := []struct {
		name  string
		late  time.Duration
		probe bool
	}{
		{"on time", 0, true},
		{"timer wake-up latency", 100 * us, true},
		{"a quarter of the timeout", DefaultRecoveryFloor / 4, true},
		{"this end was not running", DefaultRecoveryFloor/4 + us, false},
		{"a long stall", 50 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
			require.Equal(t, tc.probe, tm.OnExpiry(&r, due, due.Add(tc.late)))
			if tc.probe {
				require.Zero(t, tm.Deferrals())
				return
			}
			require.Equal(t, uint64(1), tm.Deferrals())
			require.True(t, tm.OnExpiry(&r, due, due.Add(tc.late)), "once per episode")
			tm.Progress()
			require.False(t, tm.OnExpiry(&r, due, due.Add(tc.late)), "progress starts a new episode")
		})
	}
	tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	require.True(t, tm.OnExpiry(&r, time.Time{}, due), "no deadline: nothing to judge")
}

func TestRecoveryTimerSpurious(t *testing.T) {
	var r RTT
	r.Sample(100*us, false)
	tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	require.Equal(t, DefaultRecoveryFloor, tm.Timeout(&r))

	tm.Expired()
	tm.Spurious(at(0), 7*time.Millisecond)
	require.Equal(t, uint64(1), tm.SpuriousExpiries())
	require.Zero(t, tm.Backoff(), "a spurious expiry undoes its back-off")
	require.Equal(t, 7*time.Millisecond, tm.Timeout(&r), "the silence just seen does not fire the timer again")
	tm.Spurious(at(time.Millisecond), 3*time.Millisecond)
	require.Equal(t, 7*time.Millisecond, tm.Learned(), "the longest recent silence")
	tm.Spurious(at(2*time.Millisecond), time.Second)
	require.Equal(t, 67*time.Millisecond/spuriousShare, tm.Timeout(&r), "capped well below the IB timeout")

	// Decay: halved per half-life without a spurious expiry, then gone.
	tm.Decay(at(2*time.Millisecond + SpuriousHalfLife - 1))
	require.Equal(t, 67*time.Millisecond/spuriousShare, tm.Learned())
	tm.Decay(at(2*time.Millisecond + SpuriousHalfLife))
	require.Equal(t, 67*time.Millisecond/spuriousShare/2, tm.Learned())
	tm.Decay(at(2*time.Millisecond + 4*SpuriousHalfLife))
	require.Equal(t, 67*time.Millisecond/spuriousShare/16, tm.Learned())
	tm.Decay(at(2*time.Millisecond + 6*SpuriousHalfLife))
	require.Zero(t, tm.Learned())
	require.Equal(t, DefaultRecoveryFloor, tm.Timeout(&r), "fast recovery is back")

	off := RecoveryTimer{}
	off.Spurious(at(0), time.Second)
	require.Zero(t, off.Learned(), "no ceiling: the timer is off")
	require.Zero(t, off.Timeout(&r))
}

// TestRecoveryTimerLossFound: each real loss a probe finds halves the
// delay learned from a stall, down to nothing below half the default
// floor; with nothing learned it changes nothing.
func TestRecoveryTimerLossFound(t *testing.T) {
	var r RTT
	r.Sample(100*us, false)
	tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	tm.LossFound(at(0))
	require.Zero(t, tm.Learned())
	require.Equal(t, DefaultRecoveryFloor, tm.Timeout(&r))

	tm.Spurious(at(0), 12*time.Millisecond)
	for i, want := range []time.Duration{6 * time.Millisecond, 3 * time.Millisecond, 1500 * us, 0} {
		tm.LossFound(at(time.Duration(i+1) * time.Millisecond))
		require.Equal(t, want, tm.Learned(), "loss %d", i+1)
	}
	require.Equal(t, DefaultRecoveryFloor, tm.Timeout(&r), "fast recovery is back after four losses")
}

// TestRetryTimeout: during a go-back-N retry the timeout is the RTO (or
// 2·SRTT) with RetryFloor, not DefaultRecoveryFloor, as the floor; a Floor
// set explicitly bounds it too; it backs off like Timeout and never
// exceeds Ceiling.
func TestRetryTimeout(t *testing.T) {
	var rtt RTT
	rt := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	require.Equal(t, rt.Ceiling, rt.RetryTimeout(&rtt), "no sample: the ceiling")
	rtt.Sample(40*time.Microsecond, false) // RTO 120 µs, 2·SRTT 80 µs
	require.Equal(t, RetryFloor, rt.RetryTimeout(&rtt))
	require.Equal(t, 250*time.Microsecond, RetryFloor, "a few loopback round trips, above a timer's wake-up latency")
	require.Equal(t, DefaultRecoveryFloor, rt.Timeout(&rtt), "the usual timeout keeps its floor")
	rtt.Sample(400*time.Microsecond, false)
	require.Equal(t, rtt.RTO(), rt.RetryTimeout(&rtt), "the RTO above the floor")
	rt.Expired()
	require.Equal(t, 2*rtt.RTO(), rt.RetryTimeout(&rtt), "backed off")
	rt.Progress()
	rt.Floor = 5 * time.Millisecond
	require.Equal(t, rt.Floor, rt.RetryTimeout(&rtt), "an explicit floor bounds it")
	for range 20 {
		rt.Expired()
	}
	require.Equal(t, rt.Ceiling, rt.RetryTimeout(&rtt))
	require.Zero(t, (&RecoveryTimer{}).RetryTimeout(&rtt), "off")
}

// TestRecoveryTimerTwiceSRTT: on a steady path RTTVAR decays and the RFC
// 6298 RTO (SRTT + 4·RTTVAR) comes down to about SRTT, which a single
// delayed acknowledgement would exceed; the timeout is then the probe
// timeout of RFC 8985 7.2, 2·SRTT, for Timeout and RetryTimeout alike.
func TestRecoveryTimerTwiceSRTT(t *testing.T) {
	var r RTT
	for range 40 {
		r.Sample(10*time.Millisecond, false)
	}
	require.Equal(t, 10*time.Millisecond, r.SRTT())
	require.Less(t, r.RTO(), 11*time.Millisecond, "RTTVAR has decayed")
	tm := RecoveryTimer{Ceiling: 67 * time.Millisecond}
	require.Equal(t, 20*time.Millisecond, tm.Timeout(&r))
	require.Equal(t, 20*time.Millisecond, tm.RetryTimeout(&r))
	tm.Expired()
	require.Equal(t, 40*time.Millisecond, tm.Timeout(&r), "backed off from 2·SRTT")
}

// TestRecoveryTimerLearnedDecay: the learned delay halves for every
// SpuriousHalfLife since it was last learned or halved (by Decay, Learn
// and LossFound alike, each of which decays first), is capped at a
// quarter of Ceiling, and is forgotten only below half the default floor
// (1 ms).
func TestRecoveryTimerLearnedDecay(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		name string
		do   func(tm *RecoveryTimer)
		want time.Duration
	}
	spurious := func(d, silence time.Duration) func(*RecoveryTimer) {
		return func(tm *RecoveryTimer) { tm.Spurious(at(d), silence) }
	}
	decay := func(d time.Duration) func(*RecoveryTimer) {
		return func(tm *RecoveryTimer) { tm.Decay(at(d)) }
	}
	lossFound := func(d time.Duration) func(*RecoveryTimer) {
		return func(tm *RecoveryTimer) { tm.LossFound(at(d)) }
	}
	learn := func(d, silence time.Duration) func(*RecoveryTimer) {
		return func(tm *RecoveryTimer) { tm.Learn(at(d), silence) }
	}
	tests := []struct {
		name    string
		ceiling time.Duration
		steps   []step
	}{
		{"a quarter of Ceiling", 40 * ms, []step{
			{"a second's silence", spurious(0, time.Second), 10 * ms},
		}},
		{"half-lives count from the rise, not from the last Decay", 67 * ms, []step{
			{"raised", spurious(0, 16*ms), 16 * ms},
			{"1.2 half-lives", decay(300 * ms), 8 * ms},
			{"2 half-lives", decay(500 * ms), 4 * ms},
		}},
		{"a loss found restarts the half-life", 67 * ms, []step{
			{"raised", spurious(0, 16*ms), 16 * ms},
			{"loss found", lossFound(200 * ms), 8 * ms},
			{"one half-life after the rise", decay(250 * ms), 8 * ms},
			{"one half-life after the loss", decay(450 * ms), 4 * ms},
		}},
		{"a loss found after a quiet second decays first", 67 * ms, []step{
			{"raised", spurious(0, 16*ms), 16 * ms},
			{"4 half-lives: 1 ms, then halved", lossFound(time.Second), 0},
		}},
		{"learning after a quiet second decays first", 67 * ms, []step{
			{"raised", spurious(0, 16*ms), 16 * ms},
			{"4 half-lives: 1 ms, then 3 ms learned", learn(time.Second, 3*ms), 3 * ms},
		}},
		{"a shorter spurious silence restarts the half-life", 67 * ms, []step{
			// SpuriousHalfLife: the delay halves for every half-life
			// without a spurious expiry; one whose silence is below
			// the learned delay still shows the machine stalling.
			{"raised", spurious(0, 16*ms), 16 * ms},
			{"a shorter one", spurious(200*ms, 4*ms), 16 * ms},
			{"one half-life after the rise", decay(250 * ms), 16 * ms},
			{"one half-life after the shorter one", decay(450 * ms), 8 * ms},
		}},
		{"half the default floor is kept, below it forgotten", 67 * ms, []step{
			{"raised", spurious(0, 2*ms), 2 * ms},
			{"halved to 1 ms", lossFound(0), DefaultRecoveryFloor / 2},
			{"halved below", lossFound(0), 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := RecoveryTimer{Ceiling: tc.ceiling}
			for _, s := range tc.steps {
				s.do(&tm)
				require.Equal(t, s.want, tm.Learned(), s.name)
			}
		})
	}
}
