package main

import (
	"encoding/hex"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// posts builds post times (ns) whose consecutive gaps are deltas.
func posts(deltas ...int64) []int64 {
	t := []int64{0}
	for _, d := range deltas {
		t = append(t, t[len(t)-1]+d)
	}
	return t
}

// TestLatStats checks print_report_lat's statistics against values
// computed by hand.
func TestLatStats(t *testing.T) {
	// SEND/WRITE (halved): 8 iterations, 7 samples, m = 8 - 3 = 5.
	// Sorted ns: 1000 1500 2000 3000 4000 | 9000 20000 (dropped), /2000.
	r := latStats(2, posts(3000, 1000, 2000, 9000, 4000, 1500, 20000), 2)
	require.Equal(t, 2, r.Size)
	require.Equal(t, 8, r.Iters)
	require.InDelta(t, 0.5, r.Min, 1e-12)
	require.InDelta(t, 4.5, r.Max, 1e-12)     // delta[m] = 9000: the smaller of the two dropped samples
	require.InDelta(t, 1.0, r.Typical, 1e-12) // m odd: delta[m/2] = 2000
	require.InDelta(t, 1.15, r.Avg, 1e-12)    // (0.5+0.75+1+1.5+2)/5
	// Deviations 0.65 0.4 0.15 -0.35 -0.85 all truncate to 0: the quirk
	// prints 0 where the true deviation is 0.53.
	require.Equal(t, 0.0, r.Stdev)
	require.InDelta(t, 4.5, r.P99, 1e-12)  // delta[ceil(4.95)] = delta[5]
	require.InDelta(t, 4.5, r.P999, 1e-12) // delta[ceil(4.995)] = delta[5]

	// READ/atomic (full round trip): 7 iterations, 6 samples, m = 4.
	// Sorted ns: 2000 3001 4000 7000 | 10000 50000, /1000.
	r = latStats(64, posts(10000, 2000, 4000, 3001, 50000, 7000), 1)
	require.InDelta(t, 2.0, r.Min, 1e-12)
	require.InDelta(t, 10.0, r.Max, 1e-12)
	require.InDelta(t, 3.5, r.Typical, 1e-12) // m even: (4000+3001)/2 in integer cycles = 3500
	require.InDelta(t, 4.00025, r.Avg, 1e-12) // 16.001/4
	// Deviations 2.00025 0.99925 0.00025 -2.99975 truncate to 2 0 0 -2
	// (toward zero, not -3): sqrt((4+0+0+4)/4).
	require.InDelta(t, math.Sqrt(2), r.Stdev, 1e-12)
	require.InDelta(t, 10.0, r.P99, 1e-12)
	require.InDelta(t, 10.0, r.P999, 1e-12)

	// 1000 iterations of 1 us: m = 997, 99% = delta[988], 99.9% = delta[997].
	d := make([]int64, 999)
	for i := range d {
		d[i] = int64(1000 + i) // sorted already: 1.000 .. 1.998 us
	}
	r = latStats(2, posts(d...), 1)
	require.InDelta(t, 1.0, r.Min, 1e-12)
	require.InDelta(t, 1.997, r.Max, 1e-12)
	require.InDelta(t, 1.498, r.Typical, 1e-12) // m = 997 odd: delta[498]
	require.InDelta(t, 1.988, r.P99, 1e-12)     // ceil(987.03) = 988
	require.InDelta(t, 1.997, r.P999, 1e-12)    // ceil(996.003) = 997
	require.Equal(t, " 2       1000          1.00           2.00         1.50     \t       1.50        \t0.00   \t\t1.99    \t\t2.00   \n", latRow(r))
}

func TestPeakBW(t *testing.T) {
	s := int64(1e9)
	posted := []int64{1, s, 2 * s, 3 * s}
	completed := make([]int64, 4)
	completed[1] = 4 * s // cq-mod 2: completions at 1 and 3
	completed[3] = 5 * s
	// Windows: (0..1) 4s/2, (0..3) 5s/4, (1..1) 3s/1, (1..3) 4s/3,
	// (2..3) 3s/2, (3..3) 2s/1. The best is 1.25 s per message.
	require.InDelta(t, 100/1.25, peakBW(100, posted, completed, 2), 1e-6)

	// Five requests, cq-mod 2: the last is signaled explicitly and its
	// windows count too: (4..4) 0.5 s.
	posted = append(posted, 4*s)
	completed = append(completed, 4*s+s/2)
	require.InDelta(t, 100/0.5, peakBW(100, posted, completed, 2), 1e-6)
	require.Zero(t, peakBW(100, posted, make([]int64, 5), 2))
}

func TestBWRow(t *testing.T) {
	r := bwReport{Size: 65536, Iters: 1000, Peak: 10934.23, Avg: 10930.11, MsgRate: 0.174882}
	require.Equal(t, " 65536      1000             10934.23            10930.11\t\t     0.174882\n", bwRow(r, false))
	// Gb/s below 0.1: REPORT_FMT_EXT.
	r = bwReport{Size: 8, Iters: 20, Peak: 0.0184, Avg: 0.0166, MsgRate: 0.002179}
	require.Equal(t, " 8          20           0.018400            0.016600            0.002179\n", bwRow(r, true))
}

func TestAddrLines(t *testing.T) {
	k := keyMsg{QPN: 0x11, PSN: 0x8d6a0b, OutReads: 0x80, RKey: 0x1234, VAddr: 0x7f2e5f64b000,
		GID: [16]byte{10: 255, 11: 255, 12: 192, 13: 168, 14: 1, 15: 7}}
	require.Equal(t, " local address: LID 0000 QPN 0x0011 PSN 0x8d6a0b OUT 0x80 RKey 0x001234 VAddr 0x007f2e5f64b000\n"+
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n", addrLines("local", verbRead, k))
	require.Equal(t, " remote address: LID 0000 QPN 0x0011 PSN 0x8d6a0b RKey 0x001234 VAddr 0x007f2e5f64b000\n"+
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n", addrLines("remote", verbWrite, k))
	k.PSN = 0
	require.Equal(t, " local address: LID 0000 QPN 0x0011 PSN 000000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n",
		addrLines("local", verbSend, k))
}

func TestKeyMsg(t *testing.T) {
	// The example of the protocol reference (§5.2).
	k := keyMsg{OutReads: 0x10, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f1234567000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 0xc0, 13: 0xa8, 14: 1, 15: 7}}
	want := "0000:0010:000011:abcdef:00001234:00007f1234567000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:07:00000000:\x00"
	require.Equal(t, want, string(k.marshal()))
	require.Len(t, k.marshal(), keyMsgSize)
	got, err := parseKeyMsg([]byte(want))
	require.NoError(t, err)
	require.Equal(t, k, got)

	// A message real perftest sent (read_64KiB.txt), case-insensitive.
	b, _ := hex.DecodeString("303030303a303038303a3030303032633a3533383039613a30303030316462653a303030303766396539663066363030303a30303a30303a30303a30303a30303a30303a30303a30303a30303a30303a66663a66663a30613a34643a30303a30333a30303030303030303a00")
	got, err = parseKeyMsg(b)
	require.NoError(t, err)
	require.Equal(t, keyMsg{OutReads: 0x80, QPN: 0x2c, PSN: 0x53809a, RKey: 0x1dbe, VAddr: 0x7f9e9f0f6000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0x4d, 15: 3}}, got)
	require.Equal(t, b, got.marshal())
	upper := []byte(want)
	copy(upper[17:23], "ABCDEF")
	got, err = parseKeyMsg(upper)
	require.NoError(t, err)
	require.Equal(t, uint32(0xabcdef), got.PSN)

	for _, bad := range []string{
		want[:keyMsgSize-1],              // short
		want[:keyMsgSize-1] + "x",        // no NUL
		"000:" + want[4:],                // a field too narrow
		"0000:0010:00001g" + want[16:],   // not hex
		want[:keyMsgSize-2] + "\x00\x00", // last colon missing
		"0000:0010:000011:abcdef:00001234:00007f1234567000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:0700000000::\x00",
	} {
		_, err := parseKeyMsg([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestVersionAndScalarMessages(t *testing.T) {
	b := versionMsg(4791)
	require.Len(t, b, versionMsgSize)
	require.Equal(t, "6.27\x00rxectl\x12\xb7\x00\x00\x00", string(b))
	v := parseVersionMsg(b)
	require.Equal(t, peerVersion{text: "6.27", value: 6.27, rxectl: true, udpPort: 4791}, v)
	// perftest's version avoids negotiate_params (>= 6.28) and passes
	// check_version_compatibility (>= 5.70).
	require.GreaterOrEqual(t, v.value, 5.70)
	require.Less(t, v.value, 6.28)

	perftest, _ := hex.DecodeString("362e3036000000000000000000000000")
	require.Equal(t, peerVersion{text: "6.06", value: 6.06}, parseVersionMsg(perftest))
	for s, want := range map[string]float64{"6.29": 6.29, "5.1x": 5.1, "": 0, "x": 0, " 6": 6, "7.": 7} {
		require.Equal(t, want, atof(s), "%q", s)
	}

	require.Equal(t, []byte("3\x00"), mtuMsg(3))
	require.Equal(t, 5, parseMTUMsg([]byte("5\x00")))
	require.Equal(t, []byte{0, 0, 0x10, 0}, int32Msg(4096))
	require.Equal(t, "0000000000010000", hex.EncodeToString(uint64Msg(65536)))
	// perftest's hton_double: the report of read_64KiB.txt's client.
	require.Equal(t, "4030689d208caa9d", hex.EncodeToString(doubleMsg(math.Float64frombits(0x4030689d208caa9d))))
	require.InDelta(t, 16.4086, math.Float64frombits(0x4030689d208caa9d), 1e-4) // MiB/s
}
