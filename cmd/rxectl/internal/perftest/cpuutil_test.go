package perftest

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadCPUStat: on Linux a reading has this process's processor time
// (getrusage) and the host's ticks (/proc/stat), and --cpu_util is
// accepted; where getrusage is missing (windows) the reading fails with
// errors.ErrUnsupported and checkCPUUtil refuses the flag saying the
// figures are unavailable, rather than the run printing a column of zeros.
func TestReadCPUStat(t *testing.T) {
	o := &options{cpuUtil: true, duration: 1}
	s, err := readCPUStat()
	check := o.checkCPUUtil(Tests[0])
	switch runtime.GOOS {
	case "linux":
		require.NoError(t, err)
		require.Positive(t, s.self, "the test's own processor time")
		require.Positive(t, s.total)
		require.LessOrEqual(t, s.busy, s.total)
		require.NoError(t, check)
	case "windows":
		require.ErrorIs(t, err, errors.ErrUnsupported)
		require.ErrorContains(t, check, "--cpu_util: unavailable on windows")
	default:
		if err != nil {
			require.ErrorContains(t, check, "--cpu_util: ")
		}
	}
}
