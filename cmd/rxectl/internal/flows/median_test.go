package flows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// usDur turns microsecond counts into durations.
func usDur(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Microsecond
	}
	return out
}

// TestSummariseMedian: the median of an odd number of samples is the
// middle one, of an even number the mean of the two middle ones; the
// samples come in capture order, not sorted.
func TestSummariseMedian(t *testing.T) {
	us := func(n int) Duration { return Duration(time.Duration(n) * time.Microsecond) }
	tests := []struct {
		name string
		in   []time.Duration
		want RTT
	}{
		{"no sample", nil, RTT{}},
		{"1 sample", usDur(7), RTT{Samples: 1, Min: us(7), Median: us(7), Max: us(7)}},
		{"2 samples", usDur(30, 10), RTT{Samples: 2, Min: us(10), Median: us(20), Max: us(30)}},
		{"3 samples", usDur(30, 10, 20), RTT{Samples: 3, Min: us(10), Median: us(20), Max: us(30)}},
		{"4 samples", usDur(40, 10, 30, 20), RTT{Samples: 4, Min: us(10), Median: us(25), Max: us(40)}},
		{"4 samples, 2 equal middles", usDur(9, 5, 5, 1), RTT{Samples: 4, Min: us(1), Median: us(5), Max: us(9)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			require.Equal(t, tc.want, summarise(in))
			require.Equal(t, tc.in, in, "the samples are left in their order")
		})
	}
}

// TestMedianNoOverflow: the mean of the two middle samples is taken
// without adding them, so two near the largest Duration do not wrap.
func TestMedianNoOverflow(t *testing.T) {
	const big = time.Duration(1<<63 - 1)
	require.Equal(t, big-1, median([]time.Duration{big - 2, big}))
}

// TestSilenceThresholdMedian: with no Silence option a rewind after a
// quiet time of 1 ms or 4 median RTTs, whichever is larger, is a timeout.
func TestSilenceThresholdMedian(t *testing.T) {
	tests := []struct {
		name string
		rtts []time.Duration
		want time.Duration
	}{
		{"no sample: 1 ms", nil, time.Millisecond},
		{"1 sample of 100 µs: 1 ms", usDur(100), time.Millisecond},
		{"2 samples: 4 × 400 µs", usDur(500, 300), 1600 * time.Microsecond},
		{"3 samples: 4 × 500 µs", usDur(700, 300, 500), 2000 * time.Microsecond},
		{"4 samples: 4 × 450 µs", usDur(900, 300, 500, 400), 1800 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &half{rtts: tc.rtts}
			require.Equal(t, tc.want, h.silenceThreshold())
		})
	}
}

// TestRecoveryMedians: the explain sentence gives the median duration of
// the episodes of one cause and, past three ACK timeouts, their median
// silence: with 2 and 4 episodes the mean of the two middle ones.
func TestRecoveryMedians(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	nak := func(d Duration) Recovery { return Recovery{Cause: CauseSequenceNAK, Duration: d} }
	to := func(frame int, s Duration) Recovery {
		return Recovery{Cause: CauseTimeout, RewindFrame: frame, Silence: s}
	}
	tests := []struct {
		name string
		eps  []Recovery
		want string
	}{
		{"1 NAK", []Recovery{nak(ms(3))}, "1 resend after PSN sequence error NAKs in 3.0 ms"},
		{"2 NAKs", []Recovery{nak(ms(3)), nak(ms(1))}, "2 resends after PSN sequence error NAKs in 2.0 ms (median)"},
		{"3 NAKs", []Recovery{nak(ms(3)), nak(ms(1)), nak(ms(2))}, "3 resends after PSN sequence error NAKs in 2.0 ms (median)"},
		{"4 NAKs", []Recovery{nak(ms(4)), nak(ms(1)), nak(ms(3)), nak(ms(2))}, "4 resends after PSN sequence error NAKs in 2.5 ms (median)"},
		{"4 timeouts", []Recovery{to(5, ms(8)), to(9, ms(2)), to(13, ms(6)), to(17, ms(4))}, "4 ACK timeouts (silences of 5.0 ms median, first at frame 5)"},
		{"5 timeouts", []Recovery{to(5, ms(8)), to(9, ms(2)), to(13, ms(6)), to(17, ms(4)), to(21, ms(5))}, "5 ACK timeouts (silences of 5.0 ms median, first at frame 5)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, recoverySentence(tc.eps))
		})
	}
}
