package flows

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestWriteTextLossyRC checks the text report of lossyRC line by line
// against the fixture: packets and bytes (BTH 12, RETH 16, AETH 4, ICRC 4
// and the payload), messages, gaps and rewinds, NAKs, the three recovery
// episodes, the one RTT sample not taken from a resent request (Karn),
// and the goodput of new payload per 1 ms: 3 SEND packets of 1024 bytes,
// PSN 102 resent (new to the responder) and two of 100 bytes in the first
// (4296 bytes: 34.4 Mbit/s), 100 + 8 bytes in the sixth (0.86 Mbit/s).
func TestWriteTextLossyRC(t *testing.T) {
	rep := analyse(build(t, lossyRC), Options{Interval: time.Millisecond})
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Equal(t, `connection 1: 10.0.0.1:49152 QP 0x000011 ⇄ 10.0.0.2:4791 QP 0x000022 (PMTU 1024)
  10.0.0.1:49152 → 10.0.0.2:4791 QP 0x000022: 11 packets, 5820 bytes, frames 1-17
    RC_SEND_FIRST                             1 packet          1040 bytes
    RC_SEND_MIDDLE                            2 packets         2080 bytes
    RC_SEND_LAST                              2 packets         2080 bytes
    RC_SEND_ONLY                              5 packets          580 bytes
    RC_RDMA_WRITE_ONLY                        1 packet            40 bytes
    messages 5, psn_gaps 1 (1 PSN missing), psn_rewinds 3, first gap at frame 3
  10.0.0.2:4791 → 10.0.0.1:49152 QP 0x000011: 7 packets, 140 bytes, frames 4-18
    RC_ACKNOWLEDGE                            7 packets          140 bytes
    messages 0, psn_gaps 0 (0 PSNs missing), psn_rewinds 0
    NAKs: sequence error 1, RNR 1 (timer codes [12]), remote access 1, invalid request 0, remote operational 0
  recoveries: 3
    1. sequence NAK: frames 3-7 (28 µs), rewind at frame 5 to PSN 102 (highest sent 103), 1 round, 2 packets resent
    2. timeout: frames 10-12 (5.0 ms), rewind at frame 11 to PSN 105 (highest sent 105), 1 round, 1 packet resent, after 5.0 ms of silence
    3. RNR wait: frames 13-16 (710 µs), rewind at frame 15 to PSN 106 (highest sent 106), 1 round, 1 packet resent, RNR timer code 12
  RTT: 1 sample, min 10 µs, median 10 µs, max 10 µs
  goodput in Mbit/s per 1.0 ms:
      34.4      0      0      0      0   0.86
`, b.String()[:bytes.Index(b.Bytes(), []byte("  explain:"))])
}

// TestWriteTextGoodputGbits: a peak of 1 Gbit/s or more is written in
// Gbit/s, ten intervals a line. lossyRead's READ responses carry 1024
// bytes in 2 µs intervals (4.10 Gbit/s), its SEND 64 bytes (0.26).
func TestWriteTextGoodputGbits(t *testing.T) {
	rep := analyse(build(t, lossyRead), Options{})
	require.Equal(t, Duration(2*time.Microsecond), rep.Interval, "25 µs in at most 20 intervals")
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), `  goodput in Gbit/s per 2.0 µs:
         0      0   4.10   4.10   4.10      0      0   4.10      0      0
      0.26
`)
}

// TestFrameList: one frame, several, and past maxListedFrames the first
// ten and how many more.
func TestFrameList(t *testing.T) {
	require.Equal(t, "frame 7", frameList([]int{7}))
	require.Equal(t, "frames 7, 9, 12", frameList([]int{7, 9, 12}))
	var fs []int
	for i := 1; i <= 11; i++ {
		fs = append(fs, i)
	}
	require.Equal(t, "frames 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 1 more", frameList(fs))
	require.Equal(t, "frames 1, 2, 3, 4, 5, 6, 7, 8, 9, 10", frameList(fs[:10]))
}

// TestRate: three significant digits at most, also when rounding
// carries into the next decade (9.996 is 10.0, not 10.00).
func TestRate(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.864, "0.86"}, {9.5, "9.50"}, {10, "10.0"}, {34.368, "34.4"}, {99.4, "99.4"}, {100, "100"}, {4096, "4096"},
		{9.994, "9.99"}, {9.996, "10.0"}, {99.94, "99.9"}, {99.96, "100"},
	} {
		require.Equal(t, tc.want, rate(tc.v), "%v", tc.v)
	}
}

// TestNoFlowsText: a capture whose only RoCE packets are bad-ICRC ones
// naming no flow says so on the line after "no RoCEv2 flows".
func TestNoFlowsText(t *testing.T) {
	rep := &Report{BadICRCNoFlow: 2, BadICRCNoFlowFrames: []int{3, 4}}
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Equal(t, "no RoCEv2 flows\nbad_icrc 2 naming no flow of the capture (dropped by the receiver; their addresses or QP may be what was corrupted), frames 3, 4\n", b.String())
}

// TestIntervalBounds: the goodput interval gives at most 20 intervals
// when none is asked for, and at most MaxIntervals when the one asked for
// would give more (span/step intervals after the first: a span of exactly
// n steps needs n+1).
func TestIntervalBounds(t *testing.T) {
	sends := func(lastUS int) []pk {
		return []pk{{us: 0, op: packet.RCSendOnly, psn: 1, payload: 8}, {us: lastUS, op: packet.RCSendOnly, psn: 2, payload: 8}}
	}
	tests := []struct {
		name   string
		lastUS int
		asked  time.Duration
		want   time.Duration
	}{
		{"19 µs: 20 intervals of 1 µs", 19, 0, time.Microsecond},
		{"20 µs: 21 would be too many", 20, 0, 2 * time.Microsecond},
		{"999 µs: 1000 intervals of 1 µs", 999, time.Microsecond, time.Microsecond},
		{"1000 µs: 1001 would be too many", 1000, time.Microsecond, 2 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, sends(tc.lastUS)), Options{Interval: tc.asked})
			require.Equal(t, Duration(tc.want), rep.Interval)
		})
	}
}

// TestWriteTextProbeEpisode: an episode a probe opened is named by its
// cause once, without the note that a probe was part of another cause's
// episode.
func TestWriteTextProbeEpisode(t *testing.T) {
	w := func(us int, psn uint32) pk {
		return pk{us: us, op: packet.RCRDMAWriteOnly, psn: psn, payload: 8, ackReq: true}
	}
	a := func(us int, psn uint32) pk {
		return pk{us: us, fromB: true, op: packet.RCAcknowledge, psn: psn, syn: ack}
	}
	rep := analyse(build(t, []pk{w(0, 100), a(10, 100), w(20, 101), w(21, 102), w(22, 103),
		w(500, 101), w(501, 104), a(700, 103), a(710, 104)}), Options{})
	require.Equal(t, CauseProbe, rep.Connections[0].Recoveries[0].Cause)
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b))
	require.Contains(t, b.String(), "    1. probe: frames ")
	require.NotContains(t, b.String(), ", a probe (then on at the highest PSN)")
}
