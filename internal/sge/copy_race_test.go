//go:build race

package sge

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCopyRaceVisible: the race detector sees Copy read src and write dst
// on its vector path too. A child process (this test binary again) races
// a goroutine's unsynchronised store to src or to dst with a 4 KiB Copy
// into a 32-byte aligned destination; it must die reporting the race.
func TestCopyRaceVisible(t *testing.T) {
	if c := os.Getenv("GORXE_COPY_RACE"); c != "" {
		src, dst := make([]byte, 4096), aligned64(4096)
		b := src
		if c == "dst" {
			b = dst
		}
		done := make(chan struct{})
		go func() { b[100] = 1; close(done) }()
		Copy(dst, src) // no happens-before edge with the store
		<-done
		return
	}
	for _, c := range []string{"src", "dst"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCopyRaceVisible$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GORXE_COPY_RACE="+c)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "a race on %s went unreported:\n%s", c, out)
		require.Contains(t, string(out), "WARNING: DATA RACE", c)
	}
}
