//go:build unix

package rxe

import (
	"syscall"
	"time"
)

// benchCPUTime returns the user and system CPU time of the process so far
// (getrusage(RUSAGE_SELF)), 0 if the call fails.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
