//go:build !unix

package perftest

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// processCPUTime fails with errors.ErrUnsupported: --cpu_util's figures
// come from getrusage(2) and /proc/stat, which this platform has not, so
// checkCPUUtil refuses the flag rather than print a column of zeros.
func processCPUTime() (time.Duration, error) {
	return 0, fmt.Errorf("unavailable on %s: the figures come from getrusage(2) and /proc/stat: %w", runtime.GOOS, errors.ErrUnsupported)
}
