package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rowRE matches perftest's BW row format
// " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf".
var rowRE = regexp.MustCompile(`^ (\d+) *    (\d+) *       (\d+\.\d{2}) *            (\d+\.\d{2}) *\t\t     (\d+\.\d{6}) *$`)

func TestBWLoopback(t *testing.T) {
	for _, cmd := range []string{"read-bw", "write-bw", "send-bw"} {
		t.Run(cmd, func(t *testing.T) {
			out, errs, code := runCmd(t, cmd, "--loopback", "--udp-port", "0", "-s", "8192", "-n", "200")
			require.Equal(t, exitOK, code, errs)
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			require.Equal(t, resultLine, lines[0])
			require.Equal(t, resultLine, lines[len(lines)-1])
			require.Contains(t, out, " Connection type : RC\t\tUsing SRQ      : OFF\n")
			require.Regexp(t, `(?m)^ local address: LID 0000 QPN 0x[0-9a-f]{4,6} PSN (0x[0-9a-f]{4,6}|000000)`, out)
			require.Regexp(t, `(?m)^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:0[12]$`, out)
			require.Contains(t, out, " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n")
			m := rowRE.FindStringSubmatch(lines[len(lines)-2])
			require.NotNil(t, m, "row %q", lines[len(lines)-2])
			require.Equal(t, "8192", m[1])
			require.Equal(t, "200", m[2])
			avg, _ := strconv.ParseFloat(m[4], 64)
			rate, _ := strconv.ParseFloat(m[5], 64)
			require.Positive(t, avg)
			// MsgRate and BW average come from the same elapsed time.
			require.InDelta(t, avg*(1<<20)/8192/1e6, rate, 0.000002+rate*0.01)
		})
	}
}

func TestBWJSONAndAll(t *testing.T) {
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-a", "-n", "5", "--json", "-m", "1024")
	require.Equal(t, exitOK, code, errs)
	var res struct {
		MTU     int        `json:"mtu"`
		Results []bwResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 1024, res.MTU)
	require.Len(t, res.Results, 23)
	for i, r := range res.Results {
		require.Equal(t, 2<<i, r.Size)
		require.Equal(t, 5, r.Iters)
		require.Positive(t, r.Average)
	}
}

func TestBWUsage(t *testing.T) {
	tests := [][]string{
		{"read-bw", "--loopback", "-n", "2"},
		{"read-bw", "--loopback", "-m", "1000"},
		{"read-bw", "--loopback", "host"},
		{"read-bw", "--loopback", "-s", "0"},
		{"read-bw", "--bogus"},
		{"read-bw", "--loopback", "--output", "nope"},
	}
	for _, args := range tests {
		_, errs, code := runCmd(t, args...)
		require.Equal(t, exitUsage, code, "%v", args)
		require.NotEmpty(t, errs)
	}
	_, errs, code := runCmd(t, "read-bw", "somehost")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "not implemented yet")
}

func TestPeakBW(t *testing.T) {
	t0 := time.Unix(0, 0)
	posted := []time.Time{t0, t0.Add(1 * time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	completed := make([]time.Time, 4)
	completed[1] = t0.Add(4 * time.Second) // cq-mod 2: completions at 1 and 3
	completed[3] = t0.Add(5 * time.Second)
	// Windows: (0..1) 4s/2, (0..3) 5s/4, (1..1) 3s/1, (1..3) 4s/3, (2..3) 3s/2, (3..3) 2s/1.
	// The best is 1.25 s per message.
	require.InDelta(t, 100/1.25, peakBW(100, posted, completed, 2), 1e-9)
}
