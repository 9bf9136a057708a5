//go:build race

package packet

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestICRCCopyRaceVisible: the race detector sees ICRCCopy read src and
// write dst on every path, the assembly's included. A child process (this
// test binary again) races a goroutine's unsynchronised store to src or
// to dst with ICRCCopy over a whole number of fold blocks, where the
// built-in copy touches nothing; it must die reporting the race.
func TestICRCCopyRaceVisible(t *testing.T) {
	if c := os.Getenv("GORXE_ICRCCOPY_RACE"); c != "" {
		src, dst := make([]byte, 4096), make([]byte, 4096)
		b := src
		if c == "dst" {
			b = dst
		}
		done := make(chan struct{})
		go func() { b[100] = 1; close(done) }()
		ICRCCopy(0, dst, src) // no happens-before edge with the store
		<-done
		return
	}
	for _, c := range []string{"src", "dst"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestICRCCopyRaceVisible$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GORXE_ICRCCOPY_RACE="+c)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "a race on %s went unreported:\n%s", c, out)
		require.Contains(t, string(out), "WARNING: DATA RACE", c)
	}
}
