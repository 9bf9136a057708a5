//go:build unix

package perftest

import (
	"fmt"
	"syscall"
	"time"
)

// processCPUTime returns this process's user and system processor time
// (getrusage(2), RUSAGE_SELF).
func processCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
