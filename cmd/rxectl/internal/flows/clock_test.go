package flows

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

func TestClock(t *testing.T) {
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	tests := []struct {
		name     string
		in, want []int // microseconds
	}{
		{"in order", []int{0, 1, 1, 5}, []int{0, 1, 1, 5}},
		{"one frame back", []int{10, 20, 5, 30}, []int{10, 20, 20, 30}},
		{"before the first", []int{10, -2_000_000, 11}, []int{10, 10, 11}},
		{"a step back that stays", []int{10, 20, 1, 2, 25}, []int{10, 20, 20, 20, 25}},
		{"a jump forward is kept", []int{0, 3_600_000_000, 1}, []int{0, 3_600_000_000, 3_600_000_000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Clock
			var got []int
			for _, us := range tc.in {
				got = append(got, int(c.Next(at(us)).Sub(t0)/time.Microsecond))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// sendsWithTimes is a clean RC exchange of 10 SENDs and their ACKs; step
// moves the time of packet n (0-based) to us.
func sendsWithTimes(n, us int) []pk {
	var ps []pk
	for i := range 10 {
		ps = append(ps, pk{us: 1000 * i, op: packet.RCSendOnly, psn: uint32(100 + i), payload: 1024, ackReq: true},
			pk{us: 1000*i + 10, fromB: true, op: packet.RCAcknowledge, psn: uint32(100 + i), syn: ack})
	}
	ps[n].us = us
	return ps
}

// TestTimeStepsAndJumps: a capture whose time stamps step backwards or
// jump far forwards is analysed without a panic, with no negative time,
// and with a report whose size does not grow with the jump.
func TestTimeStepsAndJumps(t *testing.T) {
	const hour = 3_600_000_000
	tests := []struct {
		name     string
		ps       []pk
		interval time.Duration
	}{
		{"SEND 2 s before the first packet", sendsWithTimes(6, -2_000_000), 0},
		{"ACK 2 s before the first packet", sendsWithTimes(7, -2_000_000), 0},
		{"first packet an hour late", sendsWithTimes(0, hour), 0},
		{"SEND an hour late", sendsWithTimes(6, hour), 0},
		{"SEND an hour late, 1 µs intervals asked", sendsWithTimes(6, hour), time.Microsecond},
		{"last ACK a century late", sendsWithTimes(19, 100*365*24*hour), time.Nanosecond},
		{"SEND a century early", sendsWithTimes(4, -100*365*24*hour), time.Nanosecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, tc.ps), Options{Interval: tc.interval})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			require.Equal(t, 20, c.Flows[0].Packets+c.Flows[1].Packets)
			require.NotEmpty(t, c.Goodput)
			if tc.interval == 0 {
				require.LessOrEqual(t, len(c.Goodput), 20)
			}
			require.LessOrEqual(t, len(c.Goodput), MaxIntervals)
			require.GreaterOrEqual(t, time.Duration(rep.Interval), tc.interval)
			bytes := 0
			for _, g := range c.Goodput {
				bytes += g.Bytes
			}
			require.Equal(t, 10*1024, bytes, "every SEND counted once")
			require.GreaterOrEqual(t, time.Duration(c.RTT.Min), time.Duration(0))
			for _, ep := range c.Recoveries {
				require.GreaterOrEqual(t, time.Duration(ep.Duration), time.Duration(0))
				require.GreaterOrEqual(t, time.Duration(ep.Silence), time.Duration(0))
			}
			intervals := 20
			if tc.interval > 0 {
				intervals = MaxIntervals
			}
			requireSmallReport(t, rep, 20, intervals)
		})
	}
}

// requireSmallReport checks that the text and JSON of rep stay within a
// size linear in the number of packets and goodput intervals.
func requireSmallReport(t *testing.T, rep *Report, packets, intervals int) {
	t.Helper()
	limit := 16<<10 + 2<<10*packets + 128*intervals
	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	require.LessOrEqual(t, buf.Len(), limit, "JSON")
	buf.Reset()
	require.NoError(t, rep.WriteText(&buf))
	require.LessOrEqual(t, buf.Len(), limit, "text")
}
