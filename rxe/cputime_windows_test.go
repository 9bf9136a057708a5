//go:build windows

package rxe

import (
	"time"

	"golang.org/x/sys/windows"
)

// benchCPUTime returns the user and kernel CPU time of the process so far
// (GetProcessTimes), 0 if the call fails.
func benchCPUTime() time.Duration {
	var creation, exit, kernel, user windows.Filetime
	if windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user) != nil {
		return 0
	}
	// FILETIME counts 100 ns intervals.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100
}
