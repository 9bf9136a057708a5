package testutil

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// judged records what RequireRoCEFrames logs and whether it failed; its
// Fatalf stops the judge as testing's does, by unwinding to judge.
type judged struct {
	failed bool
	msg    string
}

type fatal struct{}

func (j *judged) Helper()             {}
func (j *judged) Logf(string, ...any) {}
func (j *judged) Fatalf(f string, args ...any) {
	j.failed, j.msg = true, fmt.Sprintf(f, args...)
	panic(fatal{})
}

func judge(path, file string, frames int, filter string) (j judged) {
	defer func() {
		if r := recover(); r != nil && r != (fatal{}) {
			panic(r)
		}
	}()
	RequireRoCEFrames(&j, path, file, frames, filter)
	return j
}

// TestRequireRoCEFrames judges kernel rxe's UC capture (640 RoCEv2
// datagrams on port 4791, 41 TCP segments of perftest's exchange): the
// RoCEv2 frames pass with their count, and a wrong count or a frame that
// is not RoCEv2 fails.
func TestRequireRoCEFrames(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (apt-get install tshark)")
	}
	file := filepath.Join("..", "..", "testdata", "captures", "kernel-rxe_uc_write_64KiB.pcap")
	for _, tc := range []struct {
		name   string
		frames int
		filter string
		fails  string
	}{
		{"roce", 640, "udp", ""},
		{"count", 639, "udp", "tshark shows 640 frames, want 639"},
		{"tcp", 681, "", "not RoCEv2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judge(tshark, file, tc.frames, tc.filter)
			if tc.fails == "" {
				require.False(t, j.failed, j.msg)
				return
			}
			require.True(t, j.failed)
			require.Contains(t, j.msg, tc.fails)
		})
	}
}
