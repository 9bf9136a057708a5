//go:build !linux

package rxe

import "time"

// newPreciseTimer returns nil: there is no timerfd here, and newWakeTimer
// uses the runtime's timer.
func newPreciseTimer(time.Duration, func()) wakeTimer { return nil }
